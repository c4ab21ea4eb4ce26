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
	// SkipNoRecord: a catch-up slot not run because Redis holds no record
	// of the job's last claimed slot (a new job, or Redis lost its state
	// and no live node remembers it): the slot may already have run.
	SkipNoRecord = "no_record"
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
	SkipPaused, SkipRedisError, SkipDisabled, SkipShuttingDown, SkipRedisUnsafe, SkipNoRecord, SkipNodeBusy, SkipMaxRuns, SkipNotReplicated}

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
//
// With a claim lead (Ticker.SetClaimLead) a fire comes up to the lead
// before its fire time At (slot + jitter): Due is then closed by the
// ticker at At, and the slot's process does not start before (its claim
// may be sent early, ClaimRequest.Early). Due nil: the fire time has come.
type Fire struct {
	Job  string
	Slot time.Time
	At   time.Time       // the fire time (slot + jitter); zero = Slot
	Due  <-chan struct{} // closed at At; nil when At has passed
}

// Catchup asks a job actor to claim and run its latest missed slot if it
// lies within the job's catch-up window (trigger catchup). Missed, when
// set, is this node's report of slots no node claimed: the actor logs one
// warning and counts them first (docs/protocol.md, "Missed slots").
type Catchup struct{ Missed *MissedSlots }

// MissedSlots are the slots of a job after After up to and including Last
// (Unix seconds) that came due and that no node claimed.
type MissedSlots struct{ After, Last int64 }

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
	// Backfill, with Slot, runs that past slot (trigger backfill,
	// ClaimRequest.Backfill) instead of a manual run.
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
