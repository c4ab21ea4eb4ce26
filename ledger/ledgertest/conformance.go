package ledgertest

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// Cases lists the rules every backend must keep (docs/protocol.md,
// R1–R9), one case a rule; Run runs them all against one Store.
var Cases = []Case{
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
	{"R6_UnansweredClaimRecordedNotRun", testUnansweredClaim},
	{"R9_TrimKeepsClaimableSlots", testTrimProtects},
	{"R3_LeaseLostWithTheStateIsTakenAgain", testLeaseRetaken},
}

// docs/protocol.md R2: a claim before its slot in Redis time (a clock fast
// within the early edge) decides nothing: too_early, no record, the lease
// not taken; at the slot it is decided.
func testTooEarly(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	req := Sched(job, now+1, "a")
	MustClaim(t, a, req, ledger.TooEarly)
	if o, ok := OccurrenceOf(t, a, job, now+1); ok {
		t.Errorf("record after too_early: %+v, want none", o)
	}
	if st := MustState(t, a, job); st.LeaseHolder != "" {
		t.Errorf("lease after too_early: held by %q, want free", st.LeaseHolder)
	}
	WaitPast(t, a, now)
	MustClaim(t, a, req, ledger.Claimed)
}

// docs/protocol.md R5, R8: an audit that finds the ledger behind the
// node's seq records the slots around the loss state_lost, not missed (their
// record may be what was lost), and a catch-up cannot run them.
func testAuditAfterLoss(t *testing.T, s Store) {
	a := s.NewClient(t)
	job := t.Name()
	read, err := a.Audit(Ctx(t), ledger.AuditRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	req := Sched(job, read.From+1, "a")
	req.Lease = false
	WaitPast(t, a, read.From)
	c := MustClaim(t, a, req, ledger.Claimed)
	WaitPast(t, a, read.From+2)
	s.LoseState(t, job)
	// The loss: the ledger starts again; a node that saw seq c.Seq audits.
	read, err = a.Audit(Ctx(t), ledger.AuditRequest{Job: job, SeenSeq: c.Seq, Early: 5 * time.Second})
	if err != nil || !read.Repaired {
		t.Fatalf("audit after the loss: %+v, %v; want repaired", read, err)
	}
	slot := read.From + 1
	WaitPast(t, a, slot)
	time.Sleep(20 * time.Millisecond)
	got, err := a.Audit(Ctx(t), ledger.AuditRequest{Job: job, From: read.From, Slots: []int64{slot}, Early: 5 * time.Second,
		Node: "a", Reason: "not_claimed"})
	if err != nil || len(got.Missed) != 0 || got.To != slot {
		t.Fatalf("audit of a slot within the loss's early edge: %+v, %v; want it decided, nothing missed", got, err)
	}
	if o, _ := OccurrenceOf(t, a, job, slot); o.Status != "skipped" || o.Reason != ledger.SkipStateLost {
		t.Errorf("record: %+v, want skipped state_lost", o)
	}
}

// docs/protocol.md R6: a claim counts toward max_runs until its finish,
// however long it runs (overlap allow: no lease); a claim whose node died
// is declared unknown by the audit once its lease and window passed, and
// still counts.
func testInFlight(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	first := Sched(job, now-1, "a")
	first.Lease, first.MaxRuns, first.TTL = false, 2, 100*time.Millisecond
	MustClaim(t, a, first, ledger.Claimed)
	time.Sleep(150 * time.Millisecond) // longer than its lock_ttl: still in flight
	second := Sched(job, now, "b")
	second.Lease, second.MaxRuns, second.TTL = false, 2, 100*time.Millisecond
	MustClaim(t, a, second, ledger.Claimed)
	third := Sched(job, now, "c")
	third.Lease, third.MaxRuns = false, 2
	MustClaim(t, a, third, ledger.ClaimedElsewhere)
	time.Sleep(150 * time.Millisecond) // the second's lease (none) and window (0 here) pass too
	got, err := a.Audit(Ctx(t), ledger.AuditRequest{Job: job, LockTTL: 100 * time.Millisecond})
	if err != nil || len(got.Unknown) != 2 {
		t.Fatalf("audit after both leases and windows passed: %+v, %v; want 2 unknown", got, err)
	}
	if o, _ := OccurrenceOf(t, a, job, now-1); o.Status != "unknown" {
		t.Errorf("record of a claim never finished: %+v, want unknown", o)
	}
	WaitPast(t, a, now)
	fourth := Sched(job, now+1, "c")
	fourth.Lease, fourth.MaxRuns = false, 2
	MustClaim(t, a, fourth, ledger.MaxRunsReached) // the two of unknown outcome count
}

// leaveQueued makes slot now of job (overlap queue) pending behind a
// holder of slot now−1 whose 50 ms lease then runs out without a finish:
// a holder that vanished.
func leaveQueued(t *testing.T, a Backend, job string, now int64) {
	t.Helper()
	h := Sched(job, now-1, "a")
	h.Queue, h.TTL = true, 50*time.Millisecond
	MustClaim(t, a, h, ledger.Claimed)
	p := Sched(job, now, "b")
	p.Queue = true
	MustClaim(t, a, p, ledger.Queued)
}

// unanswered is the finish a node's janitor sends for a claim of req whose
// answer was lost (ledger.FinishRequest.OwnRecordOnly): not run.
func unanswered(req ledger.ClaimRequest) ledger.FinishRequest {
	owner := ""
	if req.Lease {
		owner = req.Owner()
	}
	return ledger.FinishRequest{Job: req.Job, Owner: owner, Retry: true, OwnRecordOnly: true,
		Record: ledger.RunRecord{RunID: req.RunID, Slot: req.Slot, Trigger: req.Trigger, Node: req.Node, Skip: ledger.SkipRedisError}}
}

// docs/protocol.md R6 and "Phantom leases and the janitor": a claim whose
// answer was lost did not run on its node. If Redis applied it, its record
// (claimed, or unknown after the audit) becomes skipped redis_error, its
// lease is released and it stops counting toward max_runs; if Redis did
// not, nothing is written and the slot stays free; another run's record
// stays as it is. A pending slot the claim took instead, and a manual
// run's record, are found by the run id.
func testUnansweredClaim(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)

	applied := Sched(job, now-1, "a")
	applied.MaxRuns, applied.TTL = 1, 100*time.Millisecond
	MustClaim(t, a, applied, ledger.Claimed)
	time.Sleep(150 * time.Millisecond) // its lease and window pass: the audit gives up on it
	if got, err := a.Audit(Ctx(t), ledger.AuditRequest{Job: job, LockTTL: 100 * time.Millisecond}); err != nil || len(got.Unknown) != 1 {
		t.Fatalf("audit: %+v, %v; want the claim unknown", got, err)
	}
	if _, err := a.Finish(Ctx(t), unanswered(applied)); err != nil {
		t.Fatalf("finish of the unanswered claim: %v", err)
	}
	if o, _ := OccurrenceOf(t, a, job, now-1); o.Status != "skipped" || o.Reason != ledger.SkipRedisError {
		t.Errorf("record of a claim whose answer was lost: %+v, want skipped redis_error", o)
	}

	free := Sched(job, now, "a") // never applied: its finish writes nothing
	free.MaxRuns = 1
	if _, err := a.Finish(Ctx(t), unanswered(free)); err != nil {
		t.Fatalf("finish of a claim never applied: %v", err)
	}
	if o, ok := OccurrenceOf(t, a, job, now); ok {
		t.Fatalf("a claim never applied left a record: %+v", o)
	}
	other := Sched(job, now, "b") // the slot is free, and max_runs (1) not reached: nothing ran
	other.MaxRuns = 1
	MustClaim(t, a, other, ledger.Claimed)
	if _, err := a.Finish(Ctx(t), unanswered(free)); err != nil {
		t.Errorf("finish of an unanswered claim, another run's record in its slot: %v", err)
	}
	if o, _ := OccurrenceOf(t, a, job, now); o.Status != "claimed" || o.Node != "b" {
		t.Errorf("another run's record after a conflicting finish: %+v, want b's claim", o)
	}

	// R7: a claim that takes the pending slot left by a vanished holder
	// (overlap queue, within the catch-up window): the run's record is the
	// pending slot's, not the one it sent; that one is settled too.
	job3 := job + "-queue"
	leaveQueued(t, a, job3, now)
	WaitPast(t, a, now) // the holder's lease expires too
	c := Sched(job3, now+1, "c")
	c.Queue, c.MaxRuns, c.Windows.Catchup = true, 2, time.Minute
	got, err := a.Claim(Ctx(t), c)
	if err != nil {
		t.Fatal(err)
	}
	took, _ := OccurrenceOf(t, a, job3, now)
	if took.RunID != c.RunID || took.Status != "claimed" {
		t.Fatalf("claim %+v: the pending slot's record %+v, want it claimed by the claim's run", got, took)
	}
	if _, err := a.Finish(Ctx(t), unanswered(c)); err != nil {
		t.Fatalf("finish of the unanswered claim that took the pending slot: %v", err)
	}
	if o, _ := OccurrenceOf(t, a, job3, now); o.Status != "skipped" || o.Reason != ledger.SkipRedisError {
		t.Errorf("the pending slot taken by the unanswered claim: %+v, want skipped redis_error", o)
	}

	// A manual run's record is found by its run id: its token came with
	// the lost answer.
	job4 := job + "-manual"
	m := Sched(job4, 0, "a")
	m.Trigger = ledger.TriggerManual
	mc := MustClaim(t, a, m, ledger.Claimed)
	if _, err := a.Finish(Ctx(t), unanswered(m)); err != nil {
		t.Fatalf("finish of an unanswered manual claim: %v", err)
	}
	occ, err := a.Occurrences(Ctx(t), job4, 0, mc.Now.Unix()+10)
	if err != nil || len(occ) != 1 || occ[0].Status != "skipped" || occ[0].Reason != ledger.SkipRedisError {
		t.Errorf("manual run whose claim answer was lost: %+v, %v; want its record skipped redis_error", occ, err)
	}
}

