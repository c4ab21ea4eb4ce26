package statedir

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func openTemp(t *testing.T) (*Dir, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state")
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return d, path
}

// restartDir closes d and opens its directory again, as a restarted daemon does.
func restartDir(t *testing.T, d *Dir, path string) *Dir {
	t.Helper()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// reloaded is d's counts as the next incarnation of its daemon reads them.
func reloaded(t *testing.T, d *Dir, path string) *SeenCounts {
	t.Helper()
	c, _, err := LoadSeenCounts(restartDir(t, d, path), "cronlock")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The counts a node saw come back after its restart, each only raised,
// never lowered, and Run writes each rise without being asked twice.
func TestSeenCounts_SurviveARestart(t *testing.T) {
	d, path := openTemp(t)
	c, _, err := LoadSeenCounts(d, "cronlock")
	if err != nil {
		t.Fatalf("a new directory: %v", err)
	}
	if _, ok := c.Get("backup"); ok {
		t.Fatal("a new directory has counts")
	}
	ctx, cancel := context.WithCancel(context.Background())
	reports := make(chan error, 16)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx, func(err error) { reports <- err }) }()
	c.Saw("backup", 7, 1)
	if err := <-reports; err != nil {
		t.Fatalf("write: %v", err)
	}
	c.Saw("backup", 5, 0) // lower: kept as it was, nothing to write
	c.Saw("billing", 3, 2)
	if err := <-reports; err != nil {
		t.Fatalf("write: %v", err)
	}
	cancel()
	<-done
	select {
	case err := <-reports:
		t.Fatalf("a write with nothing new: %v", err)
	default:
	}

	again, _, err := LoadSeenCounts(restartDir(t, d, path), "cronlock")
	if err != nil {
		t.Fatal(err)
	}
	for job, want := range map[string]Seen{"backup": {Seq: 7, Runs: 1}, "billing": {Seq: 3, Runs: 2}} {
		if got, ok := again.Get(job); !ok || got != want {
			t.Errorf("%s after the restart: %+v (kept %v), want %+v", job, got, ok, want)
		}
	}
}

// Run writes what rose while ctx ended: the last finishes of a shutdown
// are kept.
func TestSeenCounts_RunWritesTheLastRiseAtTheEnd(t *testing.T) {
	d, path := openTemp(t)
	c, _, _ := LoadSeenCounts(d, "cronlock")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.Saw("backup", 2, 1)
	<-c.wake // the rise is seen only by the end of Run, as when ctx ended first
	var got []error
	_ = c.Run(ctx, func(err error) { got = append(got, err) })
	if len(got) != 1 || got[0] != nil {
		t.Fatalf("reports at the end: %v, want one write", got)
	}
	again := reloaded(t, d, path)
	if s, _ := again.Get("backup"); s != (Seen{Seq: 2, Runs: 1}) {
		t.Fatalf("after the restart: %+v", s)
	}
}

