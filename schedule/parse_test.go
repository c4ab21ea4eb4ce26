package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		expr  string
		want  string // substring of the error
		never bool   // wraps ErrNeverFires
	}{
		{"", "empty expression", false},
		{"   ", "empty expression", false},
		{"0 0 * *", "want 5 or 6 fields, got 4", false},
		{"1 2 3 4 5 6 7", "want 5 or 6 fields, got 7", false},
		{"0 0 * * * * * GARBAGE", "want 5 or 6 fields, got 8", false},
		{"0 0 31 2 *", "never fires", true},
		{"0 0 30 2 *", "never fires", true},
		{"0 0 31 4,6,9,11 *", "never fires", true},
		{"0 0 0 31 2 *", "never fires", true},
		{"0 0 */31 2 1#2", "never fires", true},
		{"CRON_TZ=Mars/Base 0 0 * * *", `unknown time zone "Mars/Base"`, false},
		{"TZ=Nowhere/City 0 * * * *", `unknown time zone "Nowhere/City"`, false},
		{"CRON_TZ= 0 0 * * *", "wants a zone and an expression", false},
		{"CRON_TZ=UTC", "wants a zone and an expression", false},
		{"@reboot", "@reboot is not supported", false},
		{"@every 500ms", "whole seconds, at least 1s", false},
		{"@every 0s", "whole seconds, at least 1s", false},
		{"@every -5s", "whole seconds, at least 1s", false},
		{"@every 1500ms", "whole seconds, at least 1s", false},
		{"@every ten", "whole seconds, at least 1s", false},
		{"@every", "exactly one duration", false},
		{"@every 10s 20s", "exactly one duration", false},
		{"@fortnightly", "unknown macro", false},
		{"@daily extra", `remove "extra"`, false},
		{"@hourly 2027", `remove "2027"`, false},
		{"0 0 @daily * *", "macros must stand alone", false},
		{"30-10 5 * * *", `range 30-10 runs backwards`, false},
		{"0 0 1 12-1 *", `range 12-1 runs backwards`, false},
		{"0 0 1 dec-jan *", `range dec-jan runs backwards`, false},
		{"0 23-1 * * *", `range 23-1 runs backwards`, false},
		{"0 0 20-10/2 * *", `range 20-10 runs backwards`, false},
		{"50-10 0 0 * * *", `second field "50-10"`, false},
		{"0 0 * * fri-mon", "runs backwards", false},
		{"0 0 * * 5-0", "runs backwards", false},
		{"60 * * * *", `minute field "60": "60" is not a minute: use 0-59`, false},
		{"0 24 * * *", `hour field "24": "24" is not an hour: use 0-23`, false},
		{"0 0 0 * *", `day-of-month field "0": "0" is not a day of the month`, false},
		{"0 0 32 * *", `day-of-month field "32": "32" is not a day of the month`, false},
		{"0 0 * 13 *", `month field "13": "13" is not a month: use 1-12 or JAN-DEC`, false},
		{"0 0 * * 8", `"8" is not a day`, false},
		{"61 0 0 * * *", `second field "61": "61" is not a second`, false},
		{"*/60 * * * *", `schedule "*/60 * * * *": minute field "*/60": step 60 is larger than the field's range 0-59`, false},
		{"0 */24 * * *", `hour field "*/24": step 24 is larger than the field's range 0-23`, false},
		{"0 0 */32 * *", `day-of-month field "*/32": step 32 is larger than the field's range 1-31`, false},
		{"0 0 1 */13 *", `month field "*/13": step 13 is larger`, false},
		{"*/0 * * * *", "step 0 never advances", false},
		{"007 * * * *", `"007" has too many digits: write 7`, false},
		{"*/+5 * * * *", `step "+5" is not a number`, false},
		{"?/5 * * * *", `"?" takes no step`, false},
		{"1,,2 * * * *", "empty list item", false},
		{"*,61 * * * *", `"61" is not a minute`, false},
		{"0 0 * * 1#01", "the week after # must be 1-5", false},
		{"0 0 * * */0", "step", false},
		{"0 0 * * 1/9", "step", false},
		{"0 0 * * mon-", `range "mon-" wants a value on each side`, false},
		{"0 0 * * 5#6", `day-of-week field "5#6": "5#6": the week after # must be 1-5`, false},
		{"0\u00a00 * * * *", "U+00A0 is not a field separator: separate fields with spaces or tabs", false},
		{"0 0 * * *\u2003", "U+2003 is not a field separator", false},
		{"0\v0 * * * *", "U+000B is not a field separator", false},
		{"CRON_TZ=UTC\u00850 0 * * *", "U+0085 is not a field separator", false},
		{"abc * * * *", `minute field "abc": "abc" is not a minute`, false},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			s, err := Parse(tc.expr, time.UTC)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want error containing %q", tc.expr, s, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%q) error %q, want it to contain %q", tc.expr, err, tc.want)
			}
			if got := errors.Is(err, ErrNeverFires); got != tc.never {
				t.Errorf("errors.Is(err, ErrNeverFires) = %v, want %v (err %v)", got, tc.never, err)
			}
		})
	}
}

