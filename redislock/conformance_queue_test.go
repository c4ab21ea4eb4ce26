package redislock

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/actors"
)

func queueClaim(t *testing.T, b backend, job string, slot int64, owner string) actors.Claim {
	t.Helper()
	c, err := b.Claim(ctxT(t), actors.ClaimRequest{Job: job, Slot: slot, Owner: owner, TTL: time.Minute, Lease: true, Queue: true})
	if err != nil {
		t.Fatalf("claim slot %d: %v", slot, err)
	}
	return c
}

// A slot that comes due while the lease is held becomes the one pending
// slot; the next one is an overlap naming it; the holder's Finish hands
// the lease to the pending slot with the next fence, and the Finish of that
// run finds nothing pending.
func testQueuePending(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	if c := queueClaim(t, b, job, 10, "n1:a"); c.Outcome != actors.Claimed || c.Fence != 1 {
		t.Fatalf("slot 10: got %+v, want claimed with fence 1", c)
	}
	if c := queueClaim(t, b, job, 11, "n2:b"); c.Outcome != actors.Queued || c.Holder != "n1:a" {
		t.Fatalf("slot 11: got %+v, want queued behind n1:a", c)
	}
	if st, err := b.State(ctxT(t), job); err != nil || st.Pending != 11 {
		t.Fatalf("State: got %+v, %v; want pending slot 11", st, err)
	}
	if pending, err := b.Renew(ctxT(t), job, "n1:a", time.Minute); err != nil || pending != 11 {
		t.Fatalf("renew by the holder: got (%d, %v), want pending slot 11", pending, err)
	}
	if c := queueClaim(t, b, job, 12, "n3:c"); c.Outcome != actors.Overlap || c.Pending != 11 || c.StateSlot != 12 {
		t.Fatalf("slot 12: got %+v, want overlap with pending slot 11 and state slot 12", c)
	}
	f, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "n1:a", Record: sampleRecord(1), Next: "n1:d", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Released || f.Pending != 11 || f.Fence != 2 || f.StateFence != 2 || f.StateSlot != 12 {
		t.Fatalf("finish of slot 10: got %+v, want released, pending 11 handed on with fence 2, state slot 12", f)
	}
	if st, _ := b.State(ctxT(t), job); st.LeaseHolder != "n1:d" {
		t.Fatalf("lease holder after the hand-on: got %q, want n1:d", st.LeaseHolder)
	}
	if c := queueClaim(t, b, job, 13, "n2:e"); c.Outcome != actors.Queued || c.Holder != "n1:d" {
		t.Fatalf("slot 13: got %+v, want queued behind n1:d", c)
	}
	f, err = b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "n1:d", Record: sampleRecord(2), Next: "n1:f", TTL: time.Minute})
	if err != nil || f.Pending != 13 || f.Fence != 3 {
		t.Fatalf("finish of slot 11: got %+v, %v; want pending 13 with fence 3", f, err)
	}
	f, err = b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "n1:f", Record: sampleRecord(3), Next: "n1:g", TTL: time.Minute})
	if err != nil || !f.Released || f.Pending != 0 || f.Fence != 0 {
		t.Fatalf("finish of slot 13: got %+v, %v; want released, nothing pending", f, err)
	}
	if st, _ := b.State(ctxT(t), job); st.LeaseHolder != "" {
		t.Fatalf("lease holder with nothing pending: got %q, want none", st.LeaseHolder)
	}
}

// A pending slot whose holder vanished (its lease released or expired
// without a Finish) is taken by the next claim that finds the lease free:
// it claims the lease for that slot, and its own slot becomes the pending
// one.
func testQueueDropped(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	queueClaim(t, b, job, 20, "n1:a")
	if c := queueClaim(t, b, job, 21, "n2:b"); c.Outcome != actors.Queued {
		t.Fatalf("slot 21: got %+v, want queued", c)
	}
	if ok, err := b.Release(ctxT(t), job, "n1:a"); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	if c := queueClaim(t, b, job, 22, "n3:c"); c.Outcome != actors.Claimed || c.Takes != 21 || c.Fence != 2 || c.StateSlot != 22 {
		t.Fatalf("slot 22: got %+v, want claimed for pending slot 21 with fence 2, state slot 22", c)
	}
	if c := queueClaim(t, b, job, 23, "n2:d"); c.Outcome != actors.Overlap || c.Pending != 22 || c.Holder != "n3:c" {
		t.Fatalf("slot 23: got %+v, want overlap behind n3:c with slot 22 pending", c)
	}
	f, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "n3:c", Record: sampleRecord(1), Next: "n3:e", TTL: time.Minute})
	if err != nil || f.Pending != 22 || f.Fence != 3 {
		t.Fatalf("finish of slot 21: got %+v, %v; want slot 22 handed on with fence 3", f, err)
	}
}

// A Finish without Next (the node stops) releases the lease and leaves the
// pending slot pending (Left); the next claim takes it.
func testQueueStopping(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	queueClaim(t, b, job, 30, "n1:a")
	queueClaim(t, b, job, 31, "n2:b")
	f, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "n1:a", Record: sampleRecord(1)})
	if err != nil || !f.Released || f.Pending != 31 || f.Fence != 0 || !f.Left {
		t.Fatalf("finish: got %+v, %v; want released, pending 31 left pending (fence 0)", f, err)
	}
	if c := queueClaim(t, b, job, 32, "n2:c"); c.Outcome != actors.Claimed || c.Takes != 31 || c.Fence != 2 {
		t.Fatalf("slot 32: got %+v, want claimed for pending slot 31 with fence 2", c)
	}
}

