package ledger

import (
	"context"
	"time"
)

// HookResult is the outcome of one on_success or on_failure hook of a
// finished run, kept beside the run's output for the dashboard's run page
// (HookStore).
type HookResult struct {
	Hook string `json:"hook"` // "on_success" or "on_failure"
	// Result is "success", or why the hook failed or did not run: "exit"
	// (non-zero exit), "timeout" (hook_timeout), "start" (it could not
	// start), "shutdown" (shutdown_timeout or a second signal ended it, or
	// it never started), "dropped" (the job's hook queue was full).
	Result   string    `json:"result"`
	ExitCode int       `json:"exit_code"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	// Output is the end of the hook's output (at most MaxOutputTail
	// bytes), redacted as the run's output is.
	Output string `json:"output,omitempty"`
}

// MaxHookResults bounds the hook results kept per occurrence: a run has
// one hook, and a retried write can add another.
const MaxHookResults = 4

// HookStore keeps the hook results of an occurrence (occ: its ledger id,
// OccurrenceID) as long as the ledger keeps records (keep: its age, and
// among the job's newest keep.Max occurrences with kept output or hook
// results, as OutputStore.StoreOutput). One round trip (Redis; a second
// when older occurrences are deleted) or one mutex-guarded access
// (memory) per call.
type HookStore interface {
	StoreHookResult(ctx context.Context, job, occ string, r HookResult, keep Retention) error
	// HookResults returns the kept results of job's occurrence occ,
	// oldest first; none when no hook ran or they passed their retention.
	HookResults(ctx context.Context, job, occ string) ([]HookResult, error)
}
