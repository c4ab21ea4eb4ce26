package redislock

import (
	"errors"
	"fmt"
	"github.com/cronlock/cronlock/actors"
	"math"
	"sort"
	"sync"
	"testing"
	"time"
)

// conformance lists the behaviours both backends must share (docs/protocol.md).
var conformance = []struct {
	name string
	fn   func(t *testing.T, s store)
}{
	{"ClaimOncePerSlot_LeaseSkip", testClaimOncePerSlotLease},
	{"ClaimOncePerSlot_Allow", testClaimOncePerSlotAllow},
	{"ClaimedElsewhereForOldSlots", testClaimedElsewhere},
	{"EarlyClaimDecidesOnlyWins", testEarlyClaim},
	{"OverlapWhileLeaseHeld", testOverlap},
	{"PausedRecordsSlot", testPaused},
	{"ManualClaimTakesLeaseNoSlot", testManual},
	{"RenewExtendsTTL", testRenewExtends},
	{"RenewByNonOwner", testRenewNonOwner},
	{"ReleaseByNonOwner", testReleaseNonOwner},
	{"LeaseExpiresAfterTTL", testLeaseExpires},
	{"RecordHistoryCapAndOrder", testHistory},
	{"FinishReleasesAndRecords", testFinish},
	{"RetriedFinishRecordsOnce", testFinishRetry},
	{"RetriedFinishUnsureBeyondHistory", testFinishRetryUnsure},
	{"UnhandPutsTheHandedSlotBack", testUnhand},
	{"StateOfNewJob", testStateEmpty},
	{"Time", testTime},
	{"InvalidRequests", testInvalid},
	{"StateRepairAfterLoss", testStateRepair},
	{"CatchupNeedsRecord", testCatchupNeedsRecord},
	{"StateRepairOnSkips", testStateRepairSkips},
	{"MissedSlotsReportedOnce", testMissedReport},
	{"MissedSlotsSeenAfterLoss", testMissedSeen},
	{"MissedSlotsInBatches", testMissedBatches},
	{"FenceAtMaximumFails", testFenceAtMaximum},
	{"QueueKeepsOnePendingSlot", testQueuePending},
	{"QueueDropsPendingOfVanishedHolder", testQueueDropped},
	{"QueueFinishWhileStoppingDropsPending", testQueueStopping},
	{"BackfillClaimsOncePerSlot", testBackfillClaim},
	{"MaxRunsCountsSuccesses", testMaxRuns},
	{"ClaimReadsTheLastRun", testClaimLastRun},
}

// Every claim, whatever its outcome and whichever node sends it, returns
// how long the job's last recorded run took (End − Start: the claim order's
// short jobs, nodeload.Load.RunTook); 0 before any record and for a record
// of a run that never started.
func testClaimLastRun(t *testing.T, s store) {
	a, b := s.newClient(t), s.newClient(t)
	job := t.Name()
	if c := mustClaim(t, a, actors.ClaimRequest{Job: job, Slot: 100}, actors.Claimed); c.LastRun != 0 {
		t.Errorf("first claim: LastRun %v, want 0 (no record)", c.LastRun)
	}
	rec := sampleRecord(1) // 1.5 s
	if _, err := a.Finish(ctxT(t), actors.FinishRequest{Job: job, Record: rec}); err != nil {
		t.Fatal(err)
	}
	if c := mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 100}, actors.ClaimedElsewhere); c.LastRun != 1500*time.Millisecond {
		t.Errorf("refused claim of another node: LastRun %v, want 1.5s", c.LastRun)
	}
	if c := mustClaim(t, a, actors.ClaimRequest{Job: job, Slot: 101}, actors.Claimed); c.LastRun != 1500*time.Millisecond {
		t.Errorf("won claim: LastRun %v, want 1.5s", c.LastRun)
	}
	rec = sampleRecord(2)
	rec.Start = time.Time{} // the run did not start
	if _, err := a.Finish(ctxT(t), actors.FinishRequest{Job: job, Record: rec}); err != nil {
		t.Fatal(err)
	}
	if c := mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 102}, actors.Claimed); c.LastRun != 0 {
		t.Errorf("after a record without a start: LastRun %v, want 0", c.LastRun)
	}
}

