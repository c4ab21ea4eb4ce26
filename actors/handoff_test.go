package actors_test

import (
	"context"
	"github.com/cronlock/cronlock/ledger/memory"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"go.uber.org/zap"
)

// finishRecorder is the memory backend, recording the FinishRequests.
type finishRecorder struct {
	*memory.Memory
	mu   sync.Mutex
	reqs []ledger.FinishRequest
}

func (f *finishRecorder) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	return f.Memory.Finish(ctx, req)
}

// A reload that changes lock_ttl and max_runs of an overlap: queue job
// whose runs follow one another through hand-overs (each run's finish
// hands the lease to the pending slot) takes effect at the next hand-over:
// the handed lease gets the new lock_ttl, and max_runs stops the chain. Before,
// every hand-over copied the first run's lease settings, so a job that is
// always busy kept its old lock_ttl (a frozen holder blocked the job for
// the old TTL) and ran past its new max_runs for as long as slots queued.
func TestJob_HandOverTakesReloadedSettings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testJob(t, "q", "sleep 2500ms")
		cfg.Overlap, cfg.CatchupWindow = config.OverlapQueue, 5*time.Second // the pending slots run after their next came due (R7)
		locker := &finishRecorder{Memory: memory.NewMemory()}
		metrics := NewMetrics(nil)
		metrics.InitJob(cfg.Name)
		results, kill := make(chan RunFinished, 10), make(chan struct{})
		job := NewJob(cfg, JobDeps{MaxSkew: testMaxSkew, Log: zap.NewNop(), Metrics: metrics, Locker: locker, NodeID: "n1",
			Results: results, Phantoms: make(chan Phantom, 10), Kill: kill, Start: fakeproc.Start})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- job.Run(ctx) }()

		slot := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(slot))
		job.Inbox() <- Fire{Job: "q", Slot: slot}
		time.Sleep(time.Second)
		job.Inbox() <- Fire{Job: "q", Slot: slot.Add(time.Second)} // queued behind the first run
		synctest.Wait()
		reloaded := cfg
		reloaded.LockTTL, reloaded.MaxRuns = 7*time.Second, 2
		if err := job.Send(ctx, Reconfigure{Job: reloaded}); err != nil {
			t.Fatal(err)
		}
		first := <-results // its finish hands the lease on
		time.Sleep(time.Second)
		job.Inbox() <- Fire{Job: "q", Slot: slot.Add(3 * time.Second)} // queued behind the second run
		second := <-results                                            // its finish: runs = 2 = max_runs
		time.Sleep(5 * time.Second)
		synctest.Wait()
		cancel()
		close(kill)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if second.Trigger != ledger.TriggerQueued || second.Slot != slot.Add(time.Second) {
			t.Fatalf("second run: got trigger %s slot %v, want queued %v (first %v)", second.Trigger, second.Slot, slot.Add(time.Second), first.Slot)
		}
		select {
		case third := <-results:
			t.Errorf("got a third run (slot %v trigger %s), want none: max_runs 2 was reached", third.Slot, third.Trigger)
		default:
		}
		locker.mu.Lock()
		defer locker.mu.Unlock()
		if len(locker.reqs) < 2 {
			t.Fatalf("got %d finishes, want 2", len(locker.reqs))
		}
		if got := locker.reqs[0]; got.TTL != 7*time.Second || got.MaxRuns != 2 {
			t.Errorf("first finish (hand-over after the reload): got TTL %v max_runs %d, want 7s and 2", got.TTL, got.MaxRuns)
		}
		if got := locker.reqs[1]; got.MaxRuns != 2 {
			t.Errorf("second finish: got max_runs %d, want 2", got.MaxRuns)
		}
	})
}
