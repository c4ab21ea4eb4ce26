package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/ledger/ledgertest"

	"github.com/cronlock/cronlock/statedir"
)

// openState opens a fresh state directory, closed at cleanup.
func openState(t testing.TB) *statedir.Dir {
	t.Helper()
	d, err := statedir.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func mustOpenMemory(t testing.TB, s StateStore) *Memory {
	t.Helper()
	m, err := OpenMemory(s)
	if err != nil {
		t.Fatalf("OpenMemory: %v", err)
	}
	return m
}

// The persisted memory backend keeps every behaviour of the protocol. The
// store is memoryStore's with a state directory attached to its (empty)
// Memory, as OpenMemory of an empty directory makes it, so that every
// helper of the memory store applies.
func TestConformance_MemoryPersisted(t *testing.T) {
	for _, c := range ledgertest.Cases {
		t.Run(c.Name, func(t *testing.T) {
			s := memoryStore(t)
			s.NewClient(t).(*Memory).store = openState(t)
			c.Fn(t, s)
		})
	}
}

// A restart (a new Memory on the same state file) never re-runs a claimed
// slot and never hands out a fencing token again; the pause flag survives;
// a lease does not (its run ended with the process).
func TestMemoryState_SurvivesRestart(t *testing.T) {
	dir := openState(t)
	m := mustOpenMemory(t, dir)
	now := ledgertest.NowSlot(t, m)
	c := ledgertest.MustClaim(t, m, ledgertest.Sched("a", now, "n"), ledger.Claimed)
	ledgertest.WaitPast(t, m, now)
	ledgertest.MustClaim(t, m, ledgertest.Sched("a", now+1, "n"), ledger.Overlap)
	if err := m.Pause(ledgertest.Ctx(t), "c"); err != nil {
		t.Fatal(err)
	}

	r := mustOpenMemory(t, dir)
	if st := ledgertest.MustState(t, r, "a"); st.Slot != now || st.Fence != c.Token || st.LeaseHolder != "" {
		t.Errorf("job a after restart: got %+v; want slot %d, token %d, no lease", st, now, c.Token)
	}
	if st := ledgertest.MustState(t, r, "c"); !st.Paused {
		t.Errorf("job c after restart: not paused")
	}
	e := ledgertest.MustClaim(t, r, ledgertest.Sched("a", now, "other"), ledger.ClaimedElsewhere) // the slot claimed before the restart
	if e.Token != 0 {
		t.Errorf("old slot after restart: got %+v", e)
	}
	if n := ledgertest.MustClaim(t, r, ledgertest.Sched("a", now+1, "n"), ledger.Claimed); n.Token <= c.Token {
		t.Errorf("token after restart: %d, want > %d", n.Token, c.Token)
	}
	ledgertest.MustClaim(t, r, ledgertest.Sched("c", now, "n"), ledger.Paused)
	if err := r.Resume(ledgertest.Ctx(t), "c"); err != nil {
		t.Fatal(err)
	}
	if st := ledgertest.MustState(t, mustOpenMemory(t, dir), "c"); st.Paused {
		t.Errorf("job c after resume and restart: still paused")
	}
}

// The file is the documented JSON layout (docs/protocol.md).
func TestMemoryState_FileFormat(t *testing.T) {
	dir := openState(t)
	m := mustOpenMemory(t, dir)
	now := ledgertest.NowSlot(t, m)
	c := ledgertest.MustClaim(t, m, ledgertest.Sched("backup", now, "n"), ledger.Claimed)
	m.State(ledgertest.Ctx(t), "never-claimed") // creates an empty entry, which is not written
	if err := m.Pause(ledgertest.Ctx(t), "p"); err != nil {
		t.Fatal(err)
	}
	data, err := dir.ReadFile(MemoryStateFile)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"format":"cronlock memory backend state","version":1,"jobs":{"backup":{"slot":%d,"fence":%d},"p":{"slot":0,"fence":0,"paused":true}}}`,
		now, c.Token)
	if string(data) != want {
		t.Errorf("state file:\ngot  %s\nwant %s", data, want)
	}
}

// The hand-written encoder produces what encoding/json produces, for any
// job name (the memory backend does not rely on config's name rules).
func TestMemoryState_EncodeMatchesEncodingJSON(t *testing.T) {
	jobs := map[string]memDurable{"plain.job-1_x": {Slot: 1, Fence: 2}, `quo"te\`: {Fence: 3, Paused: true},
		"<html>&": {Slot: 4, Runs: 9}, "zürich": {Slot: 5, Fence: 6}, "tab\tnl\n": {Slot: 7}, "\u2028": {Fence: 8}}
	var snap []namedDurable
	for name, d := range jobs {
		snap = append(snap, namedDurable{name, d})
	}
	got := encodeMemState(snap)
	want, err := json.Marshal(memStateFile{Format: memStateFormat, Version: memStateVersion, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("encodeMemState:\ngot  %s\nwant %s", got, want)
	}
	back, err := decodeMemState(got, time.Now())
	if err != nil || !maps.Equal(back, jobs) {
		t.Errorf("decode: got %v, %v; want %v", back, err, jobs)
	}
}

