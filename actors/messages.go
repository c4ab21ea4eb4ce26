package actors

import (
	"syscall"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
)

// skipReasons lists every skip reason, in metric order; its length sizes
// the per-job counters.
var skipReasons = [...]string{ledger.SkipClaimedElsewhere, ledger.SkipOverlap, ledger.SkipOverlapLocal,
	ledger.SkipPaused, ledger.SkipRedisError, ledger.SkipDisabled, ledger.SkipShuttingDown, ledger.SkipRedisUnsafe, SkipNodeBusy, ledger.SkipMaxRuns, ledger.SkipNotReplicated,
	ledger.SkipClockSkew, ledger.SkipClaimLate, ledger.SkipOutsideClaimWindow, ledger.SkipStateLost, ledger.SkipOutsideRetention, ledger.SkipLockLost, ledger.SkipExpired, ledger.SkipNoRecord}

// results lists every run result, in metric order; its length sizes the
// per-job counters.
var results = [...]string{ledger.ResultSuccess, ledger.ResultFailure, ledger.ResultTimeout, ledger.ResultLockLost, ledger.ResultError, ledger.ResultReplaced}

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
	Trigger ledger.Trigger
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
func (f RunFinished) Record() ledger.RunRecord {
	var slot int64
	if !f.Slot.IsZero() {
		slot = f.Slot.Unix()
	}
	return ledger.RunRecord{RunID: f.RunID, Slot: slot, Trigger: f.Trigger, Requester: f.Requester, Node: f.Node, Start: f.Started,
		End: f.Finished, Attempts: f.Attempts, Result: f.Result, ExitCode: f.ExitCode, Fence: f.Fence,
		OutputTail: string(lastBytes(f.Tail, ledger.MaxOutputTail))}
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
