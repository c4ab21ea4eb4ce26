package actors

import "testing"

func TestOutcome_String(t *testing.T) {
	for o, want := range map[Outcome]string{Claimed: "claimed", ClaimedElsewhere: "claimed_elsewhere",
		Paused: "paused", Overlap: "overlap", Outcome(9): "Outcome(9)"} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String(): got %q, want %q", int(o), got, want)
		}
	}
}
