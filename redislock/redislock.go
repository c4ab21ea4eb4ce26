// Package redislock is the claim and lease adapter of the exactly-once
// protocol (SPEC.md §4): Redis (through rueidis) for clusters, and Memory for
// a single node.
//
// Both backends are synchronous: each call is one Redis round trip (or one
// mutex-guarded map access) and neither owns goroutines or timers (STYLE.md
// rule 10). Renewing the lease every TTL/3 is the lease actor's job.
//
// Keys, with P the key prefix (default "cronlock:") and J the job name:
//
//	P+"job:"+J      string, PX ttl   the lease; value "nodeID:uuid" of the holder
//	P+"state:"+J    hash             slot, fence, last_* facts of the last run
//	P+"history:"+J  stream, capped   run records (SPEC.md §8)
//	P+"paused:"+J   string           present ⇒ job paused cluster-wide
package redislock

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// DefaultKeyPrefix is the key prefix when Options.KeyPrefix is empty.
const DefaultKeyPrefix = "cronlock:"

// MaxOutputTail is the largest RunRecord.OutputTail stored, in bytes
// (SPEC.md §8: the output tail in history is 4 KiB). Longer tails keep
// their last bytes.
const MaxOutputTail = 4 << 10

// Outcome is the result of a Claim (SPEC.md §4 steps 1–4).
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
	// Overlap: overlap "skip" and the lease is held; the slot was recorded.
	Overlap
)

// String returns the skip-reason spelling of SPEC.md §6: "claimed",
// "claimed_elsewhere", "paused", "overlap".
func (o Outcome) String() string {
	switch o {
	case Claimed:
		return "claimed"
	case ClaimedElsewhere:
		return "claimed_elsewhere"
	case Paused:
		return "paused"
	case Overlap:
		return "overlap"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// ClaimRequest asks for the right to run one slot of one job.
type ClaimRequest struct {
	// Job is the job name (non-empty).
	Job string
	// Slot is the fire time in Unix seconds UTC. 0 is a manual run
	// (`cronlock run JOB`): no slot check, no slot recorded, and the pause
	// flag is ignored (an operator asked for this run explicitly).
	Slot int64
	// Owner is the lease value "nodeID:uuid"; required when Lease is set.
	Owner string
	// TTL is the lease time to live, sent as whole milliseconds (PX); at
	// least 1ms when Lease is set.
	TTL time.Duration
	// Lease is true for overlap "skip" (step 3 plus SET NX PX) and false for
	// overlap "allow" (no lease, no step 3; each slot is still claimed once).
	Lease bool
}

// Claim is the answer to a ClaimRequest. Fence is set only when Outcome is
// Claimed: the job's fencing token, strictly increasing per job.
type Claim struct {
	Outcome Outcome
	Fence   int64
}

// ErrNotHeld means the lease key does not hold the caller's owner value (it
// expired or another node took it). Renew returns it wrapped; check it with
// errors.Is.
var ErrNotHeld = errors.New("redislock: lease not held")

// RunRecord is one history entry (SPEC.md §8).
type RunRecord struct {
	RunID      string
	Slot       int64 // Unix seconds UTC; 0 for a manual run
	Node       string
	Start, End time.Time // stored with nanosecond precision, returned in UTC
	Attempts   int
	Result     string // success|failure|timeout|lock_lost|error (SPEC.md §7)
	ExitCode   int
	Fence      int64
	OutputTail string // at most MaxOutputTail bytes (the end of the output)
}

// JobState is what `cronlock status` shows for one job.
type JobState struct {
	Slot        int64 // last claimed or skipped slot, 0 if none
	Fence       int64 // last fencing token handed out, 0 if none
	Paused      bool
	LeaseHolder string        // "" when no lease is held
	LeaseTTL    time.Duration // remaining lease time, 0 when not held
	// Last is the last recorded run, nil if the job never ran. Its
	// OutputTail is empty: read it with History.
	Last *RunRecord
}

// validateClaim checks a request the same way for both backends.
func validateClaim(req ClaimRequest) error {
	switch {
	case req.Job == "":
		return errors.New("empty job name")
	case req.Slot < 0:
		return fmt.Errorf("negative slot %d", req.Slot)
	case req.Lease && req.Owner == "":
		return errors.New("empty lease owner")
	case req.Lease && req.TTL < time.Millisecond:
		return fmt.Errorf("lease ttl %v below 1ms", req.TTL)
	}
	return nil
}

// validateLease checks Renew and Release arguments (ttl < 0 means "unused").
func validateLease(job, owner string, ttl time.Duration) error {
	switch {
	case job == "":
		return errors.New("empty job name")
	case owner == "":
		return errors.New("empty lease owner")
	case ttl >= 0 && ttl < time.Millisecond:
		return fmt.Errorf("lease ttl %v below 1ms", ttl)
	}
	return nil
}

// tail returns the last MaxOutputTail bytes of s, starting at a rune
// boundary.
func tail(s string) string {
	if len(s) <= MaxOutputTail {
		return s
	}
	s = s[len(s)-MaxOutputTail:]
	for i := 0; i < utf8.UTFMax && i < len(s); i++ {
		if utf8.RuneStart(s[i]) {
			return s[i:]
		}
	}
	return s
}
