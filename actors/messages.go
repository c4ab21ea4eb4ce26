package actors

import (
	"syscall"
	"time"

	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
)

// Skip reasons (docs/protocol.md, "Skip reasons").
const (
	SkipClaimedElsewhere = "claimed_elsewhere"
	SkipOverlap          = "overlap"
	SkipOverlapLocal     = "overlap_local"
	SkipPaused           = "paused"
	SkipRedisError       = "redis_error"
	SkipDisabled         = "disabled"
	SkipShuttingDown     = "shutting_down"
	// SkipRedisUnsafe: the Redis policy guard refuses claims on this Redis
	// (an evicting maxmemory-policy, a Cluster node used as a standalone
	// server); docs/protocol.md, "Redis policy guard".
	SkipRedisUnsafe = "redis_unsafe"
	// SkipClockSkew: Redis time was outside the slot's claim window when
	// this node's claim arrived (docs/protocol.md, rule R2): its clock is
	// wrong, or the claim came too late; nothing was recorded.
	SkipClockSkew = "clock_skew"
	// SkipOutsideClaimWindow: a catch-up or backfill claim outside its
	// window in Redis time (rule R2).
	SkipOutsideClaimWindow = "outside_claim_window"
	// SkipNoRecord: a backfill slot without a record, due before the
	// job's ledger began: it may have run (-force runs it).
	SkipNoRecord = "no_record"
	// SkipStateLost: the ledger may have lost the slot's record (rule R5).
	SkipStateLost = "state_lost"
	// SkipOutsideRetention: a backfill slot older than the ledger keeps.
	SkipOutsideRetention = "outside_retention"
	// SkipLockLost: a won claim whose lease or answer window ran out
	// before its process started (rule R3).
	SkipLockLost = "lock_lost"
	// SkipExpired: a pending slot (overlap queue or replace) that a later
	// slot overtook (rule R7).
	SkipExpired = "expired"
	// SkipNotReplicated: a won claim that fewer replicas than
	// redis.min_replicas_acked acknowledged in time: a failover could
	// forget it, so the slot is not run and the lease is released.
	SkipNotReplicated = "not_replicated"
	// SkipAlreadyRun: a backfill slot that an earlier backfill ran (it is
	// listed, not counted: `cronlock backfill` is no daemon).
	SkipAlreadyRun = "already_run"
	// SkipMaxRuns: the job has made its max_runs successful runs in the
	// cluster (counted in Redis): it is done.
	SkipMaxRuns = "max_runs"
)

// skipReasons lists every skip reason, in metric order; its length sizes
// the per-job counters.
var skipReasons = [...]string{SkipClaimedElsewhere, SkipOverlap, SkipOverlapLocal,
	SkipPaused, SkipRedisError, SkipDisabled, SkipShuttingDown, SkipRedisUnsafe, SkipNodeBusy, SkipMaxRuns, SkipNotReplicated,
	SkipClockSkew, SkipOutsideClaimWindow, SkipStateLost, SkipOutsideRetention, SkipLockLost, SkipExpired, SkipNoRecord}

// Run results; a hook sees them as CRONLOCK_RESULT.
const (
	ResultSuccess  = "success"
	ResultFailure  = "failure"
	ResultTimeout  = "timeout"
	ResultLockLost = "lock_lost"
	ResultError    = "error"
	// ResultReplaced: the run was terminated (SIGTERM, SIGKILL after
	// kill_grace) because a newer slot replaces it (overlap replace).
	ResultReplaced = "replaced"
)

// results lists every run result, in metric order; its length sizes the
// per-job counters.
var results = [...]string{ResultSuccess, ResultFailure, ResultTimeout, ResultLockLost, ResultError, ResultReplaced}

// jobMsg is the sealed set of messages a job actor accepts.
type jobMsg interface{ jobMsg() }

// Fire says a slot of a job is due. Slot is the nominal fire time,
// identified by its Unix second; jitter has already been waited.
type Fire struct {
	Job  string
	Slot time.Time
	At   time.Time // the fire time (slot + jitter); zero = Slot
	// Passed is how many older slots the ticker passed over before this
	// one (it woke late): this node has no word on them (Job.Undecided).
	Passed int
}

// Catchup asks a job actor to claim and run its latest missed slot if it
// lies within the job's catch-up window (trigger catchup).
type Catchup struct{}

// Reconfigure replaces a job's configuration for runs started after it.
type Reconfigure struct{ Job config.Job }

// RunNow asks for a manual run (trigger manual): it takes the lease but no
// slot, and goes through the same run path as a scheduled run (retries,
// hooks, history). A paused or disabled job is refused unless Force is set.
// Reply (1-buffered, required) receives exactly one Ran when the run has
// ended or was refused.
type RunNow struct {
	Force bool
	// Requester names who asked (user@host), for the history record; ""
	// when not known.
	Requester string
	Reply     chan<- Ran
	// Backfill, with Slot, runs that past slot (trigger backfill) instead
	// of a manual run; with Force it ignores pause and state_lost.
	Backfill bool
	Slot     time.Time
}

func (Fire) jobMsg()        {}
func (Catchup) jobMsg()     {}
func (Reconfigure) jobMsg() {}
func (RunNow) jobMsg()      {}

// Ran answers a RunNow: Skip is the reason it did not start ("" when it
// ran), Err the backend error behind SkipRedisError, Finished the final
// result when it ran.
type Ran struct {
	Skip     string
	Err      error
	Finished RunFinished
}

// LeaseLost reports that a run's lease is no longer held, or can no longer
// be trusted to be held. Grace is how long the run's processes may still
// live before the lease can expire on the server.
type LeaseLost struct {
	Err   error
	Grace time.Duration
}

// RunInfo identifies one run: the values of its CRONLOCK_* variables and
// of its history record.
type RunInfo struct {
	Job     string
	RunID   string
	Node    string
	Slot    time.Time // zero for a manual run
	Trigger Trigger
	Fence   int64
	// Requester is who asked for a manual run ("" otherwise).
	Requester string
}

// RunFinished is the final result of one run (after the last attempt),
// sent to the hook runner.
type RunFinished struct {
	RunInfo
	Cfg      config.Job // the configuration the run used (for its hooks)
	Attempts int
	Result   string         // one of the Result* constants
	ExitCode int            // -1 when killed by a signal or never started
	Signal   syscall.Signal // the signal that ended the last attempt, or 0
	Started  time.Time
	Finished time.Time
	Tail     []byte // last 64 KiB of output
}

// Record is the history entry of the finished run.
func (f RunFinished) Record() RunRecord {
	var slot int64
	if !f.Slot.IsZero() {
		slot = f.Slot.Unix()
	}
	return RunRecord{RunID: f.RunID, Slot: slot, Trigger: f.Trigger, Requester: f.Requester, Node: f.Node, Start: f.Started,
		End: f.Finished, Attempts: f.Attempts, Result: f.Result, ExitCode: f.ExitCode, Fence: f.Fence,
		OutputTail: string(lastBytes(f.Tail, MaxOutputTail))}
}

// unixOrZero is a slot's Unix second, 0 for the zero time (a manual run).
func unixOrZero(slot time.Time) int64 {
	if slot.IsZero() {
		return 0
	}
	return slot.Unix()
}

// slotField logs a slot as its Unix second (slots are never identified by
// wall-clock text); 0 for a manual run.
func slotField(slot time.Time) zap.Field { return zap.Int64("slot", unixOrZero(slot)) }
