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
	// Renew extends a lease owner still holds to ttl (compare-and-PEXPIRE);
	// an error wrapping ErrNotHeld says it is no longer held.
	Renew(ctx context.Context, job, owner string, ttl time.Duration) error
	// Release deletes a lease owner still holds (compare-and-DEL) and says
	// whether it did.
	Release(ctx context.Context, job, owner string) (bool, error)
	// Finish releases the lease (if owner, non-empty, holds it) and appends
	// the run's history record, in one round trip.
	Finish(ctx context.Context, job, owner string, rec RunRecord) (bool, error)
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
	// NotReplicated: the claim won (state.slot recorded, fence
	// incremented, lease taken) but fewer replicas than
	// redis.min_replicas_acked acknowledged it within
	// redis.replica_ack_timeout (WAIT): a failover could forget it and let
	// another node claim the slot again, so it is not run, and the caller
	// releases the lease. Claim.Fence and Claim.Replicas are set. Never
	// returned by the claim script itself, only by a backend that waits
	// for replicas.
	NotReplicated
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
}

// Validate reports a malformed request; both backends call it first.
func (req ClaimRequest) Validate() error {
	switch {
	case req.Job == "":
		return errors.New("empty job name")
	case req.Slot < 0:
		return fmt.Errorf("negative slot %d", req.Slot)
	case req.MinSlot < 0 || req.MinFence < 0:
		return fmt.Errorf("negative minimum slot %d or fence %d", req.MinSlot, req.MinFence)
	case req.Lease && req.Owner == "":
		return errors.New("empty lease owner")
	case req.Lease && req.TTL < time.Millisecond:
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
	// Overlap; "" otherwise.
	Holder string
	// Replicas is how many replicas acknowledged a won claim (WAIT's
	// answer) when the backend waits for replicas; 0 otherwise.
	Replicas int
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
)

// MaxOutputTail is the largest RunRecord.OutputTail stored, in bytes (the
// last 4 KiB of the output). Longer tails keep their last bytes.
const MaxOutputTail = 4 << 10

// RunRecord is one history entry of a finished run.
type RunRecord struct {
	RunID      string
	Slot       int64 // Unix seconds UTC; 0 for a manual run
	Trigger    Trigger
	Node       string
	Start, End time.Time // stored with nanosecond precision, returned in UTC
	Attempts   int
	Result     string // one of the Result* constants
	ExitCode   int
	Fence      int64
	OutputTail string // at most MaxOutputTail bytes (the end of the output)
}