// A state file that cannot be used stops the start with an error naming
// the file and the fix, never a silent reset.
func TestMemoryState_CorruptFileIsAnError(t *testing.T) {
	for name, content := range map[string]string{
		"not json":       "slot=5",
		"truncated":      `{"format":"cronlock memory backend state","version":1,"jobs":{"a":{"slot":5,`,
		"empty":          "",
		"other format":   `{"format":"x","version":1,"jobs":{}}`,
		"newer version":  `{"format":"cronlock memory backend state","version":2,"jobs":{}}`,
		"negative fence": `{"format":"cronlock memory backend state","version":1,"jobs":{"a":{"slot":5,"fence":-1}}}`,
		"unknown field":  `{"format":"cronlock memory backend state","version":1,"jobs":{"a":{"slot":5,"fenc":3}}}`,
		"trailing data":  `{"format":"cronlock memory backend state","version":1,"jobs":{}} {}`,
		"jobs null":      `{"format":"cronlock memory backend state","version":1,"jobs":null}`,
		"no jobs":        `{"format":"cronlock memory backend state","version":1}`,
		"job null":       `{"format":"cronlock memory backend state","version":1,"jobs":{"tick":null}}`,
		"fence null":     `{"format":"cronlock memory backend state","version":1,"jobs":{"tick":{"slot":5,"fence":null}}}`,
		"duplicate key":  `{"format":"cronlock memory backend state","version":1,"jobs":{"tick":{"slot":5,"fence":1,"fence":99}}}`,
		"duplicate job":  `{"format":"cronlock memory backend state","version":1,"jobs":{"tick":{"slot":5,"fence":1},"tick":{"slot":5,"fence":99}}}`,
		"escaped twice":  `{"format":"cronlock memory backend state","version":1,"jobs":{"tick":{"slot":5,"fence":1,"f\u0065nce":99}}}`,
		"duplicate top":  `{"format":"cronlock memory backend state","version":1,"jobs":{"tick":{"slot":5,"fence":1}},"jobs":{}}`,
		"other case":     `{"format":"cronlock memory backend state","version":1,"jobs":{"tick":{"slot":5,"Fence":1}}}`,
		"year 2500":      `{"format":"cronlock memory backend state","version":1,"jobs":{"tick":{"slot":16725225600,"fence":1}}}`,
		"fence too big":  `{"format":"cronlock memory backend state","version":1,"jobs":{"tick":{"slot":5,"fence":9223372036854775808}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := openState(t)
			if err := dir.WriteFile(MemoryStateFile, []byte(content)); err != nil {
				t.Fatal(err)
			}
			m, err := OpenMemory(dir)
			if !errors.Is(err, ErrCorruptState) || m != nil {
				t.Fatalf("OpenMemory: got %v, %v; want ErrCorruptState", m, err)
			}
			path := filepath.Join(dir.Path(), MemoryStateFile)
			want := []string{path, "restore it from a backup", "delete it"}
			switch name {
			case "job null", "fence null", "duplicate key", "escaped twice", "other case", "year 2500":
				want = append(want, `job "tick"`)
			}
			for _, s := range want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// A slot up to a year ahead of the local clock (a clock that was set
// back, say) is kept; one after that is refused (above).
func TestMemoryState_SlotAheadWithinAYear(t *testing.T) {
	dir := openState(t)
	slot := time.Now().Add(300 * 24 * time.Hour).Unix()
	content := fmt.Sprintf(`{"format":"cronlock memory backend state","version":1,"jobs":{"tick":{"slot":%d,"fence":3}}}`, slot)
	if err := dir.WriteFile(MemoryStateFile, []byte(content)); err != nil {
		t.Fatal(err)
	}
	st, err := mustOpenMemory(t, dir).State(context.Background(), "tick")
	if err != nil || st.Slot != slot || st.Fence != 3 {
		t.Fatalf("State: got %+v, %v; want slot %d, fence 3", st, err, slot)
	}
}

// A fencing token at math.MaxInt64 is never incremented (it would wrap
// negative, and R4's max would then go back): a claim fails, as a claim
// whose outcome is unknown does (the slot is skipped redis_error), and
// leaves the state as it was.
func TestMemoryState_FenceAtMaximum(t *testing.T) {
	ctx := context.Background()
	dir := openState(t)
	content := fmt.Sprintf(`{"format":"cronlock memory backend state","version":1,"jobs":{"tick":{"slot":100,"fence":%d}}}`, int64(math.MaxInt64))
	if err := dir.WriteFile(MemoryStateFile, []byte(content)); err != nil {
		t.Fatal(err)
	}
	m := mustOpenMemory(t, dir)
	if c, err := m.Claim(ctx, ledgertest.Sched("tick", ledgertest.NowSlot(t, m), "n")); err == nil || !strings.Contains(err.Error(), "maximum") || c.Token != 0 {
		t.Fatalf("Claim: got %+v, %v; want an error about the maximum token", c, err)
	}
	st, err := m.State(ctx, "tick")
	if err != nil || st.Slot != 100 || st.Fence != math.MaxInt64 || st.LeaseHolder != "" {
		t.Fatalf("State after the failed claim: got %+v, %v; want slot 100, fence MaxInt64, no lease", st, err)
	}
}

// A state file that cannot be read is an error naming it, not a reset.
func TestMemoryState_UnreadableFileIsAnError(t *testing.T) {
	dir := openState(t)
	if err := os.Mkdir(filepath.Join(dir.Path(), MemoryStateFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMemory(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir.Path(), MemoryStateFile)) {
		t.Fatalf("OpenMemory: got %v, want an error naming the file", err)
	}
}

// When the file cannot be written the claim fails (the slot is not run);
// the claimed slot and fence stay taken and reach the file with the next
// write that succeeds.
func TestMemoryState_WriteFailureFailsTheClaim(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "state")
	dir, err := statedir.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	m := mustOpenMemory(t, dir)
	ledgertest.MustClaim(t, m, ledgertest.ManualReq("j"), ledger.Claimed)
	if err := os.RemoveAll(path); err != nil { // a real fault: the directory is gone
		t.Fatal(err)
	}
	if c, err := m.Claim(ledgertest.Ctx(t), ledgertest.ManualReq("j")); err == nil || !strings.Contains(err.Error(), MemoryStateFile) {
		t.Fatalf("claim with the state directory gone: got %+v, %v; want an error naming %s", c, err, MemoryStateFile)
	}
	// Slot 2 stays taken: a retry is refused, after another attempt to
	// write what is not on disk yet.
	if c, err := m.Claim(ledgertest.Ctx(t), ledgertest.ManualReq("j")); err == nil {
		t.Fatalf("retry of slot 2 with the directory gone: got %+v, nil; want an error", c)
	}
	if err := m.Pause(ledgertest.Ctx(t), "p"); err == nil {
		t.Fatal("pause with the state directory gone: got nil error")
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(ledgertest.Ctx(t), "p"); err != nil { // the same change again: written this time
		t.Fatalf("pause again with the directory back: %v", err)
	}
	c := ledgertest.MustClaim(t, m, ledgertest.ManualReq("j"), ledger.Claimed)
	r := mustOpenMemory(t, dir)
	if st := ledgertest.MustState(t, r, "j"); st.Fence != c.Token {
		t.Errorf("after restart: got token %d, want %d", st.Fence, c.Token)
	}
	if st := ledgertest.MustState(t, r, "p"); !st.Paused {
		t.Errorf("after restart: job p not paused")
	}
}

// Concurrent claims on a real state directory each return only when the
// file holds their fence.
func TestMemoryState_ClaimReturnsAfterTheWrite(t *testing.T) {
	const jobs, slots = 16, 20
	cs := openState(t)
	m := mustOpenMemory(t, cs)
	var wg sync.WaitGroup
	for i := range jobs {
		job := fmt.Sprintf("job%02d", i)
		wg.Go(func() {
			for slot := int64(1); slot <= slots; slot++ {
				c, err := m.Claim(ledgertest.Ctx(t), ledgertest.ManualReq(job))
				if err != nil || c.Outcome != ledger.Claimed {
					t.Errorf("%s slot %d: got %+v, %v", job, slot, c, err)
					return
				}
				var f memStateFile
				data, err := cs.ReadFile(MemoryStateFile)
				if err == nil {
					err = json.Unmarshal(data, &f)
				}
				if err != nil || f.Jobs[job].Fence < c.Token {
					t.Errorf("%s slot %d: claim returned fence %d, file holds %+v (%v)", job, slot, c.Token, f.Jobs[job], err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// gatedStore is an in-memory StateStore whose writes wait for a gate, so
// that a synctest bubble can hold a write in progress.
type gatedStore struct {
	gate   chan struct{} // a write waits for one receive
	mu     sync.Mutex
	files  map[string][]byte
	writes int
}

func (g *gatedStore) Path() string { return "/gated" }

func (g *gatedStore) ReadFile(name string) ([]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if d, ok := g.files[name]; ok {
		return d, nil
	}
	return nil, os.ErrNotExist
}

func (g *gatedStore) WriteFile(name string, data []byte) error {
	<-g.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	g.files[name] = data
	g.writes++
	return nil
}

// Claims that arrive while a write is in progress wait for it and then
// share one write (group commit); none returns before its write.
func TestMemoryState_GroupCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedStore{gate: make(chan struct{}), files: map[string][]byte{}}
		m := mustOpenMemory(t, g)
		returned := make(chan int64, 11)
		claim := func(job string) {
			c, err := m.Claim(t.Context(), ledgertest.ManualReq(job))
			if err != nil {
				t.Errorf("claim %s: %v", job, err)
			}
			returned <- c.Token
		}
		go claim("first")
		synctest.Wait() // "first" is writing, held at the gate
		for i := range 10 {
			go claim(fmt.Sprintf("job%d", i))
		}
		synctest.Wait()
		if n := len(returned); n != 0 {
			t.Fatalf("%d claims returned before any write ended, want 0", n)
		}
		g.gate <- struct{}{} // the first write ends; one waiter writes for all ten
		synctest.Wait()
		if n := len(returned); n != 1 {
			t.Fatalf("after the first write: %d claims returned, want 1", n)
		}
		g.gate <- struct{}{}
		synctest.Wait()
		if n := len(returned); n != 11 || g.writes != 2 {
			t.Fatalf("after the second write: %d claims returned, %d writes; want 11, 2", n, g.writes)
		}
		var f memStateFile
		if err := json.Unmarshal(g.files[MemoryStateFile], &f); err != nil || len(f.Jobs) != 11 {
			t.Fatalf("file: got %d jobs (%v), want 11", len(f.Jobs), err)
		}
	})
}

// A claim waiting for a write returns ctx's error when ctx ends first;
// its change still reaches the file with that write.
func TestMemoryState_WaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedStore{gate: make(chan struct{}), files: map[string][]byte{}}
		m := mustOpenMemory(t, g)
		go m.Claim(t.Context(), ledgertest.ManualReq("a"))
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := m.Claim(ctx, ledgertest.ManualReq("b"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("claim b: got %v, want context.DeadlineExceeded", err)
		}
		g.gate <- struct{}{} // a's write ends; its snapshot was taken before b
		synctest.Wait()
		if g.writes != 1 {
			t.Fatalf("got %d writes, want 1: nobody waits for b", g.writes)
		}
		go m.Claim(t.Context(), ledgertest.ManualReq("c"))
		synctest.Wait()
		g.gate <- struct{}{} // c's write covers b as well
		synctest.Wait()
		var f memStateFile
		if err := json.Unmarshal(g.files[MemoryStateFile], &f); err != nil || f.Jobs["b"].Fence == 0 || f.Jobs["c"].Fence == 0 {
			t.Fatalf("file after the next write: got %+v (%v), want jobs b and c with their tokens", f.Jobs, err)
		}
	})
}

// BenchmarkClaim_MemoryPersisted is the cost of one claim with the state
// file on the disk under t.TempDir() (write, fsync, rename, fsync of the
// directory), for a state of 1 and of 10,000 jobs.
func BenchmarkClaim_MemoryPersisted(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			m := mustOpenMemory(b, openState(b))
			for i := range n - 1 {
				m.jobs[fmt.Sprintf("other-job-%05d", i)] = &memJob{slot: 1767225600 + int64(i), fence: int64(i)}
			}
			var slot int64
			for b.Loop() {
				slot++
				mustClaimB(b, m, "bench", slot)
			}
		})
	}
}

// BenchmarkClaim_MemoryPersistedParallel claims from 8 goroutines (jobs):
// concurrent claims share writes.
func BenchmarkClaim_MemoryPersistedParallel(b *testing.B) {
	m := mustOpenMemory(b, openState(b))
	var mu sync.Mutex
	next := 0
	b.SetParallelism(8) // × GOMAXPROCS goroutines
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		job := fmt.Sprintf("job%d", next)
		next++
		mu.Unlock()
		var slot int64
		for pb.Next() {
			slot++
			mustClaimB(b, m, job, slot)
		}
	})
}

func BenchmarkEncodeMemState10k(b *testing.B) {
	var jobs []namedDurable
	for i := range 10_000 {
		jobs = append(jobs, namedDurable{fmt.Sprintf("other-job-%05d", i), memDurable{Slot: 1767225600 + int64(i), Fence: int64(i)}})
	}
	var n int
	for b.Loop() {
		n = len(encodeMemState(jobs))
	}
	b.ReportMetric(float64(n), "bytes")
}

func mustClaimB(b *testing.B, m *Memory, job string, slot int64) {
	c, err := m.Claim(context.Background(), ledgertest.ManualReq(job))
	if err != nil || c.Outcome != ledger.Claimed {
		b.Fatalf("claim %s slot %d: got %v, %v", job, slot, c.Outcome, err)
	}
}
