package actors_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
)

// runNow sends a RunNow and waits for its answer.
func (h *jobHarness) runNow(t *testing.T, force bool) Ran {
	t.Helper()
	reply := make(chan Ran, 1)
	h.job.Inbox() <- RunNow{Force: force, Reply: reply}
	return <-reply
}

// A manual run takes the scheduled run's path: retries apply, the result
// reaches the hook runner with trigger manual, and the history record
// carries the trigger; no slot is claimed.
func TestJob_RunNowIsARunWithTriggerManual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testJob(t, "m", "exit 4")
		cfg.Retries = 1
		h := startJob(t, cfg)
		ran := h.runNow(t, false)
		if ran.Skip != "" || ran.Finished.Trigger != ledger.TriggerManual || ran.Finished.Attempts != 2 ||
			ran.Finished.ExitCode != 4 || ran.Finished.Result != ledger.ResultFailure {
			t.Errorf("got %+v, want a manual run of 2 attempts ending with exit 4 (failure)", ran)
		}
		fin := <-h.results
		if fin.RunID != ran.Finished.RunID || fin.Trigger != ledger.TriggerManual {
			t.Errorf("hook runner got run %s trigger %q, want %s manual", fin.RunID, fin.Trigger, ran.Finished.RunID)
		}
		st, _ := h.locker.State(t.Context(), "m")
		if fence := ran.Finished.Fence; fence <= 0 || st.Slot != 0 || st.Fence != fence || st.Last == nil ||
			st.Last.Trigger != ledger.TriggerManual || st.Last.Fence != fence || st.LeaseHolder != "" {
			t.Errorf("state: got %+v (last %+v), want slot 0, the run's fence %d, last run manual, lease released", st, st.Last, fence)
		}
		occ, _ := h.locker.Occurrences(t.Context(), "m", 0, 1<<53)
		if len(occ) != 1 || occ[0].ID != ledger.OccurrenceID(0, ran.Finished.Fence) || occ[0].Status != "ran" {
			t.Errorf("ledger: %+v, want the manual run's one record, keyed by its token", occ)
		}
		h.cancel()
		<-h.done
	})
}

// A paused job refuses a manual run unless it is forced.
func TestJob_RunNowRefusesPausedUnlessForced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startJob(t, testJob(t, "p", "exit 0"))
		if err := h.locker.Pause(t.Context(), "p"); err != nil {
			t.Fatal(err)
		}
		if ran := h.runNow(t, false); ran.Skip != ledger.SkipPaused {
			t.Errorf("unforced: got skip %q, want %q", ran.Skip, ledger.SkipPaused)
		}
		if ran := h.runNow(t, true); ran.Skip != "" || ran.Finished.Result != ledger.ResultSuccess {
			t.Errorf("forced: got %+v, want a successful run", ran)
		}
		h.cancel()
		<-h.done
	})
}

// A disabled job refuses a manual run unless it is forced.
func TestJob_RunNowRefusesDisabledUnlessForced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testJob(t, "d", "exit 0")
		cfg.Enabled = false
		h := startJob(t, cfg)
		if ran := h.runNow(t, false); ran.Skip != ledger.SkipDisabled {
			t.Errorf("unforced: got skip %q, want %q", ran.Skip, ledger.SkipDisabled)
		}
		if ran := h.runNow(t, true); ran.Skip != "" || ran.Finished.Result != ledger.ResultSuccess {
			t.Errorf("forced: got %+v, want a successful run", ran)
		}
		h.cancel()
		<-h.done
	})
}

// A manual run while the job runs (lease held) is refused with overlap,
// and a scheduled run's trigger is schedule.
func TestJob_RunNowWhileRunningIsOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startJob(t, testJob(t, "o", "sleep 10s"))
		h.job.Inbox() <- Fire{Job: "o", Slot: time.Now()}
		synctest.Wait()
		if ran := h.runNow(t, true); ran.Skip != ledger.SkipOverlap {
			t.Errorf("got skip %q, want %q", ran.Skip, ledger.SkipOverlap)
		}
		if fin := <-h.results; fin.Trigger != ledger.TriggerSchedule {
			t.Errorf("scheduled run trigger: got %q, want %q", fin.Trigger, ledger.TriggerSchedule)
		}
		h.cancel()
		<-h.done
	})
}
