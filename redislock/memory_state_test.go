package redislock

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

	"github.com/cronlock/cronlock/actors"
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
	for _, c := range conformance {
		t.Run(c.name, func(t *testing.T) {
			s := memoryStore(t)
			s.newClient(t).(*Memory).store = openState(t)
			c.fn(t, s)
		})
	}
}

// A restart (a new Memory on the same state file) never re-runs a claimed
// or skipped slot and never hands out a fencing token again; the pause
// flag survives; a lease does not (its run ended with the process).
func TestMemoryState_SurvivesRestart(t *testing.T) {
	dir := openState(t)
	m := mustOpenMemory(t, dir)
	lease := actors.ClaimRequest{Job: "a", Slot: 100, Owner: "n:1", TTL: time.Hour, Lease: true}
	mustClaim(t, m, lease, actors.Claimed)
	mustClaim(t, m, actors.ClaimRequest{Job: "a", Slot: 101, Owner: "n:2", TTL: time.Hour, Lease: true}, actors.Overlap)
	mustClaim(t, m, actors.ClaimRequest{Job: "b", Slot: 7}, actors.Claimed)
	mustClaim(t, m, actors.ClaimRequest{Job: "b", Slot: 8}, actors.Claimed)
	if err := m.Pause(ctxT(t), "c"); err != nil {
		t.Fatal(err)
	}

	r := mustOpenMemory(t, dir)
	for _, tt := range []struct {
		job          string
		slot, fence  int64
		paused, held bool
	}{{"a", 101, 1, false, false}, {"b", 8, 2, false, false}, {"c", 0, 0, true, false}} {
		st := mustState(t, r, tt.job)
		if st.Slot != tt.slot || st.Fence != tt.fence || st.Paused != tt.paused || (st.LeaseHolder != "") != tt.held {
			t.Errorf("job %s after restart: got slot %d fence %d paused %v holder %q; want slot %d fence %d paused %v, no lease",
				tt.job, st.Slot, st.Fence, st.Paused, st.LeaseHolder, tt.slot, tt.fence, tt.paused)
		}
	}
	mustClaim(t, r, actors.ClaimRequest{Job: "a", Slot: 101}, actors.ClaimedElsewhere)
	mustClaim(t, r, actors.ClaimRequest{Job: "b", Slot: 8}, actors.ClaimedElsewhere)
	if c := mustClaim(t, r, actors.ClaimRequest{Job: "b", Slot: 9}, actors.Claimed); c.Fence != 3 {
		t.Errorf("first claim after restart: got fence %d, want 3", c.Fence)
	}
	if c := mustClaim(t, r, lease, actors.ClaimedElsewhere); c.Fence != 0 {
		t.Errorf("old slot after restart: got %+v", c)
	}
	mustClaim(t, r, actors.ClaimRequest{Job: "c", Slot: 1}, actors.Paused)
	if err := r.Resume(ctxT(t), "c"); err != nil {
		t.Fatal(err)
	}
	if st := mustState(t, mustOpenMemory(t, dir), "c"); st.Paused || st.Slot != 1 {
		t.Errorf("job c after resume and restart: got paused %v slot %d, want false, 1", st.Paused, st.Slot)
	}
}

