// Package ledger is the exactly-once protocol's contract (docs/protocol.md):
// the backend interface (Locker), the requests and answers it exchanges,
// the skip reasons and run results, and its sentinel errors. The runtime
// (actors) and every backend (redislock, the memory backend) import it;
// it imports neither.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Locker is the coordination backend the actors use (docs/protocol.md).
// Every method makes one round trip, blocks until it answers or ctx ends,
// and owns no goroutines. Implemented by *redislock.Redis and
// *memory.Memory; both pass the same conformance suite.
type Locker interface {
	// Claim decides one occurrence (rules R1–R7) atomically.
	Claim(ctx context.Context, req ClaimRequest) (Claim, error)
	// Renew extends a lease owner still holds to ttl (compare-and-PEXPIRE)
	// and returns the job's pending slot (overlap queue and replace; 0 =
	// none); an error wrapping ErrNotHeld says it is no longer held.
	Renew(ctx context.Context, job, owner string, ttl time.Duration) (pending int64, err error)
	// Release deletes a lease owner still holds (compare-and-DEL) and says
	// whether it did.
	Release(ctx context.Context, job, owner string) (bool, error)
	// Finish writes the occurrence's final record, releases the lease (if
	// req.Owner, non-empty, holds it) and, when req.Next is set, hands the
	// lease to the job's pending slot, in one round trip. It is idempotent:
	// a retry of a finish whose answer was lost writes the same record and
	// counts the run once.
	Finish(ctx context.Context, req FinishRequest) (Finished, error)
	// Audit records as missed the due slots of one job that have no record
	// once their answer window and grace have passed (rule R8).
	Audit(ctx context.Context, req AuditRequest) (Audited, error)
}

// Unhander is implemented by lockers that can take back the lease a
// Finish handed to a pending slot when the finish's answer was lost and
// nobody runs that slot (redislock's Unhand): the janitor then puts the
// slot back as pending instead of losing it. held says the lease was
// owner's (it is released); slot is the slot put back, 0 = none.
type Unhander interface {
	Unhand(ctx context.Context, job, owner string) (slot int64, held bool, err error)
}

// Peeker is implemented by lockers that can read a slot's record without
// deciding anything (redislock's Peek: one small script call that writes
// nothing, a fraction of a claim's cost to Redis). A lower-ranked node's scheduled claim reads the
// record first and is not sent when one exists (actors, claim): a record
// decides a scheduled claim whatever else holds (R1), so the answer is the
// one the claim would have given, ClaimedElsewhere with the record's
// status and reason. found is false when the slot has no record (or the
// job no ledger); the caller then claims.
type Peeker interface {
	Peek(ctx context.Context, job string, slot int64) (c Claim, found bool, err error)
}

// Windows are a job's time bounds as the claim script checks them against
// Redis time (docs/protocol.md, rule R2).
type Windows struct {
	// Early is how long before its fire time a scheduled claim is accepted
	// (node.max_clock_skew).
	Early time.Duration
	// Answer is how long after its fire time a scheduled claim is accepted
	// and its run may start: AnswerWindow of the job.
	Answer time.Duration
	// Catchup is the job's catchup_window (0 = none): a catch-up claim is
	// accepted while Redis time is at most this long after the slot, and a
	// pending slot this recent is still run (rule R7).
	Catchup time.Duration
}

// AnswerWindow is the answer window of a job (docs/protocol.md, "Terms"):
// min(maxSkew, lockTTL) plus the job's jitter (its fire may come that
// much after the slot). A run never starts later than this after its slot.
func AnswerWindow(maxSkew, lockTTL, jitter time.Duration) time.Duration {
	return min(maxSkew, lockTTL) + jitter
}

// Retention bounds a job's ledger (rule R9): at most Max records, none
// older than Age. Zero values mean the defaults.
type Retention struct {
	Age time.Duration
	Max int
}

// Default retention of the ledger (retention, max_occurrences).
const (
	DefaultRetentionAge = 7 * 24 * time.Hour
	DefaultRetentionMax = 100
)

