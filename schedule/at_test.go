package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestParse_AtFiresOnce(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	s, err := Parse("@at 2027-03-14T02:30:00-04:00", ny)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2027, 3, 14, 6, 30, 0, 0, time.UTC)
	tests := []struct {
		after time.Time
		want  time.Time
	}{
		{want.Add(-time.Hour), want},
		{want.Add(-time.Second), want},
		{want, time.Time{}},
		{want.Add(time.Hour), time.Time{}},
	}
	for _, tc := range tests {
		got := s.Next(tc.after)
		if !got.Equal(tc.want) {
			t.Errorf("Next(%s): got %s, want %s", tc.after, got, tc.want)
		}
		if !got.IsZero() && got.Location() != ny {
			t.Errorf("Next(%s): got zone %s, want America/New_York", tc.after, got.Location())
		}
	}
	if at, ok := s.Once(); !ok || !at.Equal(want) {
		t.Errorf("Once: got %s, %v; want %s, true", at, ok, want)
	}
	if _, ok := mustParse(t, "@daily").Once(); ok {
		t.Error("Once of @daily: got true, want false")
	}
}

func TestParse_AtInThePastIsValid(t *testing.T) {
	s := mustParse(t, "@at 2020-01-01T00:00:00Z")
	if n := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); !n.IsZero() {
		t.Errorf("Next after the @at time: got %s, want zero", n)
	}
}

func TestParse_AtErrors(t *testing.T) {
	for expr, want := range map[string]string{
		"@at":                              "exactly one RFC 3339 time",
		"@at 2027-01-01":                   "RFC 3339 time in whole seconds",
		"@at 2027-01-01T00:00:00.5Z":       "whole seconds",
		"@at 2027-01-01T00:00:00Z extra":   "exactly one",
		"@at 1960-01-01T00:00:00Z":         "after 1970",
		"CRON_TZ=UTC @at 2027-01-01 00:00": "exactly one",
	} {
		_, err := Parse(expr, time.UTC)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): got %v, want an error containing %q", expr, err, want)
		}
	}
}

func mustParse(t *testing.T, expr string) *Schedule {
	t.Helper()
	s, err := Parse(expr, time.UTC)
	if err != nil {
		t.Fatalf("Parse(%q): %v", expr, err)
	}
	return s
}