// TestParse_ErrorNamesExpressionOnce: the expression and the word
// "schedule" appear once, so callers can print the error as it is.
func TestParse_ErrorNamesExpressionOnce(t *testing.T) {
	tests := map[string]string{
		"0 0 31 2 *":   `schedule "0 0 31 2 *" never fires (no such date): `,
		"@every 500ms": `schedule "@every 500ms": @every wants a Go duration of whole seconds`,
		"0 2 * *":      `schedule "0 2 * *": want 5 or 6 fields, got 4`,
	}
	for expr, want := range tests {
		_, err := Parse(expr, time.UTC)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Parse(%q) error %v, want prefix %q", expr, err, want)
			continue
		}
		if n := strings.Count(err.Error(), "schedule"); n != 1 {
			t.Errorf("Parse(%q) error %q says \"schedule\" %d times, want 1", expr, err, n)
		}
	}
}

func TestParse_Accessors(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	tests := []struct {
		expr  string
		loc   *time.Location
		zone  string
		every time.Duration
	}{
		{"0 9 * * *", ny, "America/New_York", 0},
		{"0 9 * * *", nil, "UTC", 0},
		{"CRON_TZ=Asia/Kolkata 0 9 * * *", ny, "Asia/Kolkata", 0},
		{"TZ=Europe/Berlin\t@hourly", ny, "Europe/Berlin", 0},
		{"@every 1h30m", ny, "America/New_York", 90 * time.Minute},
		{" @every 10s ", nil, "UTC", 10 * time.Second},
	}
	for _, tc := range tests {
		s, err := Parse(tc.expr, tc.loc)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.expr, err)
		}
		if s.String() != tc.expr {
			t.Errorf("String() = %q, want %q", s.String(), tc.expr)
		}
		if s.Location().String() != tc.zone {
			t.Errorf("%q: Location() = %v, want %s", tc.expr, s.Location(), tc.zone)
		}
		if s.every != tc.every {
			t.Errorf("%q: every = %v, want %v", tc.expr, s.every, tc.every)
		}
	}
}

// A fixed-time daily job fires exactly once per local day across a year
// with both DST changes (Debian cron(8)); an hourly wildcard job fires once
// per elapsed hour, 8760 times, following the clock.
func TestNext_YearInvariants(t *testing.T) {
	for _, zone := range []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Pacific/Chatham"} {
		loc := mustZone(t, zone)
		daily, _ := Parse("30 2 * * *", loc)
		hourly, _ := Parse("0 * * * *", loc)
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
		to := time.Date(2027, 1, 1, 0, 0, 0, 0, loc)
		days := map[string]int{}
		for at := daily.Next(from); at.Before(to); at = daily.Next(at) {
			days[at.Format("2006-01-02")]++
		}
		if len(days) != 365 {
			t.Errorf("%s daily: fired on %d local days, want 365", zone, len(days))
		}
		for d, n := range days {
			if n != 1 {
				t.Errorf("%s daily: fired %d times on %s, want 1", zone, n, d)
			}
		}
		n, prev := 0, hourly.Next(from.Add(-time.Second))
		for at := hourly.Next(prev); at.Before(to); at = hourly.Next(at) {
			if at.Sub(prev) != time.Hour && zone != "Pacific/Chatham" && zone != "Australia/Lord_Howe" {
				t.Errorf("%s hourly: %s follows %s", zone, at, prev)
			}
			prev, n = at, n+1
		}
		if zone == "America/New_York" || zone == "Europe/Berlin" {
			if n != 8759 {
				t.Errorf("%s hourly: %d fires after the first, want 8759", zone, n)
			}
		}
	}
}
