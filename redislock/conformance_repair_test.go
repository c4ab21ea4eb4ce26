package redislock

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/actors"
)

// checkClaimState fails unless c reports state slot and fence as want, repaired
// as want, and the found values.
func checkClaimState(t *testing.T, what string, c actors.Claim, slot, fence int64, repaired bool, foundSlot, foundFence int64) {
	t.Helper()
	if c.StateSlot != slot || c.StateFence != fence || c.Repaired != repaired || c.FoundSlot != foundSlot || c.FoundFence != foundFence {
		t.Errorf("%s: got state slot %d fence %d, repaired %v (found slot %d fence %d); want %d %d, %v (found %d %d)",
			what, c.StateSlot, c.StateFence, c.Repaired, c.FoundSlot, c.FoundFence, slot, fence, repaired, foundSlot, foundFence)
	}
}

// A node that saw slot S and fence F passes them as MinSlot/MinFence: after
// the job's state was lost, its claim raises state.slot and state.fence
// again before deciding, so slot S is not claimed twice and the fence never
// goes back (docs/protocol.md, "State repair").
func testStateRepair(t *testing.T, s store) {
	a, b := s.newClient(t), s.newClient(t)
	job := t.Name()
	c := mustClaim(t, a, actors.ClaimRequest{Job: job, Slot: 100}, actors.Claimed)
	checkClaimState(t, "first claim", c, 100, 1, false, 0, 0)
	c = mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 100}, actors.ClaimedElsewhere)
	checkClaimState(t, "losing claim", c, 100, 1, false, 100, 1)

	s.loseState(t, job)
	c = mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 100, MinSlot: c.StateSlot, MinFence: c.StateFence}, actors.ClaimedElsewhere)
	checkClaimState(t, "slot 100 again after the loss", c, 100, 1, true, 0, 0)
	c = mustClaim(t, a, actors.ClaimRequest{Job: job, Slot: 101, MinSlot: 100, MinFence: 1}, actors.Claimed)
	checkClaimState(t, "slot 101 (state already repaired)", c, 101, 2, false, 100, 1)
	if c.Fence != 2 {
		t.Errorf("slot 101: got fence %d, want 2", c.Fence)
	}

	s.loseState(t, job)
	c = mustClaim(t, a, actors.ClaimRequest{Job: job, Slot: 102, MinSlot: 101, MinFence: 2}, actors.Claimed)
	checkClaimState(t, "slot 102 after a second loss", c, 102, 3, true, 0, 0)
	if c.Fence != 3 {
		t.Errorf("slot 102: got fence %d, want 3 (never back to 1)", c.Fence)
	}
	// Lower minimums change nothing and are no repair.
	c = mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 103, MinSlot: 50, MinFence: 1}, actors.Claimed)
	checkClaimState(t, "slot 103 with old minimums", c, 103, 4, false, 102, 3)
	// A manual run (slot 0) repairs the fence too, and records no slot.
	s.loseState(t, job)
	c = mustClaim(t, b, actors.ClaimRequest{Job: job, MinSlot: 103, MinFence: 4}, actors.Claimed)
	checkClaimState(t, "manual run after a loss", c, 103, 5, true, 0, 0)
	if st := mustState(t, a, job); st.Slot != 103 || st.Fence != 5 {
		t.Errorf("state: got slot %d fence %d, want 103, 5", st.Slot, st.Fence)
	}
}

// Paused and overlap answers carry the state's slot and fence too (so a
// node learns them from every answer), and the repair happens before them;
// an overlap names the lease holder.
func testStateRepairSkips(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 10, Owner: "a:1", TTL: time.Minute, Lease: true}, actors.Claimed)
	c := mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 11, Owner: "b:1", TTL: time.Minute, Lease: true}, actors.Overlap)
	checkClaimState(t, "overlap", c, 11, 1, false, 10, 1)
	if c.Holder != "a:1" {
		t.Errorf("overlap: got holder %q, want a:1", c.Holder)
	}
	s.loseState(t, job)
	if err := b.Pause(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	c = mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 12, Owner: "b:2", TTL: time.Minute, Lease: true,
		MinSlot: 11, MinFence: 1}, actors.Paused)
	checkClaimState(t, "paused after a loss", c, 12, 1, true, 0, 0)
	if c.Holder != "" {
		t.Errorf("paused: got holder %q, want none", c.Holder)
	}
}

