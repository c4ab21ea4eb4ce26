package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestValidate_ActiveWindow: active_from/active_until must be RFC 3339 and
// form a non-empty window; a window without a fire time is a warning; a
// valid window reaches the job's schedule, also from defaults.
func TestValidate_ActiveWindow(t *testing.T) {
	bad := []struct{ name, yaml, want string }{
		{"not RFC 3339", job("  active_from: '2027-01-01'\n"),
			`jobs[0] "j": active_from: "2027-01-01" is not an RFC 3339 time; write e.g. 2027-01-01T00:00:00Z`},
		{"no zone", job("  active_until: '2027-01-01T10:00:00'\n"), `jobs[0] "j": active_until: "2027-01-01T10:00:00" is not an RFC 3339 time`},
		{"in defaults", "defaults: {active_until: soon}\n" + job(""), `defaults.active_until: "soon" is not an RFC 3339 time`},
		{"empty window", job("  active_from: '2027-02-01T00:00:00Z'\n  active_until: '2027-01-01T00:00:00Z'\n"),
			`jobs[0] "j": active_until: 2027-01-01T00:00:00Z is not after active_from 2027-02-01T00:00:00Z`},
		{"not a string", job("  active_from: [1]\n"), `jobs[0] "j": active_from: `},
	}
	for _, tt := range bad {
		_, err := Parse([]byte(tt.yaml), "yaml", Options{})
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want a problem containing %q", tt.name, err, tt.want)
		}
	}

	cfg, err := Parse([]byte(job("  active_from: '2027-01-01T01:00:00Z'\n  active_until: '2027-01-01T01:59:00Z'\n")), "yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].String(),
		`warning: jobs[0] "j": active_until: schedule "0 2 * * *" has no fire time in the active window [2027-01-01T01:00:00Z, 2027-01-01T01:59:00Z); the job never fires`) {
		t.Errorf("warnings %v, want the no-fire-time warning", cfg.Warnings)
	}

	cfg, err = Parse([]byte("defaults: {active_from: '2027-01-01T00:00:00+01:00'}\n"+job("  active_until: '2027-01-05T00:00:00Z'\n")), "yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.Jobs[0]
	from, until := j.Sched.Window()
	if j.ActiveFrom != "2027-01-01T00:00:00+01:00" || !from.Equal(time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)) ||
		!until.Equal(time.Date(2027, 1, 5, 0, 0, 0, 0, time.UTC)) || len(cfg.Warnings) != 0 {
		t.Errorf("got active_from %q window [%v, %v) warnings %v; want the inherited from and the job's until", j.ActiveFrom, from, until, cfg.Warnings)
	}
	if got := j.Sched.Next(time.Date(2027, 1, 4, 12, 0, 0, 0, time.UTC)); !got.IsZero() {
		t.Errorf("Next after the last fire in the window = %v, want none", got)
	}
}

// A window open at its start whose active_until comes before the
// schedule's only fire time (@at) is warned about too: the job never fires.
// A recurring schedule with only active_until has fire times before it.
func TestValidate_AtAfterActiveUntilWarned(t *testing.T) {
	data := "jobs:\n  - {name: j, schedule: \"@at 2027-12-24T18:00:00Z\", command: \"true\", active_until: \"2027-12-24T00:00:00Z\"}\n"
	ps := render(problemsOf(t, data, "yaml", Options{}))
	if len(ps) != 1 || !strings.Contains(ps[0], `active_until: schedule "@at 2027-12-24T18:00:00Z" has no fire time in the active window [, 2027-12-24T00:00:00Z); the job never fires`) {
		t.Errorf("got %q, want one warning that the job never fires", ps)
	}
	data = "jobs:\n  - {name: j, schedule: \"0 2 * * *\", command: \"true\", active_until: \"2027-12-24T00:00:00Z\"}\n"
	if ps := problemsOf(t, data, "yaml", Options{}); len(ps) != 0 {
		t.Errorf("recurring schedule with active_until only: got %q, want no problem", render(ps))
	}
}
