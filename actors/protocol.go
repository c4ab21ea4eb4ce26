package actors

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file holds the types of the exactly-once protocol (docs/protocol.md)
// on the consumer side: the actors declare what they need from a
// coordination backend (Locker) and the values it exchanges, and the
// adapters in redislock implement it. The adapter depends on the domain,
// never the reverse.

// Locker is the coordination backend the actors use (docs/protocol.md).
// Every method makes one round trip, blocks until it answers or ctx ends,
// and owns no goroutines. Implemented by *redislock.Redis and
// *redislock.Memory.
type Locker interface {
	// Claim runs the claim step for one slot (or a manual run) atomically.
	Claim(ctx context.Context, req ClaimRequest) (Claim, error)
	// Renew extends a lease owner still holds to ttl (compare-and-PEXPIRE)
	// and returns the job's pending slot (overlap queue and replace; 0 =
	// none); an error wrapping ErrNotHeld says it is no longer held.
	Renew(ctx context.Context, job, owner string, ttl time.Duration) (pending int64, err error)
	// Release deletes a lease owner still holds (compare-and-DEL) and says
	// whether it did.
	Release(ctx context.Context, job, owner string) (bool, error)
	// Finish releases the lease (if req.Owner, non-empty, holds it),
	// appends the run's history record and, when req.Next is set, hands
	// the lease to the job's pending slot, in one round trip.
	Finish(ctx context.Context, req FinishRequest) (Finished, error)
}

// Unhander is implemented by lockers that can take back the lease a
// Finish handed to a pending slot when the finish's answer was lost and
// nobody runs that slot (redislock's Unhand): the janitor then puts the
// slot back as pending instead of losing it. held says the lease was
// owner's (it is released); slot is the slot put back, 0 = none.
type Unhander interface {
	Unhand(ctx context.Context, job, owner string) (slot int64, held bool, err error)
}

// FinishRequest ends a run (Locker.Finish).
type FinishRequest struct {
	// Job is the job name (non-empty).
	Job string
	// Owner is the run's lease value; "" = the run held no lease
	// (overlap: allow).
	Owner string
	// Record is the run's history record.
	Record RunRecord
	// Next, with overlap queue or replace, is the lease value of the run
	// that takes the job's pending slot (docs/protocol.md, "Queue and
	// replace"): when the lease was released and a slot is pending, the
	// lease is set to Next for TTL, the pending slot is cleared and a fence
	// is handed out, atomically. "" while this node stops: a pending slot
	// then stays pending (Finished.Left), for another node's next claim.
	Next string
	// TTL is the lease time to live for Next (whole milliseconds, >= 1ms
	// when Next is set).
	TTL time.Duration
	// MaxRuns (> 0): a pending slot is not handed on once state.runs, with
	// this run counted, has reached it (it is dropped: Pending with Fence
	// 0). A Record with result success increments state.runs in any case.
	MaxRuns int64
	// Retry: this request failed before (its answer was lost, so it may
	// have been applied) and is sent again by the janitor: Record is
	// appended, and state.runs and the last_ fields updated, only if the
	// job's history does not hold a record with its RunID already. Next
	// must be "".
	Retry bool
}

// Finished answers a FinishRequest.
type Finished struct {
	// Released says the run's lease was deleted (it was still Owner's).
	Released bool
	// Pending is the job's pending slot (Unix seconds) that the finish took
	// off the queue, 0 = none. With Fence > 0 it is claimed: Next holds the
	// lease and Fence is its fencing token. With Fence 0 it was not handed
	// on: Left says it stays pending for the next claim (Next was ""),
	// otherwise MaxRuns was reached and it was dropped.
	Pending, Fence int64
	// Left: the pending slot stays pending (see Pending).
	Left bool
	// Runs is state.runs afterwards: the job's successful runs.
	Runs int64
	// StateSlot and StateFence are state.slot and state.fence afterwards
	// (what the node remembers, as for Claim).
	StateSlot, StateFence int64
	// NotReplicated (with Fence > 0): the lease was handed to Next, but
	// fewer replicas than redis.min_replicas_acked acknowledged it (WAIT):
	// like a won claim that was not replicated, the pending slot is not
	// run and Next's lease is to be released (skip not_replicated).
	// Replicas is WAIT's answer (0 when no WAIT was sent).
	NotReplicated bool
	Replicas      int
	// Unsure (a Retry): the job's capped history no longer reaches back
	// to the run's end, so whether an earlier attempt appended the record
	// cannot be told; nothing was appended or counted (the lease was
	// released as for any finish).
	Unsure bool
}

// Outcome is the result of a Claim (docs/protocol.md, "claim").
type Outcome int

