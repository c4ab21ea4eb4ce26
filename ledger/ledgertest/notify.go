package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// notifySteps is one job's sequence of finished occurrences and the
// transition each must return, on every backend.
var notifySteps = []struct {
	name string
	slot int64
	run  string
	ok   bool
	want string
}{
	{"first outcome a failure: failing", 10, "r10", false, ledger.TransitionFailing},
	{"retried call: nothing", 10, "r10", false, ""},
	{"failure after failure: nothing", 20, "r20", false, ""},
	{"older success, reordered: ignored", 15, "r15", true, ""},
	{"same slot, other run: ignored", 20, "r20b", true, ""},
	{"success after failure: recovered", 30, "r30", true, ledger.TransitionRecovered},
	{"retried success: nothing", 30, "r30", true, ""},
	{"success after success: nothing", 40, "r40", true, ""},
	{"failure after success: failing", 50, "r50", false, ledger.TransitionFailing},
	{"older failure after it: ignored", 45, "r45", false, ""},
}

// OutcomeTransitions checks b's RecordOutcome against the rule of
// ledger.Transition (job "j" and "k" must have no recorded outcome).
func OutcomeTransitions(t *testing.T, b ledger.OutcomeRecorder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range notifySteps {
		got, err := b.RecordOutcome(ctx, "j", s.slot, s.run, s.ok)
		if err != nil || got != s.want {
			t.Errorf("%s: got %q, %v, want %q", s.name, got, err, s.want)
		}
	}
	// Another job has its own record: a first success is no transition.
	if got, err := b.RecordOutcome(ctx, "k", 10, "k10", true); err != nil || got != "" {
		t.Errorf("first outcome a success: got %q, %v, want no transition", got, err)
	}
	if _, err := b.RecordOutcome(ctx, "k", 0, "manual", true); err == nil {
		t.Errorf("slot 0: got no error, want one")
	}
}
