package actors

import (
	"context"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
)

// Locker is the coordination backend the actors use (SPEC.md §4). Every
// method makes one round trip, blocks until it answers or ctx ends, and
// owns no goroutines. Implemented by *redislock.Redis and *redislock.Memory.
type Locker interface {
	Claim(ctx context.Context, req redislock.ClaimRequest) (redislock.Claim, error)
	Renew(ctx context.Context, job, owner string, ttl time.Duration) error
	Release(ctx context.Context, job, owner string) (bool, error)
	// Finish releases the lease (if owner, non-empty, holds it) and appends
	// the run's history record, in one round trip.
	Finish(ctx context.Context, job, owner string, rec redislock.RunRecord) (bool, error)
}

var (
	_ Locker = (*redislock.Redis)(nil)
	_ Locker = (*redislock.Memory)(nil)
)

// Skip reasons (SPEC.md §6).
const (
	SkipClaimedElsewhere = "claimed_elsewhere"
	SkipOverlap          = "overlap"
	SkipOverlapLocal     = "overlap_local"
	SkipPaused           = "paused"
	SkipRedisError       = "redis_error"
	SkipDisabled         = "disabled"
	SkipShuttingDown     = "shutting_down"
)

// SkipReasons lists every skip reason, for metric pre-registration.
var SkipReasons = []string{SkipClaimedElsewhere, SkipOverlap, SkipOverlapLocal,
	SkipPaused, SkipRedisError, SkipDisabled, SkipShuttingDown}

// Run results (SPEC.md §7).
const (
	ResultSuccess  = "success"
	ResultFailure  = "failure"
	ResultTimeout  = "timeout"
	ResultLockLost = "lock_lost"
	ResultError    = "error"
)

// Results lists every run result, for metric pre-registration.
var Results = []string{ResultSuccess, ResultFailure, ResultTimeout, ResultLockLost, ResultError}

// jobMsg is the sealed set of messages a job actor accepts.
type jobMsg interface{ jobMsg() }

// Fire says a slot of a job is due. Slot is the nominal fire time (SPEC.md
// §1), identified by its Unix second; jitter has already been waited.
type Fire struct {
	Job  string
	Slot time.Time
}

// Catchup asks a job actor to claim and run its latest missed slot if it
// lies within the job's catch-up window (SPEC.md §4).
type Catchup struct{}

// Reconfigure replaces a job's configuration for runs started after it.
type Reconfigure struct{ Job config.Job }

// RunNow asks for a manual run: it takes the lease but no slot (SPEC.md §4).
type RunNow struct{}

func (Fire) jobMsg()        {}
func (Catchup) jobMsg()     {}
func (Reconfigure) jobMsg() {}
func (RunNow) jobMsg()      {}

// LeaseLost reports that a run's lease is no longer held, or can no longer
// be trusted to be held (SPEC.md §4). Grace is how long the run's processes
// may still live before the lease can expire on the server.
type LeaseLost struct {
	Err   error
	Grace time.Duration
}

// RunFinished is the final result of one run (after the last attempt),
// sent to the hook runner.
type RunFinished struct {
	Job      config.Job
	RunID    string
	Node     string
	Slot     time.Time // zero for a manual run
	Fence    int64
	Attempts int
	Result   string // one of the Result* constants
	ExitCode int    // -1 when killed by a signal or never started
	Started  time.Time
	Finished time.Time
	Tail     []byte // last 64 KiB of output
}

// slotField logs a slot as its Unix second (SPEC.md §1: slots are never
// identified by wall-clock text); 0 for a manual run.
func slotField(slot time.Time) zap.Field {
	if slot.IsZero() {
		return zap.Int64("slot", 0)
	}
	return zap.Int64("slot", slot.Unix())
}
