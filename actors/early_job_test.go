package actors_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/redislock"
)

// A fire that comes before its fire time while this node runs the job is
// decided at its fire time, as without the lead: the run that ends in
// between lets the slot run (not overlap_local); and the slot's process
// starts at the fire time, never before.
func TestJob_EarlyFireDecidedAtItsFireTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startJob(t, testJob(t, "j", "sleep 999ms"))
		slot := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(slot))
		h.job.Inbox() <- Fire{Job: "j", Slot: slot}
		// The next fire, 2ms before its fire time, while that run still runs.
		next := slot.Add(time.Second)
		time.Sleep(time.Until(next) - 2*time.Millisecond)
		due := make(chan struct{})
		h.job.Inbox() <- Fire{Job: "j", Slot: next, At: next, Due: due}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		close(due)
		first, second := <-h.results, <-h.results
		if !first.Slot.Equal(slot) || !second.Slot.Equal(next) || second.Result != ResultSuccess {
			t.Fatalf("runs: %v %s, %v %s; want the slots %v and %v run", first.Slot, first.Result, second.Slot, second.Result, slot, next)
		}
		if !second.Started.Equal(next) {
			t.Errorf("second run started at %v, want at its fire time %v", second.Started, next)
		}
		if n := h.skips(t, SkipOverlapLocal); n != 0 {
			t.Errorf("overlap_local skips: %v, want 0 (the run before ended before the fire time)", n)
		}
		h.cancel()
		if err := <-h.done; err != nil {
			t.Fatal(err)
		}
	})
}

// An early fire's claim is answered before the fire time and its process
// starts at the fire time; an early claim of a paused job records nothing
// before the fire time and, sent again then, skips the slot paused.
func TestJob_EarlyClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startJob(t, testJob(t, "j", "exit 0"))
		slot := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(slot) - 2*time.Millisecond)
		due := make(chan struct{})
		h.job.Inbox() <- Fire{Job: "j", Slot: slot, At: slot, Due: due}
		synctest.Wait()
		if st, _ := h.locker.State(t.Context(), "j"); st.Slot != slot.Unix() || st.LeaseHolder == "" {
			t.Fatalf("before the fire time: state %+v; want the slot claimed (recorded, lease held)", st)
		}
		if len(h.results) != 0 {
			t.Fatal("the run ended before its fire time")
		}
		time.Sleep(2 * time.Millisecond)
		close(due)
		if fin := <-h.results; !fin.Started.Equal(slot) || fin.Result != ResultSuccess {
			t.Fatalf("run: started %v, %s; want at the fire time %v, success", fin.Started, fin.Result, slot)
		}

		if err := h.locker.Pause(t.Context(), "j"); err != nil {
			t.Fatal(err)
		}
		next := slot.Add(time.Second)
		time.Sleep(time.Until(next) - 2*time.Millisecond)
		due = make(chan struct{})
		h.job.Inbox() <- Fire{Job: "j", Slot: next, At: next, Due: due}
		synctest.Wait()
		if st, _ := h.locker.State(t.Context(), "j"); st.Slot != slot.Unix() || h.skips(t, SkipPaused) != 0 {
			t.Fatalf("paused, before the fire time: state slot %d, paused skips %v; want %d, 0 (nothing decided)",
				st.Slot, h.skips(t, SkipPaused), slot.Unix())
		}
		time.Sleep(2 * time.Millisecond)
		close(due)
		waitFor(t, func() bool { return h.skips(t, SkipPaused) == 1 })
		if st, _ := h.locker.State(t.Context(), "j"); st.Slot != next.Unix() {
			t.Errorf("paused, after the fire time: state slot %d, want %d (recorded by the paused skip)", st.Slot, next.Unix())
		}
		h.cancel()
		if err := <-h.done; err != nil {
			t.Fatal(err)
		}
	})
}