// A claim that would increment a fencing token at math.MaxInt64 fails
// instead of wrapping it negative: Memory checks, Redis's HINCRBY fails
// with "increment or decrement would overflow" (the script's earlier
// writes, the slot and a lease, stay in Redis; Memory leaves them as they
// were). The fence stays at the maximum.
func testFenceAtMaximum(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	if c, err := b.Claim(ctxT(t), actors.ClaimRequest{Job: job, Slot: 5, MinFence: math.MaxInt64}); err == nil {
		t.Fatalf("Claim: got %+v, want an error", c)
	}
	st, err := b.State(ctxT(t), job)
	if err != nil || st.Fence != math.MaxInt64 {
		t.Fatalf("State: got %+v, %v; want fence %d", st, err, int64(math.MaxInt64))
	}
}

func TestConformance_Redis(t *testing.T) {
	s := redisStore(t)
	for _, c := range conformance {
		t.Run(c.name, func(t *testing.T) { c.fn(t, s) })
	}
}

func TestConformance_Memory(t *testing.T) {
	for _, c := range conformance {
		t.Run(c.name, func(t *testing.T) { c.fn(t, memoryStore(t)) })
	}
}

func mustClaim(t *testing.T, b backend, req actors.ClaimRequest, want actors.Outcome) actors.Claim {
	t.Helper()
	c, err := b.Claim(ctxT(t), req)
	if err != nil {
		t.Fatalf("Claim(%+v): %v", req, err)
	}
	if c.Outcome != want {
		t.Fatalf("Claim(slot %d, lease %v): got %v, want %v", req.Slot, req.Lease, c.Outcome, want)
	}
	return c
}

func mustState(t *testing.T, b backend, job string) JobState {
	t.Helper()
	st, err := b.State(ctxT(t), job)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	return st
}

