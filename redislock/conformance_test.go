package redislock

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cronlock/cronlock/actors"
)

// conformance lists the rules both backends must keep (docs/protocol.md,
// R1–R9): every case runs against a real redis-server and the memory
// backend (TestConformance).
var conformance = []struct {
	name string
	fn   func(t *testing.T, s store)
}{
	{"R1_OneClaimPerSlot", testOneClaimPerSlot},
	{"R1_OrderCannotLoseASlot", testOrderCannotLose},
	{"R1_SkipsAreRecorded", testSkipsRecorded},
	{"R2_ClockOutsideWindowWritesNothing", testClockSkew},
	{"R2_CatchupAndBackfillWindows", testCatchupBackfillWindows},
	{"R1_BackfillNeverRerunsARun", testBackfillNeverReruns},
	{"R3_LeaseRenewRelease", testLease},
	{"R4_TokensIncreaseAcrossTotalLoss", testTokensAcrossLoss},
	{"R5_LossDetectedAndSlotsRefused", testLossDetected},
	{"R6_MaxRunsCountedAndRepaired", testMaxRuns},
	{"R6_FinishIsIdempotent", testFinishIdempotent},
	{"R7_QueueHandOnAndExpiry", testQueue},
	{"R8_AuditRecordsMissedOnce", testAudit},
	{"R9_RetentionTrimsAndBackfillRefused", testRetention},
	{"R9_RetentionTrimsPastSlack", testRetentionSlack},
	{"ManualRunsAreOccurrences", testManual},
	{"InvalidRequests", testInvalid},
	{"R2_EarlyClaimDecidesNothing", testTooEarly},
	{"R5_AuditAroundALossRecordsStateLost", testAuditAfterLoss},
	{"R6_InFlightUntilFinishedOrUnknown", testInFlight},
	{"R9_TrimKeepsClaimableSlots", testTrimProtects},
}

// docs/protocol.md R2: a claim before its slot in Redis time (a clock fast
// within the early edge) decides nothing: too_early, no record, the lease
// not taken; at the slot it is decided.
func testTooEarly(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	req := sched(job, now+1, "a")
	mustClaim(t, a, req, actors.TooEarly)
	if o, ok := occurrence(t, a, job, now+1); ok {
		t.Errorf("record after too_early: %+v, want none", o)
	}
	if st := mustState(t, a, job); st.LeaseHolder != "" {
		t.Errorf("lease after too_early: held by %q, want free", st.LeaseHolder)
	}
	waitPast(t, a, now)
	mustClaim(t, a, req, actors.Claimed)
}

