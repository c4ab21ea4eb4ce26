package ledger

import "testing"

func TestOutcome_String(t *testing.T) {
	for o, want := range map[Outcome]string{Claimed: "claimed", ClaimedElsewhere: "claimed_elsewhere",
		Paused: "paused", Overlap: "overlap", Queued: "queued", MaxRunsReached: "max_runs", ClockSkew: "clock_skew",
		OutsideWindow: "outside_claim_window", StateLost: "state_lost", OutsideRetention: "outside_retention",
		NotReplicated: "not_replicated", Outcome(99): "Outcome(99)"} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String(): got %q, want %q", int(o), got, want)
		}
	}
}