// race runs claimers × slots claims in parallel; claimer i owns "node<i>:x".
// With lease, a winner releases at once. It returns the outcome and fence of
// every claim by slot.
func race(t *testing.T, s store, job string, lease bool) map[int64][]actors.Claim {
	const claimers, slots = 3, 200
	var (
		mu    sync.Mutex
		got   = map[int64][]actors.Claim{}
		wg    sync.WaitGroup
		start = make(chan struct{})
		ctx   = ctxT(t)
	)
	for i := range claimers {
		b := s.newClient(t)
		owner := fmt.Sprintf("node%d:x", i)
		wg.Go(func() {
			<-start
			for slot := int64(1); slot <= slots; slot++ {
				req := actors.ClaimRequest{Job: job, Slot: slot, Owner: owner, TTL: 10 * time.Second, Lease: lease}
				c, err := b.Claim(ctx, req)
				if err != nil {
					t.Errorf("claim slot %d: %v", slot, err)
					return
				}
				if c.Outcome == actors.Claimed && lease {
					if ok, err := b.Release(ctx, job, owner); err != nil || !ok {
						t.Errorf("release slot %d: got %v, %v; want true, nil", slot, ok, err)
						return
					}
				}
				mu.Lock()
				got[slot] = append(got[slot], c)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	return got
}

// checkFences checks that claimed fences strictly increase with the slot.
func checkFences(t *testing.T, got map[int64][]actors.Claim) (claimed int) {
	t.Helper()
	var slots []int64
	for s := range got {
		slots = append(slots, s)
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i] < slots[j] })
	var prev int64
	for _, s := range slots {
		for _, c := range got[s] {
			if c.Outcome != actors.Claimed {
				continue
			}
			claimed++
			if c.Fence <= prev {
				t.Errorf("slot %d: fence %d after %d, want strictly increasing", s, c.Fence, prev)
			}
			prev = c.Fence
		}
	}
	return claimed
}

func testClaimOncePerSlotLease(t *testing.T, s store) {
	got := race(t, s, t.Name(), true)
	for slot := int64(1); slot <= 200; slot++ {
		var claimed, decided int
		for _, c := range got[slot] {
			switch c.Outcome {
			case actors.Claimed:
				claimed++
				decided++
			case actors.Overlap:
				decided++
			}
		}
		if claimed > 1 || decided != 1 {
			t.Errorf("slot %d: got %d claimed, %d decided (claimed+overlap); want ≤1, 1", slot, claimed, decided)
		}
	}
	if n := checkFences(t, got); n == 0 {
		t.Errorf("got no claims at all")
	}
}

func testClaimOncePerSlotAllow(t *testing.T, s store) {
	got := race(t, s, t.Name(), false)
	for slot := int64(1); slot <= 200; slot++ {
		n := 0
		for _, c := range got[slot] {
			if c.Outcome == actors.Claimed {
				n++
			} else if c.Outcome != actors.ClaimedElsewhere {
				t.Errorf("slot %d: got %v, want claimed or claimed_elsewhere", slot, c.Outcome)
			}
		}
		if n != 1 {
			t.Errorf("slot %d: got %d claims, want 1", slot, n)
		}
	}
	if n := checkFences(t, got); n != 200 {
		t.Errorf("got %d claims, want 200", n)
	}
}

func testClaimedElsewhere(t *testing.T, s store) {
	a, b := s.newClient(t), s.newClient(t)
	job := t.Name()
	if c := mustClaim(t, a, actors.ClaimRequest{Job: job, Slot: 100}, actors.Claimed); c.Fence != 1 {
		t.Fatalf("fence: got %d, want 1", c.Fence)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 100}, actors.ClaimedElsewhere)
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 99}, actors.ClaimedElsewhere)
	if c := mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 101}, actors.Claimed); c.Fence != 2 {
		t.Fatalf("fence: got %d, want 2", c.Fence)
	}
	if st := mustState(t, a, job); st.Slot != 101 || st.Fence != 2 {
		t.Fatalf("state: got slot %d fence %d, want 101, 2", st.Slot, st.Fence)
	}
}

// An early claim (sent before the fire time) wins or finds the slot
// claimed elsewhere as any claim; where a claim would skip (paused, lease
// held, queued, max_runs reached) it answers NotYet and records nothing,
// so that the claim at the fire time decides.
func testEarlyClaim(t *testing.T, s store) {
	a, b := s.newClient(t), s.newClient(t)
	job := t.Name()
	if c := mustClaim(t, a, actors.ClaimRequest{Job: job, Slot: 100, Owner: "a:1", TTL: time.Minute, Lease: true, Early: true}, actors.Claimed); c.Fence != 1 {
		t.Fatalf("early claim: fence %d, want 1", c.Fence)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 100, Owner: "b:1", TTL: time.Minute, Lease: true, Early: true}, actors.ClaimedElsewhere)
	// Lease held (by a:1): nothing recorded, neither the slot nor a pending slot.
	for _, queue := range []bool{false, true} {
		mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 101, Owner: "b:2", TTL: time.Minute, Lease: true, Queue: queue, Early: true}, actors.NotYet)
		if st := mustState(t, b, job); st.Slot != 100 || st.Pending != 0 || st.LeaseHolder != "a:1" {
			t.Fatalf("after an early claim with the lease held (queue %v): %+v, want slot 100, nothing pending, holder a:1", queue, st)
		}
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 101, Owner: "b:2", TTL: time.Minute, Lease: true}, actors.Overlap)
	if _, err := a.Release(ctxT(t), job, "a:1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Pause(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 102, Early: true}, actors.NotYet)
	if st := mustState(t, b, job); st.Slot != 101 {
		t.Fatalf("after an early claim while paused: slot %d, want 101 (not recorded)", st.Slot)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 102}, actors.Paused)
	if err := a.Resume(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	// max_runs reached: one success counted, MaxRuns 1.
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 103, Owner: "b:3", TTL: time.Minute, Lease: true}, actors.Claimed)
	rec := sampleRecord(1)
	rec.Result = actors.ResultSuccess
	if _, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "b:3", Record: rec}); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 104, MaxRuns: 1, Early: true}, actors.NotYet)
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 104, MaxRuns: 1}, actors.MaxRunsReached)
	for _, req := range []actors.ClaimRequest{{Job: job, Early: true}, {Job: job, Slot: 105, Backfill: true, Early: true},
		{Job: job, Slot: 105, NeedRecord: true, Early: true}} {
		if _, err := b.Claim(ctxT(t), req); err == nil {
			t.Errorf("early claim %+v: got nil error, want refused (not a scheduled slot)", req)
		}
	}
}