// The file is the documented JSON layout (docs/protocol.md).
func TestMemoryState_FileFormat(t *testing.T) {
	dir := openState(t)
	m := mustOpenMemory(t, dir)
	mustClaim(t, m, actors.ClaimRequest{Job: "backup", Slot: 1767225600}, actors.Claimed)
	m.State(ctxT(t), "never-claimed") // creates an empty entry, which is not written
	if err := m.Pause(ctxT(t), "p"); err != nil {
		t.Fatal(err)
	}
	data, err := dir.ReadFile(MemoryStateFile)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"format":"cronlock memory backend state","version":1,"jobs":{"backup":{"slot":1767225600,"fence":1},"p":{"slot":0,"fence":0,"paused":true}}}`
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
// negative): a claim that would hand out the next one fails, as a claim
// whose outcome is unknown does (the engine skips the slot as
// redis_error), and leaves the slot and the lease as they were. Claims
// that hand out no token still work.
func TestMemoryState_FenceAtMaximum(t *testing.T) {
	ctx := context.Background()
	dir := openState(t)
	content := fmt.Sprintf(`{"format":"cronlock memory backend state","version":1,"jobs":{"tick":{"slot":100,"fence":%d}}}`, int64(math.MaxInt64))
	if err := dir.WriteFile(MemoryStateFile, []byte(content)); err != nil {
		t.Fatal(err)
	}
	m := mustOpenMemory(t, dir)
	req := actors.ClaimRequest{Job: "tick", Slot: 200, Owner: "n1", Lease: true, TTL: time.Minute}
	if c, err := m.Claim(ctx, req); err == nil || !strings.Contains(err.Error(), "maximum") || c.Fence != 0 {
		t.Fatalf("Claim: got %+v, %v; want an error about the maximum fence", c, err)
	}
	st, err := m.State(ctx, "tick")
	if err != nil || st.Slot != 100 || st.Fence != math.MaxInt64 || st.LeaseHolder != "" {
		t.Fatalf("State after the failed claim: got %+v, %v; want slot 100, fence MaxInt64, no lease", st, err)
	}
	if c, err := m.Claim(ctx, actors.ClaimRequest{Job: "tick", Slot: 50}); err != nil || c.Outcome != actors.ClaimedElsewhere {
		t.Errorf("claim of an old slot: got %+v, %v; want claimed elsewhere", c, err)
	}
	// The same through the state repair, without a state file.
	mem := NewMemory()
	if _, err := mem.Claim(ctx, actors.ClaimRequest{Job: "j", Slot: 1, MinFence: math.MaxInt64}); err == nil {
		t.Error("claim repaired to the maximum fence: got no error")
	}
	if st, _ := mem.State(ctx, "j"); st.Fence != math.MaxInt64 || st.Slot != 0 {
		t.Errorf("after the repair: got %+v, want fence MaxInt64, slot 0", st)
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
	mustClaim(t, m, actors.ClaimRequest{Job: "j", Slot: 1}, actors.Claimed)
	if err := os.RemoveAll(path); err != nil { // a real fault: the directory is gone
		t.Fatal(err)
	}
	if c, err := m.Claim(ctxT(t), actors.ClaimRequest{Job: "j", Slot: 2}); err == nil || !strings.Contains(err.Error(), MemoryStateFile) {
		t.Fatalf("claim with the state directory gone: got %+v, %v; want an error naming %s", c, err, MemoryStateFile)
	}
	// Slot 2 stays taken: a retry is refused, after another attempt to
	// write what is not on disk yet.
	if c, err := m.Claim(ctxT(t), actors.ClaimRequest{Job: "j", Slot: 2}); err == nil {
		t.Fatalf("retry of slot 2 with the directory gone: got %+v, nil; want an error", c)
	}
	if err := m.Pause(ctxT(t), "p"); err == nil {
		t.Fatal("pause with the state directory gone: got nil error")
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(ctxT(t), "p"); err != nil { // the same change again: written this time
		t.Fatalf("pause again with the directory back: %v", err)
	}
	if c := mustClaim(t, m, actors.ClaimRequest{Job: "j", Slot: 3}, actors.Claimed); c.Fence != 3 {
		t.Errorf("claim after the directory is back: got fence %d, want 3 (fence 2 stays used)", c.Fence)
	}
	r := mustOpenMemory(t, dir)
	if st := mustState(t, r, "j"); st.Slot != 3 || st.Fence != 3 {
		t.Errorf("after restart: got slot %d fence %d, want 3, 3", st.Slot, st.Fence)
	}
	if st := mustState(t, r, "p"); !st.Paused {
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
				c, err := m.Claim(ctxT(t), actors.ClaimRequest{Job: job, Slot: slot})
				if err != nil || c.Outcome != actors.Claimed {
					t.Errorf("%s slot %d: got %+v, %v", job, slot, c, err)
					return
				}
				var f memStateFile
				data, err := cs.ReadFile(MemoryStateFile)
				if err == nil {
					err = json.Unmarshal(data, &f)
				}
				if err != nil || f.Jobs[job].Fence < c.Fence {
					t.Errorf("%s slot %d: claim returned fence %d, file holds %+v (%v)", job, slot, c.Fence, f.Jobs[job], err)
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
			c, err := m.Claim(t.Context(), actors.ClaimRequest{Job: job, Slot: 1})
			if err != nil {
				t.Errorf("claim %s: %v", job, err)
			}
			returned <- c.Fence
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
		go m.Claim(t.Context(), actors.ClaimRequest{Job: "a", Slot: 1})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := m.Claim(ctx, actors.ClaimRequest{Job: "b", Slot: 1})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("claim b: got %v, want context.DeadlineExceeded", err)
		}
		g.gate <- struct{}{} // a's write ends; its snapshot was taken before b
		synctest.Wait()
		if g.writes != 1 {
			t.Fatalf("got %d writes, want 1: nobody waits for b", g.writes)
		}
		go m.Claim(t.Context(), actors.ClaimRequest{Job: "c", Slot: 1})
		synctest.Wait()
		g.gate <- struct{}{} // c's write covers b as well
		synctest.Wait()
		var f memStateFile
		if err := json.Unmarshal(g.files[MemoryStateFile], &f); err != nil || f.Jobs["b"].Fence != 1 || f.Jobs["c"].Fence != 1 {
			t.Fatalf("file after the next write: got %+v (%v), want jobs a, b and c with fence 1", f.Jobs, err)
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
	c, err := m.Claim(context.Background(), actors.ClaimRequest{Job: job, Slot: slot})
	if err != nil || c.Outcome != actors.Claimed {
		b.Fatalf("claim %s slot %d: got %v, %v", job, slot, c.Outcome, err)
	}
}