// A backfill claim ignores state.slot and leaves it alone, records the
// slot in the backfilled set (a second claim of it is AlreadyRun), is
// refused by a held lease or a pause without recording anything, and
// hands out fences from the job's counter.
func testBackfillClaim(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	bf := func(slot int64, owner string) actors.Claim {
		t.Helper()
		c, err := b.Claim(ctxT(t), actors.ClaimRequest{Job: job, Slot: slot, Owner: owner, TTL: time.Minute, Lease: true, Backfill: true})
		if err != nil {
			t.Fatalf("backfill claim of slot %d: %v", slot, err)
		}
		return c
	}
	queueClaim(t, b, job, 100, "n1:a") // a scheduled slot, running
	if c := bf(40, "n2:b"); c.Outcome != actors.Overlap || c.Holder != "n1:a" {
		t.Fatalf("backfill while the lease is held: got %+v, want overlap naming n1:a", c)
	}
	if _, err := b.Release(ctxT(t), job, "n1:a"); err != nil {
		t.Fatal(err)
	}
	if c := bf(40, "n2:b"); c.Outcome != actors.Claimed || c.Fence != 2 || c.StateSlot != 100 {
		t.Fatalf("backfill of slot 40: got %+v, want claimed with fence 2, state slot still 100", c)
	}
	if _, err := b.Release(ctxT(t), job, "n2:b"); err != nil {
		t.Fatal(err)
	}
	if c := bf(40, "n3:c"); c.Outcome != actors.AlreadyRun {
		t.Fatalf("second backfill of slot 40: got %+v, want already run", c)
	}
	if err := b.Pause(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	if c := bf(41, "n3:d"); c.Outcome != actors.Paused {
		t.Fatalf("backfill of a paused job: got %+v, want paused", c)
	}
	if err := b.Resume(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	got, err := b.Backfilled(ctxT(t), job, 0, 1000)
	if err != nil || len(got) != 1 || got[0] != 40 {
		t.Fatalf("Backfilled: got %v, %v; want [40] (41 was refused)", got, err)
	}
}

// max_runs: Finish counts successful runs (state.runs); once they reach
// MaxRuns a claim is MaxRunsReached (the slot recorded), a backfill claim
// too, a manual claim (MaxRuns 0) is not limited, and a pending slot is
// not handed on by the finish that reached the limit.
func testMaxRuns(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	claim := func(slot int64, owner string, queue bool) actors.Claim {
		t.Helper()
		c, err := b.Claim(ctxT(t), actors.ClaimRequest{Job: job, Slot: slot, Owner: owner, TTL: time.Minute, Lease: true,
			Queue: queue, MaxRuns: 2})
		if err != nil {
			t.Fatalf("claim of slot %d: %v", slot, err)
		}
		return c
	}
	finish := func(owner, result, next string) actors.Finished {
		t.Helper()
		rec := sampleRecord(1)
		rec.Result = result
		f, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: owner, Record: rec, Next: next, TTL: time.Minute, MaxRuns: 2})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	claim(1, "n1:a", false)
	if f := finish("n1:a", actors.ResultSuccess, ""); f.Runs != 1 {
		t.Fatalf("runs after one success: got %d, want 1", f.Runs)
	}
	claim(2, "n1:b", false)
	if f := finish("n1:b", actors.ResultFailure, ""); f.Runs != 1 {
		t.Fatalf("runs after a failure: got %d, want 1 (only successes count)", f.Runs)
	}
	claim(3, "n1:c", true)
	if c := claim(4, "n2:d", true); c.Outcome != actors.Queued {
		t.Fatalf("slot 4: got %+v, want queued", c)
	}
	if f := finish("n1:c", actors.ResultSuccess, "n1:e"); f.Runs != 2 || f.Pending != 4 || f.Fence != 0 {
		t.Fatalf("finish reaching max_runs: got %+v, want runs 2 and pending slot 4 dropped (fence 0)", f)
	}
	if c := claim(5, "n1:f", false); c.Outcome != actors.MaxRunsReached || c.StateSlot != 5 {
		t.Fatalf("slot 5: got %+v, want max runs reached with the slot recorded", c)
	}
	if c, err := b.Claim(ctxT(t), actors.ClaimRequest{Job: job, Slot: 1, Owner: "n3:g", TTL: time.Minute, Lease: true,
		Backfill: true, MaxRuns: 2}); err != nil || c.Outcome != actors.MaxRunsReached {
		t.Fatalf("backfill claim: got %+v, %v; want max runs reached", c, err)
	}
	if c, err := b.Claim(ctxT(t), actors.ClaimRequest{Job: job, Owner: "n3:h", TTL: time.Minute, Lease: true}); err != nil || c.Outcome != actors.Claimed {
		t.Fatalf("manual claim: got %+v, %v; want claimed (max_runs does not limit manual runs)", c, err)
	}
	if st, err := b.State(ctxT(t), job); err != nil || st.Runs != 2 {
		t.Fatalf("State: got %+v, %v; want runs 2", st, err)
	}
}
