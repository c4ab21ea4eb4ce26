package actors

import "testing"

func TestOutcome_String(t *testing.T) {
	for o, want := range map[Outcome]string{Claimed: "claimed", ClaimedElsewhere: "claimed_elsewhere",
		Paused: "paused", Overlap: "overlap", NotYet: "not_yet", Outcome(10): "Outcome(10)"} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String(): got %q, want %q", int(o), got, want)
		}
	}
}