// FinishRequest ends a run (Locker.Finish).
type FinishRequest struct {
	// Job is the job name (non-empty).
	Job string
	// Owner is the run's lease value; "" = the run held no lease
	// (overlap: allow).
	Owner string
	// Record is the occurrence's final record: a run (Record.Skip "") or
	// a won claim that did not run (Record.Skip: lock_lost, expired,
	// not_replicated, shutting_down).
	Record RunRecord
	// Next, with overlap queue or replace, is the lease value of the run
	// that takes the job's pending slot: when the lease was released and a
	// slot is pending, the lease is set to Next for TTL, the pending slot's
	// record becomes claimed and a token is minted, atomically. "" while
	// this node stops: a pending slot then stays pending (Finished.Left).
	Next string
	// TTL is the lease time to live for Next (>= 1ms when Next is set).
	TTL time.Duration
	// MaxRuns (> 0): a pending slot is not handed on once state.runs has
	// reached it (its record becomes skipped max_runs).
	MaxRuns int64
	// Retry: the janitor sends a finish whose answer was lost again. Next
	// must be "".
	Retry bool
	// OwnRecordOnly: the claim of Record's run got no answer, so its node
	// did not run it, yet Redis may have applied it. Each record of the
	// run (Record.RunID) still claimed or declared unknown — the slot sent,
	// or a pending slot the claim took instead, found among the claims in
	// flight — becomes skipped redis_error; none is created, so a
	// slot whose claim was not applied stays free for another node, and
	// another run's record is left as it is. Only Record.RunID and Slot are used
	// (a manual run needs no token). Needs no Next.
	OwnRecordOnly bool
}

// Finished answers a FinishRequest.
type Finished struct {
	// Released says the run's lease was deleted (it was still Owner's).
	Released bool
	// Pending is the job's pending slot that the finish took off the
	// queue, 0 = none. With Token > 0 it is claimed: Next holds the lease.
	// With Token 0: Left says it stays pending (Next was ""), otherwise
	// MaxRuns was reached and it was dropped.
	Pending, Token int64
	Left           bool
	// Runs is state.runs afterwards: the job's successful runs.
	Runs int64
	// Seq is state.seq afterwards (rule R5).
	Seq int64
	// Now is Redis time when the finish ran.
	Now time.Time
	// NotReplicated: a finish that handed the lease on (Token > 0) or
	// that made max_runs waited for redis.min_replicas_acked replicas and
	// fewer acknowledged it. With Token > 0 the pending slot is not run and
	// Next's lease is to be released; otherwise the record stands and the
	// caller warns. Replicas is WAIT's answer (0 when no WAIT was sent).
	NotReplicated bool
	Replicas      int
}

// Outcome is the result of a Claim (docs/protocol.md, rule R1).
type Outcome int

const (
	// Claimed: this node may run the slot; Claim.Token is its token.
	Claimed Outcome = iota
	// ClaimedElsewhere: the slot has a record already (Claim.Status and
	// Claim.Reason say what it records): another node claimed or decided it.
	ClaimedElsewhere
	// Paused: the job is paused cluster-wide; recorded skipped.
	Paused
	// Overlap: the lease is held; recorded skipped.
	Overlap
	// Queued: overlap queue or replace, the lease is held and no slot was
	// pending: the slot is the job's pending slot (recorded queued).
	Queued
	// MaxRunsReached: the job has made ClaimRequest.MaxRuns successful
	// runs (or has that many in flight); recorded skipped.
	MaxRunsReached
	// ClockSkew: Redis time is outside the slot's claim window (rule R2):
	// this node's clock is wrong (or its claim came very late). Nothing is
	// written; Claim.Now is Redis time.
	ClockSkew
	// OutsideWindow: a catch-up or backfill claim outside its window
	// (rule R2); nothing is written.
	OutsideWindow
	// StateLost: the ledger may have lost this slot's record (rule R5):
	// not run; recorded skipped (for a schedule claim).
	StateLost
	// OutsideRetention: a backfill claim of a slot older than the ledger
	// keeps (rule R9); nothing is written.
	OutsideRetention
	// NotReplicated: the claim won but fewer replicas than
	// redis.min_replicas_acked acknowledged it within
	// redis.replica_ack_timeout (WAIT): it is not run and the caller
	// releases the lease and records the slot skipped. Never returned by
	// the claim script itself, only by a backend that waits for replicas.
	NotReplicated
	// TooEarly: a scheduled claim sent before its slot in Redis time (a
	// clock fast by less than the early edge, R2): nothing was decided or
	// written; the caller sends it again once Redis time has reached the
	// slot (Claim.Now says how far off it is).
	TooEarly
	// NoRecord: a backfill of a slot without a record, due before the
	// job's ledger began (a new job, or a loss of Redis's state no node has
	// detected): it may have run, so only a forced backfill runs it.
	NoRecord
)