// The missed-slot report: nothing for a job never run; a job whose last
// decided slot is older than the certain slot is reported once, by the
// first caller; a later report covers only newer slots. Reports never
// decide a slot: catch-up may still claim the latest missed one.
func testMissedReport(t *testing.T, s store) {
	a, b := s.newClient(t), s.newClient(t)
	job, fresh := t.Name(), t.Name()+"-never"
	report := func(c backend, checks ...actors.MissedCheck) []actors.MissedReport {
		t.Helper()
		got, err := c.ReportMissed(ctxT(t), checks)
		if err != nil {
			t.Fatalf("ReportMissed: %v", err)
		}
		if len(got) != len(checks) {
			t.Fatalf("ReportMissed: got %d answers, want %d", len(got), len(checks))
		}
		return got
	}
	mustClaim(t, a, actors.ClaimRequest{Job: job, Slot: 5}, actors.Claimed)
	got := report(a, actors.MissedCheck{Job: fresh, Certain: 10, Latest: 11},
		actors.MissedCheck{Job: job, Certain: 5, Latest: 6},
		actors.MissedCheck{Job: job, Certain: 8, Latest: 9})
	want := []actors.MissedReport{{}, {}, {Reported: true, After: 5}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("check %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := report(b, actors.MissedCheck{Job: job, Certain: 8, Latest: 9}); got[0].Reported {
		t.Errorf("second node's check of the same slots: got %+v, want not reported (reported once)", got[0])
	}
	if got := report(b, actors.MissedCheck{Job: job, Certain: 12, Latest: 12}); got[0] != (actors.MissedReport{Reported: true, After: 9}) {
		t.Errorf("check of newer slots: got %+v, want reported after 9", got[0])
	}
	c := mustClaim(t, a, actors.ClaimRequest{Job: job, Slot: 12}, actors.Claimed)
	if c.StateSlot != 12 {
		t.Errorf("claim of a reported slot: got state slot %d, want 12", c.StateSlot)
	}
}

// After the state was lost, the slot the node saw still dates the missed
// slots.
func testMissedSeen(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 20}, actors.Claimed)
	s.loseState(t, job)
	got, err := b.ReportMissed(ctxT(t), []actors.MissedCheck{{Job: job, Seen: 20, Certain: 25, Latest: 26}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (actors.MissedReport{Reported: true, After: 20}); len(got) != 1 || got[0] != want {
		t.Errorf("got %+v, want [%+v]", got, want)
	}
}

// More checks than one pipelined batch holds are all answered, in order.
func testMissedBatches(t *testing.T, s store) {
	b := s.newClient(t)
	checks := make([]actors.MissedCheck, 2*missedBatch+1)
	for i := range checks {
		checks[i] = actors.MissedCheck{Job: t.Name(), Seen: int64(i + 1), Certain: int64(i + 2), Latest: int64(i + 2)}
	}
	got, err := b.ReportMissed(ctxT(t), checks)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(checks) {
		t.Fatalf("got %d answers, want %d", len(got), len(checks))
	}
	for i, r := range got {
		if want := (actors.MissedReport{Reported: true, After: int64(i + 1)}); r != want {
			t.Fatalf("check %d: got %+v, want %+v", i, r, want)
		}
	}
}

// A catch-up claim (NeedRecord) on a job without a claimed-slot record — a
// new job, or Redis lost the state and the claiming node remembers nothing —
// is refused NoRecord and records nothing: the slot may already have run.
// A minimum slot from the node's memory, or an existing record, lets it
// through as usual.
func testCatchupNeedsRecord(t *testing.T, s store) {
	c := s.newClient(t)
	job := t.Name()
	mustClaim(t, c, actors.ClaimRequest{Job: job, Slot: 100, NeedRecord: true}, actors.NoRecord)
	if st := mustState(t, c, job); st.Slot != 0 || st.Fence != 0 {
		t.Errorf("after NoRecord: got state slot %d fence %d, want nothing recorded", st.Slot, st.Fence)
	}
	mustClaim(t, c, actors.ClaimRequest{Job: job, Slot: 100}, actors.Claimed) // a scheduled claim needs none
	mustClaim(t, c, actors.ClaimRequest{Job: job, Slot: 101, NeedRecord: true}, actors.Claimed)

	s.loseState(t, job)
	mustClaim(t, c, actors.ClaimRequest{Job: job, Slot: 102, NeedRecord: true}, actors.NoRecord)
	got := mustClaim(t, c, actors.ClaimRequest{Job: job, Slot: 102, NeedRecord: true, MinSlot: 101, MinFence: 2}, actors.Claimed)
	if got.Fence != 3 {
		t.Errorf("catch-up after a repair: got fence %d, want 3", got.Fence)
	}
}
