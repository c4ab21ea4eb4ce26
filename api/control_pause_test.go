package api

import (
	"strings"
	"testing"
	"time"
)

// A pause request whose end cannot be a Redis TTL (below 1ms, or an explicit
// zero length) is refused naming the field, before any Redis call: it is bad
// input, not a Redis failure, and "-for 0s" must not become a pause without
// end. A note must be one printable line of bounded size, since status and
// history -events print it in a table.
func TestPauseSpec_RefusesBadInput(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		spec PauseSpec
		want string // substring of the error
	}{
		{"for zero given", PauseSpec{For: 0, ForSet: true}, "for 0s"},
		{"for below 1ms", PauseSpec{For: time.Microsecond, ForSet: true}, "at least 1ms"},
		{"until within 1ms", PauseSpec{Until: now.Add(time.Microsecond)}, "at least 1ms"},
		{"note with newline", PauseSpec{Note: "a\nFAKE row"}, "note"},
		{"note with escape", PauseSpec{Note: "a\x1b[2Jb"}, "note"},
		{"note too long", PauseSpec{Note: strings.Repeat("x", MaxPauseNote+1)}, "note"},
	}
	for _, c := range cases {
		if _, err := c.spec.Pause("ops@h", now); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want one containing %q", c.name, err, c.want)
		}
	}
	ok := []PauseSpec{
		{},
		{For: time.Millisecond, ForSet: true},
		{For: 2 * time.Hour, ForSet: true, Note: "disk full, see ticket 42 — ünïcode ok"},
		{Until: now.Add(time.Hour)},
		{Note: strings.Repeat("x", MaxPauseNote)},
	}
	for _, s := range ok {
		if _, err := s.Pause("ops@h", now); err != nil {
			t.Errorf("%+v: got error %v, want none", s, err)
		}
	}
}

// A run request's reason is held to the same rule as a pause note.
func TestCheckText_Reason(t *testing.T) {
	if err := CheckText("-reason", "deploy 42"); err != nil {
		t.Errorf("plain reason: got %v, want nil", err)
	}
	if err := CheckText("-reason", "x\nmanual by root@prod"); err == nil || !strings.HasPrefix(err.Error(), "-reason: ") {
		t.Errorf("reason with a newline: got %v, want an error naming -reason", err)
	}
}