func testOverlap(t *testing.T, s store) {
	a, b := s.newClient(t), s.newClient(t)
	job := t.Name()
	mustClaim(t, a, actors.ClaimRequest{Job: job, Slot: 1, Owner: "a:1", TTL: time.Minute, Lease: true}, actors.Claimed)
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 2, Owner: "b:1", TTL: time.Minute, Lease: true}, actors.Overlap)
	if st := mustState(t, b, job); st.Slot != 2 || st.LeaseHolder != "a:1" || st.Fence != 1 {
		t.Fatalf("state: got %+v, want slot 2, holder a:1, fence 1", st)
	}
	mustClaim(t, a, actors.ClaimRequest{Job: job, Slot: 2, Owner: "a:2", TTL: time.Minute, Lease: true}, actors.ClaimedElsewhere)
	// overlap "allow" ignores the lease.
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 3}, actors.Claimed)
	if ok, err := a.Release(ctxT(t), job, "a:1"); err != nil || !ok {
		t.Fatalf("release: got %v, %v; want true, nil", ok, err)
	}
	if c := mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 4, Owner: "b:4", TTL: time.Minute, Lease: true}, actors.Claimed); c.Fence != 3 {
		t.Fatalf("fence: got %d, want 3", c.Fence)
	}
}

func testPaused(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	if err := b.Pause(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 5, Owner: "a:1", TTL: time.Minute, Lease: true}, actors.Paused)
	if st := mustState(t, b, job); !st.Paused || st.Slot != 5 || st.Fence != 0 || st.LeaseHolder != "" {
		t.Fatalf("state: got %+v, want paused, slot 5, fence 0, no lease", st)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 5}, actors.ClaimedElsewhere) // step 1 before step 2
	// A manual run is refused while paused, and not recorded as a slot;
	// forced, it claims.
	mustClaim(t, b, actors.ClaimRequest{Job: job, Owner: "a:m", TTL: time.Minute, Lease: true}, actors.Paused)
	if st := mustState(t, b, job); st.Slot != 5 || st.Fence != 0 || st.LeaseHolder != "" {
		t.Fatalf("state after a refused manual run: got %+v, want slot 5, fence 0, no lease", st)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Owner: "a:m", TTL: time.Minute, Lease: true, IgnorePause: true}, actors.Claimed)
	if _, err := b.Release(ctxT(t), job, "a:m"); err != nil {
		t.Fatal(err)
	}
	if err := b.Resume(ctxT(t), job); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 6}, actors.Claimed)
	if st := mustState(t, b, job); st.Paused {
		t.Fatalf("state after Resume: got paused, want not paused")
	}
}

func testManual(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 10, Owner: "a:1", TTL: time.Minute, Lease: true}, actors.Claimed)
	mustClaim(t, b, actors.ClaimRequest{Job: job, Owner: "a:m", TTL: time.Minute, Lease: true}, actors.Overlap)
	if _, err := b.Release(ctxT(t), job, "a:1"); err != nil {
		t.Fatal(err)
	}
	if c := mustClaim(t, b, actors.ClaimRequest{Job: job, Owner: "a:m", TTL: time.Minute, Lease: true}, actors.Claimed); c.Fence != 2 {
		t.Fatalf("manual fence: got %d, want 2", c.Fence)
	}
	if st := mustState(t, b, job); st.Slot != 10 || st.LeaseHolder != "a:m" {
		t.Fatalf("state: got %+v, want slot 10 (unchanged), holder a:m", st)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 11, Owner: "a:2", TTL: time.Minute, Lease: true}, actors.Overlap)
}