// docs/protocol.md R5, R8: an audit that finds the ledger behind the
// node's seq records the slots around the loss state_lost, not missed (their
// record may be what was lost), and a catch-up cannot run them.
func testAuditAfterLoss(t *testing.T, s store) {
	a := s.newClient(t)
	job := t.Name()
	read, err := a.Audit(ctxT(t), actors.AuditRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	req := sched(job, read.From+1, "a")
	req.Lease = false
	waitPast(t, a, read.From)
	c := mustClaim(t, a, req, actors.Claimed)
	waitPast(t, a, read.From+2)
	s.loseState(t, job)
	// The loss: the ledger starts again; a node that saw seq c.Seq audits.
	read, err = a.Audit(ctxT(t), actors.AuditRequest{Job: job, SeenSeq: c.Seq, Early: 5 * time.Second})
	if err != nil || !read.Repaired {
		t.Fatalf("audit after the loss: %+v, %v; want repaired", read, err)
	}
	slot := read.From + 1
	waitPast(t, a, slot)
	time.Sleep(20 * time.Millisecond)
	got, err := a.Audit(ctxT(t), actors.AuditRequest{Job: job, From: read.From, Slots: []int64{slot}, Early: 5 * time.Second,
		Node: "a", Reason: "not_claimed"})
	if err != nil || len(got.Missed) != 0 || got.To != slot {
		t.Fatalf("audit of a slot within the loss's early edge: %+v, %v; want it decided, nothing missed", got, err)
	}
	if o, _ := occurrence(t, a, job, slot); o.Status != "skipped" || o.Reason != actors.SkipStateLost {
		t.Errorf("record: %+v, want skipped state_lost", o)
	}
}

// docs/protocol.md R6: a claim counts toward max_runs until its finish,
// however long it runs (overlap allow: no lease); a claim whose node died
// is declared unknown by the audit once its lease and window passed, and
// still counts.
func testInFlight(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	first := sched(job, now-1, "a")
	first.Lease, first.MaxRuns, first.TTL = false, 2, 100*time.Millisecond
	mustClaim(t, a, first, actors.Claimed)
	time.Sleep(150 * time.Millisecond) // longer than its lock_ttl: still in flight
	second := sched(job, now, "b")
	second.Lease, second.MaxRuns, second.TTL = false, 2, 100*time.Millisecond
	mustClaim(t, a, second, actors.Claimed)
	third := sched(job, now, "c")
	third.Lease, third.MaxRuns = false, 2
	mustClaim(t, a, third, actors.ClaimedElsewhere)
	time.Sleep(150 * time.Millisecond) // the second's lease (none) and window (0 here) pass too
	got, err := a.Audit(ctxT(t), actors.AuditRequest{Job: job, LockTTL: 100 * time.Millisecond})
	if err != nil || len(got.Unknown) != 2 {
		t.Fatalf("audit after both leases and windows passed: %+v, %v; want 2 unknown", got, err)
	}
	if o, _ := occurrence(t, a, job, now-1); o.Status != "unknown" {
		t.Errorf("record of a claim never finished: %+v, want unknown", o)
	}
	waitPast(t, a, now)
	fourth := sched(job, now+1, "c")
	fourth.Lease, fourth.MaxRuns = false, 2
	mustClaim(t, a, fourth, actors.MaxRunsReached) // the two of unknown outcome count
}

// docs/protocol.md R9: a ledger of one record keeps the records of slots
// still claimable (here, within the answer window), so a claim of such a
// slot is decided by them, never run twice.
func testTrimProtects(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	for _, slot := range []int64{now, now - 1} {
		req := sched(job, slot, "a")
		req.Lease, req.Retention = false, actors.Retention{Max: 1}
		mustClaim(t, a, req, actors.Claimed)
	}
	again := sched(job, now, "b")
	again.Lease = false
	mustClaim(t, a, again, actors.ClaimedElsewhere)
}

func TestConformance(t *testing.T) {
	for _, st := range []func(testing.TB) store{redisStore, memoryStore} {
		s := st(t)
		t.Run(s.name, func(t *testing.T) {
			for _, c := range conformance {
				t.Run(c.name, func(t *testing.T) { c.fn(t, s) })
			}
		})
	}
}

var windows = actors.Windows{Early: 2 * time.Second, Answer: 2 * time.Second}

// nowSlot is the backend's current second: a slot a scheduled claim may
// claim now.
func nowSlot(t *testing.T, b backend) int64 {
	t.Helper()
	now, err := b.Time(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return now.Unix()
}

// runs numbers the run ids of the requests the tests make.
var runs atomic.Int64

// sched is a scheduled claim of slot by node, with a lease.
func sched(job string, slot int64, node string) actors.ClaimRequest {
	return actors.ClaimRequest{Job: job, Slot: slot, Trigger: actors.TriggerSchedule, Node: node,
		RunID: "r" + strconv.FormatInt(runs.Add(1), 10), TTL: time.Minute, Lease: true, Windows: windows}
}

func mustClaim(t *testing.T, b backend, req actors.ClaimRequest, want actors.Outcome) actors.Claim {
	t.Helper()
	c, err := b.Claim(ctxT(t), req)
	if err != nil {
		t.Fatalf("claim %+v: %v", req, err)
	}
	if c.Outcome != want {
		t.Fatalf("claim of slot %d (%s by %s): got %v (%+v), want %v", req.Slot, req.Trigger, req.Node, c.Outcome, c, want)
	}
	return c
}

func occurrence(t *testing.T, b backend, job string, slot int64) (actors.Occurrence, bool) {
	t.Helper()
	occ, err := b.Occurrences(ctxT(t), job, slot, slot)
	if err != nil {
		t.Fatal(err)
	}
	if len(occ) == 0 {
		return actors.Occurrence{}, false
	}
	return occ[0], true
}

// finish ends claim c of req as a run with result.
func finish(t *testing.T, b backend, req actors.ClaimRequest, c actors.Claim, result string, maxRuns int64) actors.Finished {
	t.Helper()
	owner := ""
	if req.Lease {
		owner = req.Owner()
	}
	f, err := b.Finish(ctxT(t), actors.FinishRequest{Job: req.Job, Owner: owner, MaxRuns: maxRuns,
		Record: actors.RunRecord{RunID: req.RunID, Slot: req.Slot, Trigger: req.Trigger, Node: req.Node, Fence: c.Token,
			Start: c.Now, End: c.Now.Add(time.Millisecond), Result: result, Attempts: 1, Claimed: c.Now}})
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	return f
}

func testOneClaimPerSlot(t *testing.T, s store) {
	a, b := s.newClient(t), s.newClient(t)
	job, slot := t.Name(), nowSlot(t, a)
	c := mustClaim(t, a, sched(job, slot, "a"), actors.Claimed)
	if c.Token <= 0 {
		t.Errorf("token %d, want > 0", c.Token)
	}
	e := mustClaim(t, b, sched(job, slot, "b"), actors.ClaimedElsewhere)
	if e.Status != "claimed" {
		t.Errorf("claimed elsewhere: record status %q, want claimed", e.Status)
	}
	o, ok := occurrence(t, a, job, slot)
	if !ok || o.Status != "claimed" || o.Node != "a" || o.Token != c.Token {
		t.Errorf("record: %+v (%v), want claimed by a with token %d", o, ok, c.Token)
	}
}

// The claims of S+1 reach Redis before those of S (docs/protocol.md R1):
// S still runs.
func testOrderCannotLose(t *testing.T, s store) {
	a := s.newClient(t)
	job, slot := t.Name(), nowSlot(t, a)
	later := sched(job, slot, "a")
	later.Lease = false
	mustClaim(t, a, later, actors.Claimed)
	earlier := sched(job, slot-1, "b")
	earlier.Lease = false
	mustClaim(t, a, earlier, actors.Claimed)
}

func testSkipsRecorded(t *testing.T, s store) {
	a, b := s.newClient(t), s.newClient(t)
	job, slot := t.Name(), nowSlot(t, a)
	mustClaim(t, a, sched(job, slot-1, "a"), actors.Claimed) // holds the lease
	mustClaim(t, b, sched(job, slot, "b"), actors.Overlap)
	if o, _ := occurrence(t, a, job, slot); o.Status != "skipped" || o.Reason != actors.SkipOverlap {
		t.Errorf("overlapped slot's record: %+v, want skipped overlap", o)
	}
	e := mustClaim(t, a, sched(job, slot, "a"), actors.ClaimedElsewhere)
	if e.Status != "skipped" || e.Reason != actors.SkipOverlap {
		t.Errorf("a later claim of the overlapped slot: %+v, want the record's skipped overlap", e)
	}
}

func testClockSkew(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	for _, slot := range []int64{now + 3600, now + 5, now - 10} { // an hour fast, 5 s fast, 10 s behind
		c := mustClaim(t, a, sched(job, slot, "a"), actors.ClockSkew)
		if d := time.Since(c.Now); d < -time.Minute || d > time.Minute {
			t.Errorf("clock_skew answer's Redis time %v is not now", c.Now)
		}
		if o, ok := occurrence(t, a, job, slot); ok {
			t.Errorf("slot %d: a record %+v after a clock_skew refusal, want none", slot, o)
		}
	}
}

func testCatchupBackfillWindows(t *testing.T, s store) {
	a := s.newClient(t)
	job := t.Name()
	read, err := a.Audit(ctxT(t), actors.AuditRequest{Job: job}) // the ledger begins
	if err != nil {
		t.Fatal(err)
	}
	cu := sched(job, read.Now.Unix()-30, "a")
	cu.Trigger, cu.Windows.Catchup = actors.TriggerCatchup, time.Minute
	mustClaim(t, a, cu, actors.OutsideWindow) // due before the ledger began: it may have run
	waitPast(t, a, read.Now.Unix()+1)
	now := nowSlot(t, a)
	cu = sched(job, now-1, "a")
	cu.Trigger = actors.TriggerCatchup
	mustClaim(t, a, cu, actors.OutsideWindow) // no catch-up window
	cu.Windows.Catchup = time.Minute
	mustClaim(t, a, cu, actors.Claimed)
	bf := sched(job, now, "a")
	bf.Trigger, bf.Lease = actors.TriggerBackfill, false
	mustClaim(t, a, bf, actors.OutsideWindow) // within the answer window: the schedule's
}

// docs/protocol.md R1, must-show 5: a backfill over slots the schedule ran
// runs none; a missed slot it does run.
func testBackfillNeverReruns(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	ran := sched(job, now, "a")
	c := mustClaim(t, a, ran, actors.Claimed)
	finish(t, a, ran, c, actors.ResultSuccess, 0)
	missed, err := a.Audit(ctxT(t), actors.AuditRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	_ = missed
	bf := sched(job, now, "b")
	bf.Trigger, bf.Lease, bf.Windows.Answer = actors.TriggerBackfill, false, 0
	waitPast(t, a, now)
	e := mustClaim(t, a, bf, actors.ClaimedElsewhere)
	if e.Status != "ran" {
		t.Errorf("backfill of a slot that ran: record %+v, want ran", e)
	}
}

// waitPast waits until the backend's time is past slot's second.
func waitPast(t *testing.T, b backend, slot int64) {
	t.Helper()
	for nowSlot(t, b) <= slot {
		time.Sleep(20 * time.Millisecond)
	}
}

func testLease(t *testing.T, s store) {
	a := s.newClient(t)
	ctx := ctxT(t)
	job, now := t.Name(), nowSlot(t, a)
	req := sched(job, now, "a")
	req.TTL = 200 * time.Millisecond
	mustClaim(t, a, req, actors.Claimed)
	if _, err := a.Renew(ctx, job, "x:y", time.Second); !errors.Is(err, actors.ErrNotHeld) {
		t.Errorf("renew by a non-owner: %v, want ErrNotHeld", err)
	}
	if _, err := a.Renew(ctx, job, req.Owner(), time.Minute); err != nil {
		t.Errorf("renew by the owner: %v", err)
	}
	if ok, err := a.Release(ctx, job, "x:y"); ok || err != nil {
		t.Errorf("release by a non-owner: %v, %v; want false, nil", ok, err)
	}
	if ok, err := a.Release(ctx, job, req.Owner()); !ok || err != nil {
		t.Errorf("release by the owner: %v, %v; want true, nil", ok, err)
	}
}

// docs/protocol.md R4, must-show 2: a token minted after Redis lost
// everything is greater than every one before.
func testTokensAcrossLoss(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	var last int64
	for _, slot := range []int64{now - 1, now} {
		req := sched(job, slot, "a")
		req.Lease = false
		c := mustClaim(t, a, req, actors.Claimed)
		if c.Token <= last {
			t.Fatalf("token %d after %d", c.Token, last)
		}
		last = c.Token
	}
	s.loseState(t, job)
	m := sched(job, 0, "a")
	m.Trigger = actors.TriggerManual
	c := mustClaim(t, a, m, actors.Claimed)
	if c.Token <= last {
		t.Errorf("token after a total loss: %d, want > %d", c.Token, last)
	}
}

// docs/protocol.md R5: a node that saw the ledger's seq finds it behind:
// the claim repairs, and a slot around the loss is refused state_lost.
func testLossDetected(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	req := sched(job, now, "a")
	c := mustClaim(t, a, req, actors.Claimed)
	s.loseState(t, job)
	again := sched(job, now, "b")
	again.SeenSeq = c.Seq
	l := mustClaim(t, a, again, actors.StateLost)
	if !l.Repaired || l.Seq < c.Seq {
		t.Errorf("claim after the loss: %+v, want repaired with seq >= %d", l, c.Seq)
	}
	if o, _ := occurrence(t, a, job, now); o.Status != "skipped" || o.Reason != actors.SkipStateLost {
		t.Errorf("record after the refusal: %+v, want skipped state_lost", o)
	}
	bf := sched(job, now-100, "b")
	bf.Trigger, bf.Lease = actors.TriggerBackfill, false
	mustClaim(t, a, bf, actors.StateLost) // a slot before the loss: may have run
	bf.IgnorePause = true                 // -force
	mustClaim(t, a, bf, actors.Claimed)
}

// docs/protocol.md R6: max_runs counts successes and survives a loss
// through a node that saw the count.
func testMaxRuns(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	req := sched(job, now-1, "a")
	req.MaxRuns = 1
	c := mustClaim(t, a, req, actors.Claimed)
	next := sched(job, now, "b")
	next.MaxRuns, next.Lease = 1, false
	mustClaim(t, a, next, actors.MaxRunsReached) // one in flight counts
	f := finish(t, a, req, c, actors.ResultSuccess, 1)
	if f.Runs != 1 {
		t.Errorf("runs after a success: %d, want 1", f.Runs)
	}
	read, err := a.Audit(ctxT(t), actors.AuditRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	waitPast(t, a, read.From+1)
	got, err := a.Audit(ctxT(t), actors.AuditRequest{Job: job, From: read.From, Slots: []int64{read.From + 1}, MaxRuns: 1,
		Node: "a", Reason: "not_claimed"})
	if err != nil || len(got.Missed) != 0 {
		t.Errorf("audit of a done job: %+v, %v; want nothing missed", got, err)
	}
	if o, _ := occurrence(t, a, job, read.From+1); o.Status != "skipped" || o.Reason != actors.SkipMaxRuns {
		t.Errorf("a done job's unclaimed slot: %+v, want skipped max_runs", o)
	}
	s.loseState(t, job)
	after := sched(job, nowSlot(t, a), "b")
	after.MaxRuns, after.SeenRuns, after.Lease = 1, 1, false
	mustClaim(t, a, after, actors.MaxRunsReached)
}

func testFinishIdempotent(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	req := sched(job, now, "a")
	c := mustClaim(t, a, req, actors.Claimed)
	f1 := finish(t, a, req, c, actors.ResultSuccess, 0)
	f2 := finish(t, a, req, c, actors.ResultSuccess, 0)
	if f1.Runs != 1 || f2.Runs != 1 {
		t.Errorf("runs after a finish and its retry: %d, %d; want 1, 1", f1.Runs, f2.Runs)
	}
	o, _ := occurrence(t, a, job, now)
	if o.Status != "ran" || o.Result != actors.ResultSuccess || o.Token != c.Token {
		t.Errorf("record: %+v, want ran success with token %d", o, c.Token)
	}
}

func testQueue(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	first := sched(job, now-1, "a")
	first.Queue = true
	c := mustClaim(t, a, first, actors.Claimed)
	second := sched(job, now, "b")
	second.Queue = true
	mustClaim(t, a, second, actors.Queued)
	if o, _ := occurrence(t, a, job, now); o.Status != "queued" {
		t.Errorf("pending slot's record: %+v, want queued", o)
	}
	owner := first.Owner()
	f, err := a.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: owner, Next: "a:next", TTL: time.Minute,
		Record: actors.RunRecord{RunID: first.RunID, Slot: first.Slot, Node: "a", Fence: c.Token, Result: actors.ResultSuccess}})
	if err != nil || f.Pending != now || f.Token <= c.Token {
		t.Fatalf("finish: %+v, %v; want slot %d handed on with a token > %d", f, err, now, c.Token)
	}
	if o, _ := occurrence(t, a, job, now); o.Status != "claimed" || o.RunID != "next" || o.Token != f.Token {
		t.Errorf("handed-on slot's record: %+v, want claimed by run next", o)
	}
	// R7: a pending slot left behind by a holder that vanished, and a
	// later slot claimed: the pending one expired (no catch-up window).
	job2 := job + "-2"
	h := sched(job2, now-1, "a")
	h.Queue, h.TTL = true, 50*time.Millisecond
	mustClaim(t, a, h, actors.Claimed)
	p := sched(job2, now, "b")
	p.Queue = true
	mustClaim(t, a, p, actors.Queued)
	time.Sleep(100 * time.Millisecond) // the holder's lease expires
	waitPast(t, a, now)
	n := sched(job2, now+1, "b")
	n.Queue = true
	e := mustClaim(t, a, n, actors.Claimed)
	if e.Expired != now || e.Takes != 0 {
		t.Errorf("claim after the holder vanished: %+v, want the pending slot %d expired", e, now)
	}
	if o, _ := occurrence(t, a, job2, now); o.Status != "skipped" || o.Reason != actors.SkipExpired {
		t.Errorf("expired slot's record: %+v, want skipped expired", o)
	}
}

// docs/protocol.md R8, must-show 6: due slots without a record are
// recorded missed once, by one auditor.
func testAudit(t *testing.T, s store) {
	a, b := s.newClient(t), s.newClient(t)
	job := t.Name()
	read, err := a.Audit(ctxT(t), actors.AuditRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	start := read.From
	slots := []int64{start + 1, start + 2, start + 3}
	ran := sched(job, start+2, "a") // one of them ran (claimed in time)
	ran.Lease = false
	waitPast(t, a, start+1)
	mustClaim(t, a, ran, actors.Claimed)
	waitPast(t, a, start+3)
	time.Sleep(50 * time.Millisecond)
	req := actors.AuditRequest{Job: job, From: start, Slots: slots, Node: "a", Reason: "not_claimed"}
	got, err := a.Audit(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Missed) != fmt.Sprint([]int64{start + 1, start + 3}) || got.To != start+3 {
		t.Errorf("audit: %+v, want %d and %d missed, audited to %d", got, start+1, start+3, start+3)
	}
	req.Node = "b"
	again, err := b.Audit(ctxT(t), req)
	if err != nil || !again.Stale || len(again.Missed) != 0 {
		t.Errorf("a second audit of the same slots: %+v, %v; want stale, nothing missed", again, err)
	}
	if o, _ := occurrence(t, a, job, start+1); o.Status != "missed" || o.Reason != "not_claimed" || o.Node != "a" {
		t.Errorf("missed record: %+v", o)
	}
	cu := sched(job, start+1, "b")
	cu.Trigger, cu.Windows.Catchup = actors.TriggerCatchup, time.Hour
	mustClaim(t, b, cu, actors.Claimed) // a missed slot may run late
}

// docs/protocol.md R9.
func testRetention(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	for i := range int64(5) {
		req := sched(job, now-200+i, "a")
		req.Trigger, req.Lease, req.Retention = actors.TriggerBackfill, false, actors.Retention{Max: 3}
		req.IgnorePause = true // -force: slots before the ledger began
		mustClaim(t, a, req, actors.Claimed)
	}
	occ, err := a.Occurrences(ctxT(t), job, 0, 1<<40)
	if err != nil || len(occ) != 3 || occ[0].Slot != now-198 {
		t.Fatalf("occurrences after 5 claims, 3 kept: %+v, %v; want the last 3", occ, err)
	}
	old := sched(job, now-200, "a")
	old.Trigger, old.Lease, old.IgnorePause = actors.TriggerBackfill, false, true
	mustClaim(t, a, old, actors.OutsideRetention)
}

// docs/protocol.md R9: a claim lets the ledger hold up to max + max/10
// (at most 9) records, then trims it back to max in one call.
func testRetentionSlack(t *testing.T, s store) {
	a := s.newClient(t)
	job, now := t.Name(), nowSlot(t, a)
	count := func() int {
		occ, err := a.Occurrences(ctxT(t), job, 0, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		return len(occ)
	}
	for i := range int64(23) {
		req := sched(job, now-200+i, "a")
		req.Trigger, req.Lease, req.Retention = actors.TriggerBackfill, false, actors.Retention{Max: 20}
		req.IgnorePause = true // -force: slots before the ledger began
		mustClaim(t, a, req, actors.Claimed)
		if got, want := count(), int(min(i+1, 22)); i < 22 && got != want {
			t.Fatalf("after %d claims with max 20 (slack 2): %d records, want %d", i+1, got, want)
		}
	}
	if got := count(); got != 20 {
		t.Fatalf("after 23 claims with max 20 (slack 2): %d records, want 20", got)
	}
}

func testManual(t *testing.T, s store) {
	a := s.newClient(t)
	job := t.Name()
	m := sched(job, 0, "a")
	m.Trigger = actors.TriggerManual
	c := mustClaim(t, a, m, actors.Claimed)
	m2 := sched(job, 0, "b")
	m2.Trigger = actors.TriggerManual
	mustClaim(t, a, m2, actors.Overlap) // the lease is held
	if _, err := a.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: m.Owner(), Record: actors.RunRecord{RunID: m.RunID,
		Trigger: actors.TriggerManual, Node: "a", Fence: c.Token, Result: actors.ResultFailure, Claimed: c.Now}}); err != nil {
		t.Fatal(err)
	}
	hist, err := a.History(ctxT(t), job, 10)
	if err != nil || len(hist) != 1 || hist[0].Fence != c.Token || hist[0].Result != actors.ResultFailure {
		t.Errorf("history: %+v, %v; want the manual run", hist, err)
	}
}

func testInvalid(t *testing.T, s store) {
	a := s.newClient(t)
	for _, req := range []actors.ClaimRequest{
		{},
		{Job: "j", Slot: 1, Trigger: actors.TriggerSchedule},                                     // no node
		{Job: "j", Slot: 0, Trigger: actors.TriggerSchedule, Node: "a", RunID: "r"},              // a slot 0 schedule claim
		{Job: "j", Slot: 1, Trigger: actors.TriggerManual, Node: "a", RunID: "r"},                // a manual run with a slot
		{Job: "j", Slot: 1, Trigger: actors.TriggerSchedule, Node: "a", RunID: "r", Lease: true}, // no ttl
	} {
		if _, err := a.Claim(ctxT(t), req); err == nil {
			t.Errorf("claim %+v: got nil error", req)
		}
	}
}

// manualReq is a manual claim without a lease: always won (tests of the
// transport, not of the rules).
func manualReq(job string) actors.ClaimRequest {
	return actors.ClaimRequest{Job: job, Trigger: actors.TriggerManual, Node: "n", RunID: "m" + strconv.FormatInt(runs.Add(1), 10)}
}

// leaseReq is a manual claim with a lease of ttl.
func leaseReq(job string, ttl time.Duration) actors.ClaimRequest {
	req := manualReq(job)
	req.Lease, req.TTL = true, ttl
	return req
}