// String returns the skip-reason spelling.
func (o Outcome) String() string {
	switch o {
	case Claimed:
		return "claimed"
	case ClaimedElsewhere:
		return SkipClaimedElsewhere
	case Paused:
		return SkipPaused
	case Overlap:
		return SkipOverlap
	case Queued:
		return "queued"
	case MaxRunsReached:
		return SkipMaxRuns
	case ClockSkew:
		return SkipClockSkew
	case OutsideWindow:
		return SkipOutsideClaimWindow
	case StateLost:
		return SkipStateLost
	case OutsideRetention:
		return SkipOutsideRetention
	case NotReplicated:
		return SkipNotReplicated
	case TooEarly:
		return "too_early"
	case NoRecord:
		return SkipNoRecord
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// ClaimRequest asks for the right to run one occurrence of one job.
type ClaimRequest struct {
	// Job is the job name (non-empty).
	Job string
	// Slot is the fire time in Unix seconds UTC; 0 for a manual run (its
	// occurrence is identified by its token).
	Slot int64
	// Trigger is schedule, catchup, backfill or manual; it selects the
	// window rule (R2) and is written to the record.
	Trigger Trigger
	// Node and RunID identify the run; the lease value is Node:RunID.
	Node, RunID string
	// TTL is the lease time to live (>= 1ms when Lease is set).
	TTL time.Duration
	// Lease: take the lease (overlap skip, queue, replace; manual runs); a
	// held lease is an Overlap (or Queued). false for overlap allow.
	Lease bool
	// Queue (overlap queue and replace, with Lease): when the lease is held
	// and no slot is pending, this slot becomes the pending slot.
	Queue bool
	// IgnorePause claims even while the job is paused (`run -force`,
	// `backfill -force`, which also ignores the state_lost refusal).
	IgnorePause bool
	// MaxRuns (> 0) refuses the claim once runs (plus claims in flight)
	// reach it. 0 = no limit; manual runs send 0.
	MaxRuns int64
	// SeenSeq and SeenRuns are the highest state.seq and state.runs this
	// node has seen for the job (rule R5: the repair).
	SeenSeq, SeenRuns int64
	// Windows are the job's claim windows (rule R2).
	Windows Windows
	// Retention bounds the job's ledger (rule R9).
	Retention Retention
}

// Owner is the lease value of the request's run.
func (req ClaimRequest) Owner() string { return req.Node + ":" + req.RunID }

// Validate reports a malformed request; both backends call it first.
func (req ClaimRequest) Validate() error {
	switch {
	case req.Job == "":
		return errors.New("empty job name")
	case req.Slot < 0:
		return fmt.Errorf("negative slot %d", req.Slot)
	case req.MaxRuns < 0 || req.SeenSeq < 0 || req.SeenRuns < 0:
		return errors.New("negative max runs, seen seq or seen runs")
	case req.Node == "" || req.RunID == "":
		return errors.New("empty node or run id")
	case req.Lease && req.TTL < time.Millisecond:
		return fmt.Errorf("lease ttl %v below 1ms", req.TTL)
	case req.Queue && (!req.Lease || req.Slot == 0):
		return errors.New("queue needs a lease and a slot")
	case (req.Slot == 0) != (req.Trigger == TriggerManual):
		return errors.New("a manual run, and only a manual run, has no slot")
	case req.Trigger != TriggerSchedule && req.Trigger != TriggerCatchup && req.Trigger != TriggerBackfill && req.Trigger != TriggerManual:
		return fmt.Errorf("trigger %q cannot claim", req.Trigger)
	case req.Windows.Early < 0 || req.Windows.Answer < 0 || req.Windows.Catchup < 0:
		return errors.New("negative claim window")
	}
	return nil
}

// Validate reports a malformed request; both backends call it first.
func (req FinishRequest) Validate() error {
	switch {
	case req.Job == "":
		return errors.New("empty job name")
	case req.Record.RunID == "":
		return errors.New("a finish needs the record's run id")
	case req.Record.Slot == 0 && req.Record.Fence == 0 && !req.OwnRecordOnly:
		return errors.New("a manual run's finish needs its token")
	case req.Next != "" && req.Owner == "":
		return errors.New("a lease handed on needs a lease released")
	case req.Next != "" && req.Retry:
		return errors.New("a retried finish hands no lease on")
	case req.OwnRecordOnly && req.Next != "":
		return errors.New("a finish of a claim whose answer was lost hands no lease on")
	case req.Next != "" && req.TTL < time.Millisecond:
		return fmt.Errorf("lease ttl %v below 1ms", req.TTL)
	}
	return nil
}

// Claim is the answer to a ClaimRequest.
type Claim struct {
	Outcome Outcome
	// Token is the run's fencing token (Claimed only; rule R4).
	Token int64
	// Now is Redis time when the claim was decided (every outcome).
	Now time.Time
	// Seq and Runs are state.seq and state.runs as the claim left them:
	// what the node remembers and sends as SeenSeq/SeenRuns next time.
	Seq, Runs int64
	// Repaired says the claim found the ledger behind what this node had
	// seen (rule R5): Redis lost state; FoundSeq is what it found.
	Repaired bool
	FoundSeq int64
	// Status and Reason (ClaimedElsewhere) are what the slot's record says.
	Status, Reason string
	// Holder is the lease value that made the claim an Overlap or Queued.
	Holder string
	// Pending (Overlap with a Queue request) is the slot already pending.
	Pending int64
	// Takes (Claimed, a Queue request that found the lease free) is a
	// pending slot whose holder ended without handing the lease on: the
	// claim took the lease for it (its token is Token), the caller runs it,
	// and the requested slot is now the pending one. 0 = none.
	Takes int64
	// Expired is a pending slot the claim found expired (rule R7) and
	// recorded skipped expired; 0 = none.
	Expired int64
	// Replicas is how many replicas acknowledged a won claim (WAIT) when
	// the backend waits for replicas; 0 otherwise.
	Replicas int
}

// AuditRequest asks a backend to record the missed slots of one job
// (rule R8). Slots are Unix seconds, ascending.
type AuditRequest struct {
	Job string
	// From is state.audited_to as the node read it (Audited.From of an
	// audit with no Slots): the audit applies only if it still holds it.
	From int64
	// Slots are the job's due slots after From, oldest first; the backend
	// records those whose answer window plus Grace has passed in Redis time
	// and that have no record, and moves audited_to past the last it
	// decided. Empty: only read (and start a new ledger's audited_to).
	Slots []int64
	// Window is the job's answer window; Grace is added to it.
	Window, Grace time.Duration
	// Node and Reason go into each missed record.
	Node, Reason string
	// MaxRuns (> 0): once the job's runs reach it, a slot without a
	// record is recorded skipped max_runs, not missed (the job is done).
	MaxRuns int64
	// SeenSeq is the highest ledger seq this node has seen (R5).
	SeenSeq int64
	// LockTTL and Early (the job's lock_ttl, node.max_clock_skew): a claim
	// in flight older than LockTTL + Window + Grace whose lease its owner
	// no longer holds is declared unknown; slots within Early of a
	// detected loss are recorded state_lost, not missed.
	LockTTL, Early time.Duration
	// Retention bounds the job's ledger (rule R9).
	Retention Retention
}

// Audited answers an AuditRequest.
type Audited struct {
	// From is audited_to before the call (a new ledger starts it at Redis
	// time). Stale: it did not hold req.From, nothing was written.
	From  int64
	Stale bool
	// To is audited_to afterwards.
	To int64
	// Missed are the slots this call recorded missed.
	Missed []int64
	// Unknown are the occurrences this call declared unknown: claimed,
	// and no finish within their lease and answer window.
	Unknown []string
	// Seq and Runs are state.seq and state.runs afterwards (the node
	// remembers them, R5, R6); Repaired: the call detected a loss.
	Seq, Runs int64
	Repaired  bool
	// Now is Redis time.
	Now time.Time
}

// Occurrence is one record of the ledger, as `cronlock history` lists it.
type Occurrence struct {
	ID       string `json:"id"`          // the slot, or m<token> for a manual run
	Slot     int64  `json:"slot"`        // Unix seconds; 0 for a manual run
	Status   string `json:"status"`      // claimed, queued, ran, skipped, missed
	Reason   string `json:"reason"`      // skipped and missed: why
	Node     string `json:"node"`        // who claimed, ran or decided it
	Token    int64  `json:"token"`       // the fencing token (claimed, ran)
	Trigger  string `json:"trigger"`     // schedule, catchup, queued, backfill, manual
	RunID    string `json:"run_id"`      // the run's id (claimed, ran)
	Claimed  int64  `json:"claimed"`     // Redis time of the decision, Unix ms
	Started  int64  `json:"started"`     // Unix ms; 0 = not started
	Finished int64  `json:"finished"`    // Unix ms; 0 = not finished
	Result   string `json:"result"`      // ran: success, failure, timeout, …
	ExitCode int    `json:"exit_code"`   // ran: the leader's exit status
	Attempts int    `json:"attempts"`    // ran: attempts made
	Output   string `json:"output_tail"` // ran: the last bytes of the output
	Req      string `json:"requester"`   // manual: who asked
}

// ClaimRefusedError is the error of a Locker that refused a claim without
// sending it (the engine's Redis policy guard): nothing was written, so no
// lease can exist and the run hands no phantom to the janitor. Reason is
// the skip reason the slot gets (SkipRedisUnsafe, or SkipRedisError while
// the Redis configuration has not been read yet); Err says why. The run
// does not log it: whoever refuses logs the cause once.
type ClaimRefusedError struct {
	Reason string
	Err    error
}

func (e *ClaimRefusedError) Error() string {
	return "claim refused (" + e.Reason + "): " + e.Err.Error()
}
func (e *ClaimRefusedError) Unwrap() error { return e.Err }

// ErrNotHeld means the lease key holds another owner's value (it expired
// and another run took it). Renew returns it wrapped (a lease held by
// nobody is taken again: ErrRetaken); check it with errors.Is.
var ErrNotHeld = errors.New("ledger: lease not held")

// ErrRetaken is returned by Renew, wrapped and with the pending slot, when
// the lease was gone and held by nobody, so the renewal took it again for
// its owner: Redis lost it (a restart without persistence, eviction, a
// failover) while its run went on, and the run goes on holding it
// (docs/protocol.md, R3). The lease is held: not a failure.
var ErrRetaken = errors.New("ledger: lease taken again (redis had lost it)")

// Trigger says why a run started; it is data on the one run path, carried
// into the history record and the CRONLOCK_TRIGGER variable.
type Trigger string

const (
	TriggerSchedule Trigger = "schedule" // the slot came due
	TriggerCatchup  Trigger = "catchup"  // a missed slot within catchup_window
	TriggerManual   Trigger = "manual"   // `cronlock run JOB`
	// TriggerQueued: a pending slot (overlap queue or replace) that the
	// lease was handed to when the run before it ended.
	TriggerQueued Trigger = "queued"
	// TriggerBackfill: a past slot run by `cronlock backfill`.
	TriggerBackfill Trigger = "backfill"
)

// MaxOutputTail is the largest RunRecord.OutputTail stored, in bytes (the
// last 4 KiB of the output). Longer tails keep their last bytes.
const MaxOutputTail = 4 << 10

// RunRecord is the final record of a won claim: a finished run, or
// (Skip set) a claim that did not run.
type RunRecord struct {
	RunID      string
	Slot       int64 // Unix seconds UTC; 0 for a manual run
	Trigger    Trigger
	Requester  string // who asked for a manual run (user@host); "" otherwise
	Node       string
	Start, End time.Time // stored with nanosecond precision, returned in UTC
	Attempts   int
	Result     string // one of the Result* constants
	ExitCode   int
	Fence      int64
	OutputTail string // at most MaxOutputTail bytes (the end of the output)
	// Claimed is Redis time of the claim (Claim.Now); zero = unknown.
	Claimed time.Time
	// Skip, when set, is why the won claim did not run (lock_lost,
	// expired, not_replicated, shutting_down): the record is skipped.
	Skip string
}

// OccurrenceID is the ledger's key of an occurrence: its slot, or
// "m<token>" for a manual run.
func OccurrenceID(slot, token int64) string {
	if slot > 0 {
		return strconv.FormatInt(slot, 10)
	}
	return "m" + strconv.FormatInt(token, 10)
}

// Occurrence returns the ledger record of rec.
func (rec RunRecord) Occurrence() Occurrence {
	o := Occurrence{ID: OccurrenceID(rec.Slot, rec.Fence), Slot: rec.Slot, Status: "ran", Node: rec.Node,
		Token: rec.Fence, Trigger: string(rec.Trigger), RunID: rec.RunID, Claimed: msOrZero(rec.Claimed),
		Started: msOrZero(rec.Start), Finished: msOrZero(rec.End), Result: rec.Result, ExitCode: rec.ExitCode,
		Attempts: rec.Attempts, Output: rec.OutputTail, Req: rec.Requester}
	if rec.Skip != "" {
		o.Status, o.Reason, o.Result = "skipped", rec.Skip, ""
	}
	return o
}

// msOrZero is t in Unix milliseconds, 0 for the zero time.
func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// RunRecord is the run an occurrence records (status ran).
func (o Occurrence) RunRecord() RunRecord {
	return RunRecord{RunID: o.RunID, Slot: o.Slot, Trigger: Trigger(o.Trigger), Requester: o.Req, Node: o.Node,
		Start: msTime(o.Started), End: msTime(o.Finished), Attempts: o.Attempts, Result: o.Result, ExitCode: o.ExitCode,
		Fence: o.Token, OutputTail: o.Output, Claimed: msTime(o.Claimed)}
}

// msTime is Unix milliseconds as a UTC time, the zero time for 0.
func msTime(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// Resolved is rt with its zero fields set to the defaults.
func (rt Retention) Resolved() (age time.Duration, max int) {
	age, max = rt.Age, rt.Max
	if age <= 0 {
		age = DefaultRetentionAge
	}
	if max <= 0 {
		max = DefaultRetentionMax
	}
	return age, max
}

// TrimSlack is how many records over its max a claim lets a ledger hold
// before it trims (rule R9): a tenth of max, at most 9, so that one trim of
// at most 10 records brings it back to max. The claim script computes the
// same (redislock/scripts.go, claimScript's call of trim).
func (rt Retention) TrimSlack() int {
	_, maxN := rt.Resolved()
	return min(maxN/10, 9)
}

// SplitOwner splits a lease value node:run (ClaimRequest.Owner) at its
// last colon.
func SplitOwner(owner string) (node, run string) {
	for i := len(owner) - 1; i >= 0; i-- {
		if owner[i] == ':' {
			return owner[:i], owner[i+1:]
		}
	}
	return owner, ""
}

// RunsOf returns up to n runs of occ (oldest first), newest first.
func RunsOf(occ []Occurrence, n int) []RunRecord {
	var out []RunRecord
	for _, o := range slices.Backward(occ) {
		if o.Status == "ran" && len(out) < n {
			out = append(out, o.RunRecord())
		}
	}
	return out
}

// ErrRecordConflict: a finish found its occurrence's record written by
// another run (only after Redis lost state, docs/protocol.md R5): the
// record is kept, this run is not recorded.
var ErrRecordConflict = errors.New("ledger: the occurrence's record belongs to another run")