// A claim answered NotYet is not sent again when the shutdown began while
// it waited for the fire time: the slot is skipped shutting_down and
// nothing is recorded, as for a fire that came after the shutdown began.
func TestJob_NotYetClaimAfterShutdownBegan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startJob(t, testJob(t, "j", "exit 0"))
		if err := h.locker.Pause(t.Context(), "j"); err != nil {
			t.Fatal(err)
		}
		slot := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(slot) - 2*time.Millisecond)
		due := make(chan struct{})
		h.job.Inbox() <- Fire{Job: "j", Slot: slot, At: slot, Due: due}
		synctest.Wait()
		h.cancel() // the shutdown begins in the lead
		time.Sleep(2 * time.Millisecond)
		close(due)
		if err := <-h.done; err != nil {
			t.Fatal(err)
		}
		if st, _ := h.locker.State(t.Context(), "j"); st.Slot != 0 || h.skips(t, SkipShuttingDown) != 1 || h.skips(t, SkipPaused) != 0 {
			t.Errorf("state slot %d, shutting_down skips %v, paused skips %v; want 0, 1, 0",
				st.Slot, h.skips(t, SkipShuttingDown), h.skips(t, SkipPaused))
		}
	})
}

// A job with max_runs is not claimed early: a success recorded in the lead
// (overlap: allow runs alongside) must count against the claim.
func TestJob_MaxRunsJobClaimsAtItsFireTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testJob(t, "j", "exit 0")
		cfg.MaxRuns = 3
		h := startJob(t, cfg)
		slot := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(slot) - 2*time.Millisecond)
		due := make(chan struct{})
		h.job.Inbox() <- Fire{Job: "j", Slot: slot, At: slot, Due: due}
		synctest.Wait()
		if st, _ := h.locker.State(t.Context(), "j"); st.Slot != 0 {
			t.Fatalf("before the fire time: state slot %d, want 0 (not claimed early)", st.Slot)
		}
		time.Sleep(2 * time.Millisecond)
		close(due)
		if fin := <-h.results; !fin.Started.Equal(slot) || fin.Result != ResultSuccess {
			t.Errorf("run: started %v, %s; want at the fire time, success", fin.Started, fin.Result)
		}
		h.cancel()
		if err := <-h.done; err != nil {
			t.Fatal(err)
		}
	})
}

// lateAnswerLocker applies each claim at once and answers it delay later:
// a Redis that executed the claim and whose answer was held up (a node
// that hung, a connection that resumed).
type lateAnswerLocker struct {
	*redislock.Memory
	delay time.Duration
	sent  atomic.Int32
}

func (l *lateAnswerLocker) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	l.sent.Add(1)
	c, err := l.Memory.Claim(ctx, req)
	time.Sleep(l.delay)
	return c, err
}

// An early claim answered NotYet (another node's lease held the job) only
// after the job's next slot came is not sent again at its fire time: the
// slot is no longer the job's latest and must not run late, even though
// the lease is free by then. It is skipped redis_error.
func TestJob_EarlyAnswerAfterNextSlotIsNotClaimedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &lateAnswerLocker{Memory: redislock.NewMemory(), delay: 1500 * time.Millisecond}
		slot := time.Now().Truncate(time.Second).Add(time.Second)
		if _, err := l.Memory.Claim(t.Context(), ClaimRequest{Job: "j", Slot: slot.Unix() - 1, Owner: "n2:x", TTL: time.Minute, Lease: true}); err != nil {
			t.Fatal(err)
		}
		h := startJobOn(t, "j", "exit 0", l)
		time.Sleep(time.Until(slot) - 2*time.Millisecond)
		due := make(chan struct{})
		h.job.Inbox() <- Fire{Job: "j", Slot: slot, At: slot, Due: due}
		time.Sleep(2 * time.Millisecond)
		close(due)
		time.Sleep(500 * time.Millisecond)
		if ok, err := l.Memory.Release(t.Context(), "j", "n2:x"); !ok || err != nil { // the other node's lease goes
			t.Fatalf("release: %v, %v", ok, err)
		}
		time.Sleep(time.Second) // the NotYet answer comes at slot + 1.498 s, after the next slot's fire time
		synctest.Wait()
		if n := l.sent.Load(); n != 1 {
			t.Errorf("claims of slot %d sent: %d, want 1 (not sent again once the next slot had come)", slot.Unix(), n)
		}
		select {
		case fin := <-h.results:
			t.Fatalf("slot %v ran (%s), want not run", fin.Slot, fin.Result)
		default:
		}
		if n := h.skips(t, SkipRedisError); n != 1 {
			t.Errorf("redis_error skips: %v, want 1", n)
		}
		if st, _ := l.Memory.State(t.Context(), "j"); st.Slot != slot.Unix()-1 || st.LeaseHolder != "" {
			t.Errorf("state %+v: want slot %d (the early claim recorded nothing) and no lease", st, slot.Unix()-1)
		}
		h.stop(t)
	})
}