// A file that cannot be read is an error naming it and what is lost; the
// counts start empty and the next write replaces the file.
func TestSeenCounts_MalformedFile(t *testing.T) {
	for name, content := range map[string]string{"not json": "{", "another version": `{"version":2,"jobs":{}}`} {
		t.Run(name, func(t *testing.T) {
			d, path := openTemp(t)
			if err := os.WriteFile(filepath.Join(path, SeenCountsName), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			c, _, err := LoadSeenCounts(d, "cronlock")
			if err == nil || !strings.Contains(err.Error(), SeenCountsName) || !strings.Contains(err.Error(), "ledger counts") {
				t.Fatalf("error %v, want one naming %s and what is lost", err, SeenCountsName)
			}
			if kept, err := os.ReadFile(filepath.Join(path, SeenCountsName+".corrupt")); err != nil || string(kept) != content {
				t.Errorf("the unreadable file kept beside: %q, %v; want its content", kept, err)
			}
			c.Saw("backup", 1, 1)
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := LoadSeenCounts(restartDir(t, d, path), "cronlock"); err != nil {
				t.Fatalf("after the next write: %v", err)
			}
		})
	}
}

// A failed write is reported and made again at the next flush: a
// directory in the file's place makes the rename fail, for root too.
func TestSeenCounts_FailedWriteIsRetried(t *testing.T) {
	d, path := openTemp(t)
	c, _, _ := LoadSeenCounts(d, "cronlock")
	in := filepath.Join(path, SeenCountsName)
	if err := os.MkdirAll(filepath.Join(in, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	c.Saw("backup", 1, 1)
	if err := c.Flush(); err == nil {
		t.Fatal("a write over a directory succeeded")
	}
	if dirty, _ := c.due(); !dirty {
		t.Fatal("a failed write is not due again")
	}
	if err := os.RemoveAll(in); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	again := reloaded(t, d, path)
	if s, _ := again.Get("backup"); s != (Seen{Seq: 1, Runs: 1}) {
		t.Fatalf("after the retry: %+v", s)
	}
}

// Counts seen in another ledger (another redis.key_prefix) are dropped,
// with a notice: they would "repair" a fresh ledger into refusing max_runs
// jobs that never ran there.
func TestSeenCounts_OtherLedgerDropped(t *testing.T) {
	d, path := openTemp(t)
	c, _, _ := LoadSeenCounts(d, "cronlock")
	c.Saw("backup", 4, 1)
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	again, notice, err := LoadSeenCounts(restartDir(t, d, path), "staging")
	if err != nil || !strings.Contains(notice, `"cronlock"`) || !strings.Contains(notice, `"staging"`) {
		t.Fatalf("another ledger: notice %q, error %v; want a notice naming both", notice, err)
	}
	if s, ok := again.Get("backup"); ok {
		t.Errorf("counts of another ledger kept: %+v", s)
	}
}

// After a failed write, Run writes again within seenRetry though no count
// rises (the last count of a rare job must not wait for the next one).
func TestSeenCounts_RunRetriesAFailedWrite(t *testing.T) {
	synctest.Test(t, testRunRetries)
}

func testRunRetries(t *testing.T) {
	d, path := openTemp(t)
	c, _, _ := LoadSeenCounts(d, "cronlock")
	in := filepath.Join(path, SeenCountsName)
	if err := os.MkdirAll(filepath.Join(in, "x"), 0o700); err != nil { // the rename fails, for root too
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reports := make(chan error, 4)
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() { defer close(done); _ = c.Run(ctx, func(err error) { reports <- err }) }()
	c.Saw("backup", 1, 1)
	if err := <-reports; err == nil {
		t.Fatal("a write over a directory succeeded")
	}
	if err := os.RemoveAll(in); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-reports:
		if err != nil {
			t.Fatalf("the retry: %v", err)
		}
	case <-time.After(2 * seenRetry):
		t.Fatalf("no write within %v of the failed one", 2*seenRetry)
	}
}

// A job's first counts and a rise of its runs are written within
// seenEvery; rises of seq alone share one write within seenLazy (every
// claim raises a seq: hundreds a second on a busy node).
func TestSeenCounts_WhenRisesAreWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, path := openTemp(t)
		c, _, _ := LoadSeenCounts(d, "cronlock")
		ctx, cancel := context.WithCancel(t.Context())
		var mu sync.Mutex
		var wrote []time.Time
		writes := func() []time.Time { mu.Lock(); defer mu.Unlock(); return slices.Clone(wrote) }
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = c.Run(ctx, func(err error) {
				if err != nil {
					t.Errorf("write: %v", err)
				}
				mu.Lock()
				wrote = append(wrote, time.Now())
				mu.Unlock()
			})
		}()
		start := time.Now()
		for i := range 100 { // a rise of seq every 10 ms for 1 s
			c.Saw("tick", int64(i+1), 0)
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		if w := writes(); len(w) != 1 || w[0] != start {
			t.Fatalf("writes in the first second: %v, want one at once (the job's first counts)", w)
		}
		time.Sleep(seenLazy)
		synctest.Wait()
		if w := writes(); len(w) != 2 || w[1].Sub(w[0]) != seenLazy {
			t.Fatalf("writes after seenLazy: %v, want a second one seenLazy after the first", w)
		}
		c.Saw("tick", 101, 1) // a run counted (max_runs): soon
		ran := time.Now()
		time.Sleep(seenEvery)
		synctest.Wait()
		if w := writes(); len(w) != 3 || w[2].Sub(ran) > seenEvery {
			t.Fatalf("writes after a rise of runs: %v, want one within %v", w, seenEvery)
		}
		cancel()
		<-done
		again := reloaded(t, d, path)
		if s, _ := again.Get("tick"); s != (Seen{Seq: 101, Runs: 1}) {
			t.Errorf("kept after the last write: %+v", s)
		}
	})
}

// Retain forgets the jobs no longer configured, at the next write.
func TestSeenCounts_RetainForgetsRemovedJobs(t *testing.T) {
	d, path := openTemp(t)
	c, _, _ := LoadSeenCounts(d, "cronlock")
	c.Saw("kept", 1, 0)
	c.Saw("removed", 2, 0)
	c.Retain([]string{"kept", "new"})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	again := reloaded(t, d, path)
	if _, ok := again.Get("removed"); ok {
		t.Error("a removed job's counts kept")
	}
	if s, ok := again.Get("kept"); !ok || s.Seq != 1 {
		t.Errorf("a configured job's counts: %+v, %v", s, ok)
	}
}
