package ledger

import (
	"context"
	"errors"
	"time"
)

// Alert transitions (docs/coordination.md, "Alerts exactly once"): what
// OutcomeRecorder.RecordOutcome returns; "" = no transition.
const (
	TransitionFailing   = "failing"
	TransitionRecovered = "recovered"
)

// NotifyStateTTL is how long a job's last recorded outcome is kept after
// its last write: a job that has not finished a slot for that long starts
// again as a job with no previous result.
const NotifyStateTTL = 30 * 24 * time.Hour

// ErrOutcome is a RecordOutcome argument that cannot be recorded.
var ErrOutcome = errors.New("outcome needs a job, a slot > 0 and a run id")

// OutcomeRecorder records the outcome of one finished occurrence of a job
// and returns the alert transition it makes, exactly once in the cluster:
// TransitionFailing, TransitionRecovered or "". Only the node that ran
// the occurrence calls it, once per occurrence; both backends implement
// the rule of Transition atomically.
type OutcomeRecorder interface {
	RecordOutcome(ctx context.Context, job string, slot int64, runID string, ok bool) (string, error)
}

// LastOutcome is the newest recorded outcome of a job.
type LastOutcome struct {
	Slot int64
	Run  string
	OK   bool
}

// Transition is the rule of RecordOutcome: the transition that the
// outcome (slot, run, ok) makes after last (set: one is recorded), and
// whether the outcome is recorded. Invariant: each transition is returned
// once, because an outcome is recorded only when its slot is newer than
// the recorded one (a retried call, same run, and an older or same-slot
// outcome arriving out of order change nothing); failing is a failure
// after a success or as the job's first outcome (a new job that fails
// alerts), recovered a success after a failure. The Redis backend's
// outcome script keeps the same rule.
func Transition(last LastOutcome, set bool, slot int64, run string, ok bool) (event string, record bool) {
	switch {
	case set && last.Run == run, set && last.Slot >= slot:
		return "", false
	case !ok && (!set || last.OK):
		return TransitionFailing, true
	case ok && set && !last.OK:
		return TransitionRecovered, true
	}
	return "", true
}