func testRenewExtends(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 1, Owner: "a:1", TTL: time.Minute, Lease: true}, actors.Claimed)
	if st := mustState(t, b, job); st.LeaseTTL <= 0 || st.LeaseTTL > time.Minute {
		t.Fatalf("lease ttl: got %v, want (0, 1m]", st.LeaseTTL)
	}
	if _, err := b.Renew(ctxT(t), job, "a:1", time.Hour); err != nil {
		t.Fatalf("renew: got %v, want nil", err)
	}
	if st := mustState(t, b, job); st.LeaseTTL < 59*time.Minute || st.LeaseHolder != "a:1" {
		t.Fatalf("after renew: got ttl %v holder %q, want ~1h, a:1", st.LeaseTTL, st.LeaseHolder)
	}
}

func testRenewNonOwner(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	if _, err := b.Renew(ctxT(t), job, "a:1", time.Minute); !errors.Is(err, actors.ErrNotHeld) {
		t.Fatalf("renew without lease: got %v, want actors.ErrNotHeld", err)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 1, Owner: "a:1", TTL: time.Minute, Lease: true}, actors.Claimed)
	if _, err := b.Renew(ctxT(t), job, "b:1", time.Hour); !errors.Is(err, actors.ErrNotHeld) {
		t.Fatalf("renew by non-owner: got %v, want actors.ErrNotHeld", err)
	}
	if st := mustState(t, b, job); st.LeaseTTL > time.Minute || st.LeaseHolder != "a:1" {
		t.Fatalf("after foreign renew: got ttl %v holder %q, want ≤1m, a:1", st.LeaseTTL, st.LeaseHolder)
	}
}

func testReleaseNonOwner(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 1, Owner: "a:1", TTL: time.Minute, Lease: true}, actors.Claimed)
	if ok, err := b.Release(ctxT(t), job, "b:1"); ok || err != nil {
		t.Fatalf("release by non-owner: got %v, %v; want false, nil", ok, err)
	}
	if st := mustState(t, b, job); st.LeaseHolder != "a:1" {
		t.Fatalf("holder: got %q, want a:1", st.LeaseHolder)
	}
	if ok, err := b.Release(ctxT(t), job, "a:1"); !ok || err != nil {
		t.Fatalf("release by owner: got %v, %v; want true, nil", ok, err)
	}
	if ok, err := b.Release(ctxT(t), job, "a:1"); ok || err != nil {
		t.Fatalf("second release: got %v, %v; want false, nil", ok, err)
	}
	if st := mustState(t, b, job); st.LeaseHolder != "" || st.LeaseTTL != 0 {
		t.Fatalf("after release: got holder %q ttl %v, want none", st.LeaseHolder, st.LeaseTTL)
	}
}

// testLeaseExpires waits for a real 50ms TTL to pass, polling State with a
// bound (Redis expires keys on its own clock). The memory backend is also
// tested in a synctest bubble.
func testLeaseExpires(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 1, Owner: "a:1", TTL: 50 * time.Millisecond, Lease: true}, actors.Claimed)
	for deadline := time.Now().Add(15 * time.Second); mustState(t, b, job).LeaseHolder != ""; {
		if time.Now().After(deadline) {
			t.Fatalf("lease with 50ms ttl still held after 15s")
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if _, err := b.Renew(ctxT(t), job, "a:1", time.Minute); !errors.Is(err, actors.ErrNotHeld) {
		t.Fatalf("renew after expiry: got %v, want actors.ErrNotHeld", err)
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 2, Owner: "b:1", TTL: time.Minute, Lease: true}, actors.Claimed)
}
