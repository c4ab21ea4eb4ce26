package api

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/redislock"
)

// A pause with an end that passed gets an auto_resume row at its end,
// unless a pause or resume came before that end.
func TestWithAutoResumes(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	evs := []redislock.Event{ // newest first
		{Type: "pause", At: at(50), Until: at(70)}, // not ended by now (60)
		{Type: "pause", At: at(30), Until: at(40)}, // lifted itself at 40
		{Type: "resume", At: at(15)},               // resumed before the end of the pause at 10
		{Type: "pause", At: at(10), Until: at(20)}, // not lifted by itself
		{Type: "reload", At: at(5), Node: "n1"},    // not a pause change
		{Type: "pause", At: at(0), Until: at(8)},   // lifted itself at 8 (the reload is no pause change)
	}
	rows := WithAutoResumes(evs, at(60))
	var got []string
	for _, r := range rows {
		got = append(got, r.Type+"@"+r.At.Format("04"))
	}
	want := []string{"pause@50", "auto_resume@40", "pause@30", "resume@15", "pause@10", "auto_resume@08", "reload@05", "pause@00"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: got %s, want %s (all: %q)", i, got[i], want[i], got)
		}
	}
}
