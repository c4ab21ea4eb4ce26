package actors_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
)

// overlap: queue — a slot that fires while this node runs the job is
// claimed and queued (not skipped overlap_local), the next one is skipped
// overlap, and the queued slot runs (trigger queued, the next fence) at
// the instant the run before it ended: its next slot has come due by
// then, but it is within the job's catchup_window (rule R7).
func TestJob_QueueRunsPendingSlotAfterRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testJob(t, "q", "sleep 2500ms")
		cfg.Overlap, cfg.CatchupWindow = config.OverlapQueue, 5*time.Second
		h := startJob(t, cfg)
		slot := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(slot))
		for i := range 3 {
			h.job.Inbox() <- Fire{Job: "q", Slot: slot.Add(time.Duration(i) * time.Second)}
			time.Sleep(time.Second)
		}
		first, second := <-h.results, <-h.results
		synctest.Wait()
		if first.Slot != slot || first.Trigger != ledger.TriggerSchedule || first.Result != ledger.ResultSuccess || first.Fence <= 0 {
			t.Errorf("first run: got slot %v trigger %s result %s fence %d, want slot %v schedule success with a fence",
				first.Slot, first.Trigger, first.Result, first.Fence, slot)
		}
		if second.Slot != slot.Add(time.Second) || second.Trigger != ledger.TriggerQueued || second.Fence <= first.Fence ||
			!second.Started.Equal(first.Finished) {
			t.Errorf("second run: got slot %v trigger %s fence %d started %v, want slot %v queued, fence above %d, started %v",
				second.Slot, second.Trigger, second.Fence, second.Started, slot.Add(time.Second), first.Fence, first.Finished)
		}
		if got := h.skips(t, ledger.SkipOverlap); got != 1 {
			t.Errorf("overlap skips: got %v, want 1 (the third slot)", got)
		}
		if got := h.skips(t, ledger.SkipOverlapLocal); got != 0 {
			t.Errorf("overlap_local skips: got %v, want 0", got)
		}
		h.cancel()
		if err := <-h.done; err != nil {
			t.Fatal(err)
		}
		select {
		case fin := <-h.results:
			t.Errorf("got a third run %+v, want none", fin.RunInfo)
		default:
		}
	})
}

// overlap: replace — a slot that fires while the job runs is queued, the
// run learns it at its next renewal (within 500 ms), is terminated and
// ends with result replaced, and the new slot starts when it has ended.
func TestJob_ReplaceTerminatesRunningRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testJob(t, "r", "sleep 10s")
		cfg.Overlap = config.OverlapReplace
		h := startJob(t, cfg)
		slot := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(slot))
		h.job.Inbox() <- Fire{Job: "r", Slot: slot}
		time.Sleep(3 * time.Second)
		h.job.Inbox() <- Fire{Job: "r", Slot: slot.Add(3 * time.Second)}
		first := <-h.results
		if first.Slot != slot || first.Result != ledger.ResultReplaced || first.Attempts != 1 {
			t.Errorf("first run: got slot %v result %s attempts %d, want slot %v replaced 1", first.Slot, first.Result,
				first.Attempts, slot)
		}
		if d := first.Finished.Sub(slot.Add(3 * time.Second)); d < 0 || d > 500*time.Millisecond {
			t.Errorf("first run ended %v after the new slot, want within 500ms", d)
		}
		h.cancel()
		close(h.kill)
		second := <-h.results
		if second.Slot != slot.Add(3*time.Second) || second.Trigger != ledger.TriggerQueued || second.Started.Before(first.Finished) {
			t.Errorf("second run: got slot %v trigger %s started %v, want slot %v queued, started at or after %v",
				second.Slot, second.Trigger, second.Started, slot.Add(3*time.Second), first.Finished)
		}
		if err := <-h.done; err != nil {
			t.Fatal(err)
		}
	})
}