// docs/protocol.md R9: a ledger of one record keeps the records of slots
// still claimable (here, within the answer window), so a claim of such a
// slot is decided by them, never run twice.
func testTrimProtects(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	for _, slot := range []int64{now, now - 1} {
		req := Sched(job, slot, "a")
		req.Lease, req.Retention = false, ledger.Retention{Max: 1}
		MustClaim(t, a, req, ledger.Claimed)
	}
	again := Sched(job, now, "b")
	again.Lease = false
	MustClaim(t, a, again, ledger.ClaimedElsewhere)
}

var windows = ledger.Windows{Early: 2 * time.Second, Answer: 2 * time.Second}

// NowSlot is the backend's current second: a slot a scheduled claim may
// claim now.
func NowSlot(t *testing.T, b Backend) int64 {
	t.Helper()
	now, err := b.Time(Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return now.Unix()
}

// Runs numbers the run ids of the requests the tests make.
var Runs atomic.Int64

// Sched is a scheduled claim of slot by node, with a lease.
func Sched(job string, slot int64, node string) ledger.ClaimRequest {
	return ledger.ClaimRequest{Job: job, Slot: slot, Trigger: ledger.TriggerSchedule, Node: node,
		RunID: "r" + strconv.FormatInt(Runs.Add(1), 10), TTL: time.Minute, Lease: true, Windows: windows}
}

// MustClaim claims req and fails the test unless the outcome is want.
func MustClaim(t *testing.T, b Backend, req ledger.ClaimRequest, want ledger.Outcome) ledger.Claim {
	t.Helper()
	c, err := b.Claim(Ctx(t), req)
	if err != nil {
		t.Fatalf("claim %+v: %v", req, err)
	}
	if c.Outcome != want {
		t.Fatalf("claim of slot %d (%s by %s): got %v (%+v), want %v", req.Slot, req.Trigger, req.Node, c.Outcome, c, want)
	}
	return c
}

// OccurrenceOf is the record of the job's slot, if any.
func OccurrenceOf(t *testing.T, b Backend, job string, slot int64) (ledger.Occurrence, bool) {
	t.Helper()
	occ, err := b.Occurrences(Ctx(t), job, slot, slot)
	if err != nil {
		t.Fatal(err)
	}
	if len(occ) == 0 {
		return ledger.Occurrence{}, false
	}
	return occ[0], true
}

// Finish ends claim c of req as a run with result.
func Finish(t *testing.T, b Backend, req ledger.ClaimRequest, c ledger.Claim, result string, maxRuns int64) ledger.Finished {
	t.Helper()
	owner := ""
	if req.Lease {
		owner = req.Owner()
	}
	f, err := b.Finish(Ctx(t), ledger.FinishRequest{Job: req.Job, Owner: owner, MaxRuns: maxRuns,
		Record: ledger.RunRecord{RunID: req.RunID, Slot: req.Slot, Trigger: req.Trigger, Node: req.Node, Fence: c.Token,
			Start: c.Now, End: c.Now.Add(time.Millisecond), Result: result, Attempts: 1, Claimed: c.Now}})
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	return f
}

func testOneClaimPerSlot(t *testing.T, s Store) {
	a, b := s.NewClient(t), s.NewClient(t)
	job, slot := t.Name(), NowSlot(t, a)
	c := MustClaim(t, a, Sched(job, slot, "a"), ledger.Claimed)
	if c.Token <= 0 {
		t.Errorf("token %d, want > 0", c.Token)
	}
	e := MustClaim(t, b, Sched(job, slot, "b"), ledger.ClaimedElsewhere)
	if e.Status != "claimed" {
		t.Errorf("claimed elsewhere: record status %q, want claimed", e.Status)
	}
	o, ok := OccurrenceOf(t, a, job, slot)
	if !ok || o.Status != "claimed" || o.Node != "a" || o.Token != c.Token {
		t.Errorf("record: %+v (%v), want claimed by a with token %d", o, ok, c.Token)
	}
}

// The claims of S+1 reach Redis before those of S (docs/protocol.md R1):
// S still runs.
func testOrderCannotLose(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, slot := t.Name(), NowSlot(t, a)
	later := Sched(job, slot, "a")
	later.Lease = false
	MustClaim(t, a, later, ledger.Claimed)
	earlier := Sched(job, slot-1, "b")
	earlier.Lease = false
	MustClaim(t, a, earlier, ledger.Claimed)
}

func testSkipsRecorded(t *testing.T, s Store) {
	a, b := s.NewClient(t), s.NewClient(t)
	job, slot := t.Name(), NowSlot(t, a)
	MustClaim(t, a, Sched(job, slot-1, "a"), ledger.Claimed) // holds the lease
	MustClaim(t, b, Sched(job, slot, "b"), ledger.Overlap)
	if o, _ := OccurrenceOf(t, a, job, slot); o.Status != "skipped" || o.Reason != ledger.SkipOverlap {
		t.Errorf("overlapped slot's record: %+v, want skipped overlap", o)
	}
	e := MustClaim(t, a, Sched(job, slot, "a"), ledger.ClaimedElsewhere)
	if e.Status != "skipped" || e.Reason != ledger.SkipOverlap {
		t.Errorf("a later claim of the overlapped slot: %+v, want the record's skipped overlap", e)
	}
}

func testClockSkew(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	for _, slot := range []int64{now + 3600, now + 5, now - 10} { // an hour fast, 5 s fast, 10 s behind
		c := MustClaim(t, a, Sched(job, slot, "a"), ledger.ClockSkew)
		if d := time.Since(c.Now); d < -time.Minute || d > time.Minute {
			t.Errorf("clock_skew answer's Redis time %v is not now", c.Now)
		}
		if o, ok := OccurrenceOf(t, a, job, slot); ok {
			t.Errorf("slot %d: a record %+v after a clock_skew refusal, want none", slot, o)
		}
	}
}

func testCatchupBackfillWindows(t *testing.T, s Store) {
	a := s.NewClient(t)
	job := t.Name()
	read, err := a.Audit(Ctx(t), ledger.AuditRequest{Job: job}) // the ledger begins
	if err != nil {
		t.Fatal(err)
	}
	cu := Sched(job, read.Now.Unix()-30, "a")
	cu.Trigger, cu.Windows.Catchup = ledger.TriggerCatchup, time.Minute
	MustClaim(t, a, cu, ledger.OutsideWindow) // due before the ledger began: it may have run
	WaitPast(t, a, read.Now.Unix()+1)
	now := NowSlot(t, a)
	cu = Sched(job, now-1, "a")
	cu.Trigger = ledger.TriggerCatchup
	MustClaim(t, a, cu, ledger.OutsideWindow) // no catch-up window
	cu.Windows.Catchup = time.Minute
	MustClaim(t, a, cu, ledger.Claimed)
	bf := Sched(job, now, "a")
	bf.Trigger, bf.Lease = ledger.TriggerBackfill, false
	MustClaim(t, a, bf, ledger.OutsideWindow) // within the answer window: the schedule's
}

// docs/protocol.md R1, must-show 5: a backfill over slots the schedule ran
// runs none; a missed slot it does run.
func testBackfillNeverReruns(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	ran := Sched(job, now, "a")
	c := MustClaim(t, a, ran, ledger.Claimed)
	Finish(t, a, ran, c, ledger.ResultSuccess, 0)
	missed, err := a.Audit(Ctx(t), ledger.AuditRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	_ = missed
	bf := Sched(job, now, "b")
	bf.Trigger, bf.Lease, bf.Windows.Answer = ledger.TriggerBackfill, false, 0
	WaitPast(t, a, now)
	e := MustClaim(t, a, bf, ledger.ClaimedElsewhere)
	if e.Status != "ran" {
		t.Errorf("backfill of a slot that ran: record %+v, want ran", e)
	}
}

// WaitPast waits until the backend's time is past slot's second.
func WaitPast(t *testing.T, b Backend, slot int64) {
	t.Helper()
	for NowSlot(t, b) <= slot {
		time.Sleep(20 * time.Millisecond)
	}
}

func testLease(t *testing.T, s Store) {
	a := s.NewClient(t)
	ctx := Ctx(t)
	job, now := t.Name(), NowSlot(t, a)
	req := Sched(job, now, "a")
	req.TTL = 200 * time.Millisecond
	MustClaim(t, a, req, ledger.Claimed)
	if _, err := a.Renew(ctx, job, "x:y", time.Second); !errors.Is(err, ledger.ErrNotHeld) {
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

// docs/protocol.md R3, R5: a lease Redis lost with its state is taken
// again at its holder's next renewal (ErrRetaken), so a later claim finds
// it held (overlap); a lease another owner holds is not taken.
func testLeaseRetaken(t *testing.T, s Store) {
	a := s.NewClient(t)
	ctx := Ctx(t)
	job, now := t.Name(), NowSlot(t, a)
	req := Sched(job, now, "a")
	c := MustClaim(t, a, req, ledger.Claimed)
	s.LoseState(t, job)
	seen := Sched(job, now, "b") // a node that saw the ledger detects the loss: now is within E of it
	seen.SeenSeq = c.Seq
	MustClaim(t, a, seen, ledger.StateLost)
	if _, err := a.Renew(ctx, job, req.Owner(), time.Minute); !errors.Is(err, ledger.ErrRetaken) {
		t.Fatalf("renew of a lease lost with the state: %v, want ErrRetaken", err)
	}
	if _, err := a.Renew(ctx, job, req.Owner(), time.Minute); err != nil {
		t.Errorf("the next renewal: %v, want the lease held", err)
	}
	if _, err := a.Renew(ctx, job, "x:y", time.Minute); !errors.Is(err, ledger.ErrNotHeld) {
		t.Errorf("renew by another owner: %v, want ErrNotHeld", err)
	}
	WaitPast(t, a, now+2) // past E after the loss was detected
	later := Sched(job, now+3, "b")
	later.SeenSeq = c.Seq
	MustClaim(t, a, later, ledger.Overlap)
}

// docs/protocol.md R4, must-show 2: a token minted after Redis lost
// everything is greater than every one before.
func testTokensAcrossLoss(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	var last int64
	for _, slot := range []int64{now - 1, now} {
		req := Sched(job, slot, "a")
		req.Lease = false
		c := MustClaim(t, a, req, ledger.Claimed)
		if c.Token <= last {
			t.Fatalf("token %d after %d", c.Token, last)
		}
		last = c.Token
	}
	s.LoseState(t, job)
	m := Sched(job, 0, "a")
	m.Trigger = ledger.TriggerManual
	c := MustClaim(t, a, m, ledger.Claimed)
	if c.Token <= last {
		t.Errorf("token after a total loss: %d, want > %d", c.Token, last)
	}
}

// docs/protocol.md R5: a node that saw the ledger's seq finds it behind:
// the claim repairs, and a slot around the loss is refused state_lost.
func testLossDetected(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	req := Sched(job, now, "a")
	c := MustClaim(t, a, req, ledger.Claimed)
	s.LoseState(t, job)
	again := Sched(job, now, "b")
	again.SeenSeq = c.Seq
	l := MustClaim(t, a, again, ledger.StateLost)
	if !l.Repaired || l.Seq < c.Seq {
		t.Errorf("claim after the loss: %+v, want repaired with seq >= %d", l, c.Seq)
	}
	if o, _ := OccurrenceOf(t, a, job, now); o.Status != "skipped" || o.Reason != ledger.SkipStateLost {
		t.Errorf("record after the refusal: %+v, want skipped state_lost", o)
	}
	bf := Sched(job, now-100, "b")
	bf.Trigger, bf.Lease = ledger.TriggerBackfill, false
	MustClaim(t, a, bf, ledger.StateLost) // a slot before the loss: may have run
	bf.IgnorePause = true                 // -force
	MustClaim(t, a, bf, ledger.Claimed)
}

// docs/protocol.md R6: max_runs counts successes and survives a loss
// through a node that saw the count.
func testMaxRuns(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	req := Sched(job, now-1, "a")
	req.MaxRuns = 1
	c := MustClaim(t, a, req, ledger.Claimed)
	next := Sched(job, now, "b")
	next.MaxRuns, next.Lease = 1, false
	MustClaim(t, a, next, ledger.MaxRunsReached) // one in flight counts
	f := Finish(t, a, req, c, ledger.ResultSuccess, 1)
	if f.Runs != 1 {
		t.Errorf("runs after a success: %d, want 1", f.Runs)
	}
	read, err := a.Audit(Ctx(t), ledger.AuditRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	WaitPast(t, a, read.From+1)
	got, err := a.Audit(Ctx(t), ledger.AuditRequest{Job: job, From: read.From, Slots: []int64{read.From + 1}, MaxRuns: 1,
		Node: "a", Reason: "not_claimed"})
	if err != nil || len(got.Missed) != 0 {
		t.Errorf("audit of a done job: %+v, %v; want nothing missed", got, err)
	}
	if o, _ := OccurrenceOf(t, a, job, read.From+1); o.Status != "skipped" || o.Reason != ledger.SkipMaxRuns {
		t.Errorf("a done job's unclaimed slot: %+v, want skipped max_runs", o)
	}
	s.LoseState(t, job)
	after := Sched(job, NowSlot(t, a), "b")
	after.MaxRuns, after.SeenRuns, after.Lease = 1, 1, false
	MustClaim(t, a, after, ledger.MaxRunsReached)
}

func testFinishIdempotent(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	req := Sched(job, now, "a")
	c := MustClaim(t, a, req, ledger.Claimed)
	f1 := Finish(t, a, req, c, ledger.ResultSuccess, 0)
	f2 := Finish(t, a, req, c, ledger.ResultSuccess, 0)
	if f1.Runs != 1 || f2.Runs != 1 {
		t.Errorf("runs after a finish and its retry: %d, %d; want 1, 1", f1.Runs, f2.Runs)
	}
	o, _ := OccurrenceOf(t, a, job, now)
	if o.Status != "ran" || o.Result != ledger.ResultSuccess || o.Token != c.Token {
		t.Errorf("record: %+v, want ran success with token %d", o, c.Token)
	}
}

func testQueue(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	first := Sched(job, now-1, "a")
	first.Queue = true
	c := MustClaim(t, a, first, ledger.Claimed)
	second := Sched(job, now, "b")
	second.Queue = true
	MustClaim(t, a, second, ledger.Queued)
	if o, _ := OccurrenceOf(t, a, job, now); o.Status != "queued" {
		t.Errorf("pending slot's record: %+v, want queued", o)
	}
	owner := first.Owner()
	f, err := a.Finish(Ctx(t), ledger.FinishRequest{Job: job, Owner: owner, Next: "a:next", TTL: time.Minute,
		Record: ledger.RunRecord{RunID: first.RunID, Slot: first.Slot, Node: "a", Fence: c.Token, Result: ledger.ResultSuccess}})
	if err != nil || f.Pending != now || f.Token <= c.Token {
		t.Fatalf("finish: %+v, %v; want slot %d handed on with a token > %d", f, err, now, c.Token)
	}
	if o, _ := OccurrenceOf(t, a, job, now); o.Status != "claimed" || o.RunID != "next" || o.Token != f.Token {
		t.Errorf("handed-on slot's record: %+v, want claimed by run next", o)
	}
	// R7: a pending slot left behind by a holder that vanished, and a
	// later slot claimed: the pending one expired (no catch-up window).
	job2 := job + "-2"
	leaveQueued(t, a, job2, now)
	time.Sleep(100 * time.Millisecond) // the holder's lease expires
	WaitPast(t, a, now)
	n := Sched(job2, now+1, "b")
	n.Queue = true
	e := MustClaim(t, a, n, ledger.Claimed)
	if e.Expired != now || e.Takes != 0 {
		t.Errorf("claim after the holder vanished: %+v, want the pending slot %d expired", e, now)
	}
	if o, _ := OccurrenceOf(t, a, job2, now); o.Status != "skipped" || o.Reason != ledger.SkipExpired {
		t.Errorf("expired slot's record: %+v, want skipped expired", o)
	}
}

// docs/protocol.md R8, must-show 6: due slots without a record are
// recorded missed once, by one auditor.
func testAudit(t *testing.T, s Store) {
	a, b := s.NewClient(t), s.NewClient(t)
	job := t.Name()
	read, err := a.Audit(Ctx(t), ledger.AuditRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	start := read.From
	slots := []int64{start + 1, start + 2, start + 3}
	ran := Sched(job, start+2, "a") // one of them ran (claimed in time)
	ran.Lease = false
	WaitPast(t, a, start+1)
	MustClaim(t, a, ran, ledger.Claimed)
	WaitPast(t, a, start+3)
	time.Sleep(50 * time.Millisecond)
	req := ledger.AuditRequest{Job: job, From: start, Slots: slots, Node: "a", Reason: "not_claimed"}
	got, err := a.Audit(Ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Missed) != fmt.Sprint([]int64{start + 1, start + 3}) || got.To != start+3 {
		t.Errorf("audit: %+v, want %d and %d missed, audited to %d", got, start+1, start+3, start+3)
	}
	req.Node = "b"
	again, err := b.Audit(Ctx(t), req)
	if err != nil || !again.Stale || len(again.Missed) != 0 {
		t.Errorf("a second audit of the same slots: %+v, %v; want stale, nothing missed", again, err)
	}
	if o, _ := OccurrenceOf(t, a, job, start+1); o.Status != "missed" || o.Reason != "not_claimed" || o.Node != "a" {
		t.Errorf("missed record: %+v", o)
	}
	cu := Sched(job, start+1, "b")
	cu.Trigger, cu.Windows.Catchup = ledger.TriggerCatchup, time.Hour
	MustClaim(t, b, cu, ledger.Claimed) // a missed slot may run late
}

// docs/protocol.md R9.
func testRetention(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	for i := range int64(5) {
		req := Sched(job, now-200+i, "a")
		req.Trigger, req.Lease, req.Retention = ledger.TriggerBackfill, false, ledger.Retention{Max: 3}
		req.IgnorePause = true // -force: slots before the ledger began
		MustClaim(t, a, req, ledger.Claimed)
	}
	occ, err := a.Occurrences(Ctx(t), job, 0, 1<<40)
	if err != nil || len(occ) != 3 || occ[0].Slot != now-198 {
		t.Fatalf("occurrences after 5 claims, 3 kept: %+v, %v; want the last 3", occ, err)
	}
	old := Sched(job, now-200, "a")
	old.Trigger, old.Lease, old.IgnorePause = ledger.TriggerBackfill, false, true
	MustClaim(t, a, old, ledger.OutsideRetention)
}

// docs/protocol.md R9: a claim lets the ledger hold up to max + max/10
// (at most 9) records, then trims it back to max in one call.
func testRetentionSlack(t *testing.T, s Store) {
	a := s.NewClient(t)
	job, now := t.Name(), NowSlot(t, a)
	count := func() int {
		occ, err := a.Occurrences(Ctx(t), job, 0, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		return len(occ)
	}
	rt := ledger.Retention{Max: 20}
	if rt.TrimSlack() != 2 {
		t.Fatalf("slack of max 20: %d, want 2", rt.TrimSlack())
	}
	for i := range int64(23) {
		req := Sched(job, now-200+i, "a")
		req.Trigger, req.Lease, req.Retention = ledger.TriggerBackfill, false, rt
		req.IgnorePause = true // -force: slots before the ledger began
		MustClaim(t, a, req, ledger.Claimed)
		if got, want := count(), int(min(i+1, 22)); i < 22 && got != want {
			t.Fatalf("after %d claims with max 20 (slack 2): %d records, want %d", i+1, got, want)
		}
	}
	if got := count(); got != 20 {
		t.Fatalf("after 23 claims with max 20 (slack 2): %d records, want 20", got)
	}
}

func testManual(t *testing.T, s Store) {
	a := s.NewClient(t)
	job := t.Name()
	m := Sched(job, 0, "a")
	m.Trigger = ledger.TriggerManual
	c := MustClaim(t, a, m, ledger.Claimed)
	m2 := Sched(job, 0, "b")
	m2.Trigger = ledger.TriggerManual
	MustClaim(t, a, m2, ledger.Overlap) // the lease is held
	if _, err := a.Finish(Ctx(t), ledger.FinishRequest{Job: job, Owner: m.Owner(), Record: ledger.RunRecord{RunID: m.RunID,
		Trigger: ledger.TriggerManual, Node: "a", Fence: c.Token, Result: ledger.ResultFailure, Claimed: c.Now}}); err != nil {
		t.Fatal(err)
	}
	hist, err := a.History(Ctx(t), job, 10)
	if err != nil || len(hist) != 1 || hist[0].Fence != c.Token || hist[0].Result != ledger.ResultFailure {
		t.Errorf("history: %+v, %v; want the manual run", hist, err)
	}
}

func testInvalid(t *testing.T, s Store) {
	a := s.NewClient(t)
	for _, req := range []ledger.ClaimRequest{
		{},
		{Job: "j", Slot: 1, Trigger: ledger.TriggerSchedule},                                     // no node
		{Job: "j", Slot: 0, Trigger: ledger.TriggerSchedule, Node: "a", RunID: "r"},              // a slot 0 schedule claim
		{Job: "j", Slot: 1, Trigger: ledger.TriggerManual, Node: "a", RunID: "r"},                // a manual run with a slot
		{Job: "j", Slot: 1, Trigger: ledger.TriggerSchedule, Node: "a", RunID: "r", Lease: true}, // no ttl
	} {
		if _, err := a.Claim(Ctx(t), req); err == nil {
			t.Errorf("claim %+v: got nil error", req)
		}
	}
}

// ManualReq is a manual claim without a lease: always won (tests of the
// transport, not of the rules).
func ManualReq(job string) ledger.ClaimRequest {
	return ledger.ClaimRequest{Job: job, Trigger: ledger.TriggerManual, Node: "n", RunID: "m" + strconv.FormatInt(Runs.Add(1), 10)}
}

// LeaseReq is a manual claim with a lease of ttl.
func LeaseReq(job string, ttl time.Duration) ledger.ClaimRequest {
	req := ManualReq(job)
	req.Lease, req.TTL = true, ttl
	return req
}