const (
	// Claimed: this node may run the slot; Claim.Fence holds the new
	// fencing token.
	Claimed Outcome = iota
	// ClaimedElsewhere: state.slot >= slot, another node claimed or
	// skipped this slot (or a later one).
	ClaimedElsewhere
	// Paused: the job is paused cluster-wide; the slot was recorded.
	Paused
	// Overlap: the lease is held (overlap "skip", or a manual run); the
	// slot was recorded.
	Overlap
	// NoRecord: a catch-up claim (ClaimRequest.NeedRecord) found no
	// claimed-slot record for the job, even after the state repair: a new
	// job, or Redis lost its state and no node remembers it. The slot may
	// already have run, so it is not run (at most once); nothing is
	// recorded.
	NoRecord
	// Queued: overlap queue or replace, the lease is held and no slot was
	// pending: the slot is recorded as the job's pending slot and runs when
	// the holder's run ends (the holder's Finish hands it the lease). With
	// replace the holder is asked to terminate its run.
	Queued
	// AlreadyRun: a backfill claim (ClaimRequest.Backfill) of a slot that
	// an earlier backfill claimed; nothing is written.
	AlreadyRun
	// MaxRunsReached: the job has made ClaimRequest.MaxRuns successful
	// runs in the cluster (state.runs); the slot was recorded (a backfill
	// slot is not).
	MaxRunsReached
	// NotReplicated: the claim won (state.slot recorded, fence
	// incremented, lease taken) but fewer replicas than
	// redis.min_replicas_acked acknowledged it within
	// redis.replica_ack_timeout (WAIT): a failover could forget it and let
	// another node claim the slot again, so it is not run, and the caller
	// releases the lease. Claim.Fence and Claim.Replicas are set. Never
	// returned by the claim script itself (so it comes after the script's
	// outcome numbers), only by a backend that waits
	// for replicas.
	NotReplicated
	// NotYet: an early claim (ClaimRequest.Early) that would not have won
	// (the job is paused, its lease is held, max_runs is reached): nothing
	// was recorded, and the claim is to be sent again at the fire time,
	// which decides the skip. (After NotReplicated: outcome numbers are
	// the script's.)
	NotYet
)

// String returns the skip-reason spelling: "claimed", "claimed_elsewhere",
// "paused", "overlap".
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
	case NoRecord:
		return SkipNoRecord
	case NotReplicated:
		return SkipNotReplicated
	case Queued:
		return "queued"
	case AlreadyRun:
		return SkipAlreadyRun
	case MaxRunsReached:
		return SkipMaxRuns
	case NotYet:
		return "not_yet"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// ClaimRequest asks for the right to run one slot of one job.
type ClaimRequest struct {
	// Job is the job name (non-empty).
	Job string
	// Slot is the fire time in Unix seconds UTC. 0 is a manual run: no slot
	// check and no slot recorded.
	Slot int64
	// Owner is the lease value "nodeID:uuid"; required when Lease is set.
	Owner string
	// TTL is the lease time to live, sent as whole milliseconds (PX); at
	// least 1ms when Lease is set.
	TTL time.Duration
	// Lease is true for overlap "skip" and for manual runs (the lease is
	// taken with SET NX PX and a held lease is an Overlap) and false for
	// overlap "allow" (no lease; each slot is still claimed once).
	Lease bool
	// IgnorePause claims even while the job is paused; only a forced manual
	// run sets it (`cronlock run -force`).
	IgnorePause bool
	// MinSlot and MinFence are the highest slot (Unix seconds) and fencing
	// token this node has seen for the job (0 = none). Before it decides,
	// the claim raises state.slot and state.fence to at least these values,
	// so that a state Redis lost (restart without persistence, eviction,
	// failover) never lets a slot run again or a fence go back while one
	// node that saw it stays up (docs/protocol.md, "State repair").
	MinSlot, MinFence int64
	// NeedRecord (catch-up claims) refuses the claim with NoRecord when the
	// job has no claimed-slot record: a catch-up must be able to tell that
	// the slot did not run (docs/protocol.md, "Catch-up").
	NeedRecord bool
	// Queue (overlap queue and replace, with Lease): when the lease is held
	// and no slot is pending, record this slot as the pending slot
	// (Queued) instead of skipping it; when one is pending, skip it
	// (Overlap).
	Queue bool
	// Backfill (`cronlock backfill`) claims a past slot out of order: the
	// slot check against state.slot (step 1) is not made and state.slot is
	// not changed; instead the slot is recorded in the job's set of
	// backfilled slots, and a slot already in it is AlreadyRun. Pause and
	// lease apply as for any claim, and a refused claim records nothing.
	Backfill bool
	// MaxRuns (> 0) refuses the claim with MaxRunsReached once state.runs,
	// the job's successful runs counted by Finish, has reached it (job
	// field max_runs). 0 = no limit; manual runs send 0.
	MaxRuns int64
	// AnswerBy (optional, after ctx's deadline) is how long a claim that
	// was sent before ctx's deadline is still waited for. Until Redis
	// answers, such a claim's outcome is unknown: Redis may have applied
	// it (an overloaded node or server answers late, e.g. at a herd), and
	// then no other node runs the slot. An answer by AnswerBy is returned
	// as any other; a claim not yet sent at ctx's deadline fails then.
	// Zero: ctx's deadline bounds the wait. Backends that answer at once
	// (memory) ignore it.
	AnswerBy time.Time
	// Early: the claim is sent before the slot's fire time (Fire.Due, at
	// most actors.ClaimLead before it), so that its answer is in by then.
	// It decides only what cannot change before the fire time: a won
	// claim (state.slot recorded, fence, lease) or ClaimedElsewhere. Where
	// it would skip the slot (paused, overlap, queued, max_runs reached)
	// it records nothing and answers NotYet: the claim is sent again at
	// the fire time (without Early), as without a lead. The state repair
	// is applied in any case. Not with Backfill or NeedRecord.
	Early bool
}

// Validate reports a malformed request; both backends call it first.
func (req ClaimRequest) Validate() error {
	switch {
	case req.Job == "":
		return errors.New("empty job name")
	case req.Slot < 0:
		return fmt.Errorf("negative slot %d", req.Slot)
	case req.MaxRuns < 0:
		return fmt.Errorf("negative max runs %d", req.MaxRuns)
	case req.MinSlot < 0 || req.MinFence < 0:
		return fmt.Errorf("negative minimum slot %d or fence %d", req.MinSlot, req.MinFence)
	case req.Lease && req.Owner == "":
		return errors.New("empty lease owner")
	case req.Lease && req.TTL < time.Millisecond:
		return fmt.Errorf("lease ttl %v below 1ms", req.TTL)
	case req.Early && (req.Slot == 0 || req.Backfill || req.NeedRecord):
		return errors.New("an early claim is a scheduled slot's")
	case req.Queue && (!req.Lease || req.Slot == 0):
		return errors.New("queue needs a lease and a slot")
	case req.Backfill && (req.Slot == 0 || req.Queue || req.NeedRecord):
		return errors.New("backfill needs a slot, and neither queue nor a record")
	}
	return nil
}

// Validate reports a malformed request; both backends call it first.
func (req FinishRequest) Validate() error {
	switch {
	case req.Job == "":
		return errors.New("empty job name")
	case req.Next != "" && req.Owner == "":
		return errors.New("a lease handed on needs a lease released")
	case req.Next != "" && req.Retry:
		return errors.New("a retried finish hands no lease on")
	case req.Retry && req.Record.RunID == "":
		return errors.New("a retried finish needs the record's run id")
	case req.Next != "" && req.TTL < time.Millisecond:
		return fmt.Errorf("lease ttl %v below 1ms", req.TTL)
	}
	return nil
}

// Claim is the answer to a ClaimRequest. Fence is set only when Outcome is
// Claimed: the job's fencing token, strictly increasing per job.
type Claim struct {
	Outcome Outcome
	Fence   int64
	// StateSlot and StateFence are state.slot and state.fence as the claim
	// left them (for every outcome): what the node remembers and passes as
	// MinSlot/MinFence next time.
	StateSlot, StateFence int64
	// Repaired says the claim had to raise state.slot or state.fence to the
	// request's MinSlot/MinFence: Redis lost the job's state. FoundSlot and
	// FoundFence are the values it found (0 = absent).
	Repaired              bool
	FoundSlot, FoundFence int64
	// Holder is the lease value ("nodeID:runID") that made the claim an
	// Overlap or Queued; "" otherwise.
	Holder string
	// Replicas is how many replicas acknowledged a won claim (WAIT's
	// answer) when the backend waits for replicas; 0 otherwise.
	Replicas int
	// Pending (Overlap with a Queue request) is the slot already pending
	// that this one could not displace (Unix seconds), 0 otherwise.
	Pending int64
	// Takes (Claimed, a Queue request that found the lease free) is a
	// pending slot whose holder ended without handing the lease on (its
	// node stopped or crashed): the claim took the lease for that slot,
	// which the caller runs, and the requested slot is now the pending one.
	// 0 = none.
	Takes int64
	// LastRun is how long the job's last recorded run took, from its exec
	// to the leader's exit (the record's End − Start, over all its
	// attempts), as the claim found it (for every outcome); 0 when no run
	// is recorded. Every node that claims a slot reads the same record,
	// so the claim order's short jobs (nodeload.Load.RunTook) agree.
	LastRun time.Duration
}

// MissedCheck asks a backend to report, once in the cluster, the slots of
// a job that came due and that no node claimed (docs/protocol.md, "Missed
// slots"). Slots are Unix seconds.
type MissedCheck struct {
	Job string
	// Seen is the highest slot this node has seen for the job (0 = none).
	Seen int64
	// Certain is the latest slot whose fire time lies at least the claim
	// timeout in the past: a live node's claim of it has been answered.
	// Latest is the latest slot whose fire time has passed (>= Certain).
	Certain, Latest int64
}

// MissedReport answers a MissedCheck. Reported is true when this call is
// the one that reports the job's missed slots: the last slot decided in the
// cluster (state.slot, an earlier report, or Seen) was older than Certain.
// The missed slots are then those after After up to the check's Latest.
type MissedReport struct {
	Reported bool
	After    int64
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

// ErrNotHeld means the lease key does not hold the caller's owner value (it
// expired or another node took it). Renew returns it wrapped; check it with
// errors.Is.
var ErrNotHeld = errors.New("actors: lease not held")

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

// RunRecord is one history entry of a finished run.
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
}
