package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // the tz database is embedded, so all nodes agree on zones
	"unicode"
	"unicode/utf8"
)

// ErrNeverFires is matched by Parse's error when an expression is valid but
// no time matches it (for example "0 0 31 2 *"). Check it with errors.Is.
var ErrNeverFires = errors.New("schedule: never fires")

// Schedule is a parsed schedule expression. It is immutable after Parse and
// safe for concurrent use without locking.
type Schedule struct {
	expr  string
	loc   *time.Location
	every time.Duration // > 0 for @every
	at    time.Time     // non-zero for @at: the one fire time

	// fixed is true when neither the minute nor the hour field starts with
	// "*": such a job gets Debian cron(8)'s DST treatment (see Next).
	fixed bool
	m     *matcher // nil for @every

	// base is the schedule without its active window [from, until)
	// (InWindow); nil when there is none.
	base        *Schedule
	from, until time.Time
}

// macros are the crontab(5) @-shortcuts cronlock accepts, as 5-field
// expressions. @reboot is deliberately absent.
var macros = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
	"@hourly": "0 * * * *",
}

// Parse parses a schedule expression:
//
//   - 5 fields "min hour dom month dow", or 6 fields with leading seconds,
//     separated by spaces or tabs (or \n, \r, \f, as cronexpr allows);
//   - in cronexpr's field syntax: numbers of one or two digits, names,
//     ranges, steps up to the field's maximum, lists, ?, and L, LW, 15W in
//     day-of-month, 5L and 1#2 in day-of-week; day-of-week 0-7 with 0 and 7
//     both Sunday in every form (5-7, SAT-SUN, */7);
//   - day-of-month and day-of-week are ANDed if either field starts with "*"
//     and ORed otherwise, as cronie does (crontab(5), cronie entry.c);
//   - @yearly @annually @monthly @weekly @daily @midnight @hourly
//     (case-insensitive), and "@every D" with D a Go duration of whole
//     seconds, at least 1s, fired at Unix times divisible by D;
//   - "@at T" with T an RFC 3339 time in whole seconds, fired once at T
//     (a T that has passed is valid: the job is done, Next yields zero);
//   - an optional "CRON_TZ=Zone " or "TZ=Zone " prefix that overrides loc.
//
// loc is the default zone (the job's timezone or the node zone); nil means
// UTC. The error names the problem and the fix: wrong field count, bad
// field, reversed range, unknown zone, @reboot, a bad @every interval, or
// one matching ErrNeverFires (errors.Is) when no time matches. Each error
// names the expression once: `schedule "0 2 * *": want 5 or 6 fields, …`.
// Parse never panics.
func Parse(expr string, loc *time.Location) (*Schedule, error) {
	s, err := parse(expr, loc)
	switch {
	case errors.Is(err, ErrNeverFires):
		return nil, &neverFiresError{expr: expr}
	case err != nil:
		return nil, fmt.Errorf("schedule %q: %w", expr, err)
	}
	return s, nil
}

// neverFiresError is Parse's error for a valid expression that matches no
// time. It matches ErrNeverFires with errors.Is; its text names the
// expression once instead of repeating the sentinel's "schedule:" prefix.
type neverFiresError struct{ expr string }

func (e *neverFiresError) Error() string {
	return fmt.Sprintf("schedule %q never fires (no such date): no time matches it in a 400-year calendar "+
		"cycle; check that the day-of-month exists in the month (Feb 30, Apr 31)", e.expr)
}

// Is reports whether target is ErrNeverFires.
func (e *neverFiresError) Is(target error) bool { return target == ErrNeverFires }

func parse(expr string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	if i := strings.IndexFunc(expr, isOtherSpace); i >= 0 {
		r, _ := utf8.DecodeRuneInString(expr[i:])
		return nil, fmt.Errorf("%U is not a field separator: separate fields with spaces or tabs", r)
	}
	body, loc, err := stripZone(strings.TrimSpace(expr), loc)
	if err != nil {
		return nil, err
	}
	if body == "" {
		return nil, errors.New("empty expression: want 5 or 6 fields such as \"0 9 * * mon-fri\", or a macro such as @daily")
	}
	s := &Schedule{expr: expr, loc: loc}
	if strings.HasPrefix(body, "@") {
		if body, err = s.macro(body); err != nil {
			return nil, err
		}
		if s.every > 0 || !s.at.IsZero() {
			return s, nil
		}
	}
	fields := strings.Fields(body)
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
	default:
		return nil, fmt.Errorf("want 5 or 6 fields, got %d: write min hour dom month dow, "+
			"optionally with leading seconds", len(fields))
	}
	if err := s.compile(fields); err != nil {
		return nil, err
	}
	if !s.fires() {
		return nil, ErrNeverFires // Parse renders it with the expression
	}
	return s, nil
}

// isOtherSpace reports whether r is white space that cronexpr does not
// split fields on (it splits on space, \t, \n, \r and \f): \v, U+0085 and
// the Unicode spaces such as U+00A0, which slip in when an expression is
// pasted from a web page.
func isOtherSpace(r rune) bool {
	return unicode.IsSpace(r) && !strings.ContainsRune(" \t\n\r\f", r)
}

// stripZone removes a CRON_TZ= or TZ= prefix and returns the zone it names.
func stripZone(expr string, loc *time.Location) (string, *time.Location, error) {
	var rest string
	var ok bool
	var prefix string
	for _, prefix = range []string{"CRON_TZ=", "TZ="} {
		if rest, ok = strings.CutPrefix(expr, prefix); ok {
			break
		}
	}
	if !ok {
		return expr, loc, nil
	}
	zone, body := rest, ""
	if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
		zone, body = rest[:i], rest[i:]
	}
	if zone == "" || strings.TrimSpace(body) == "" {
		return "", nil, fmt.Errorf("%s prefix wants a zone and an expression, e.g. %sEurope/Berlin 0 9 * * *",
			prefix, prefix)
	}
	z, err := time.LoadLocation(zone)
	if err != nil {
		return "", nil, fmt.Errorf("unknown time zone %q in %s prefix: use an IANA name such as "+
			"Europe/Berlin or UTC", zone, prefix)
	}
	return strings.TrimSpace(body), z, nil
}

// macro expands an @-macro into fields, or sets s.every for @every.
func (s *Schedule) macro(body string) (string, error) {
	words := strings.Fields(body)
	name := strings.ToLower(words[0])
	switch {
	case name == "@reboot":
		return "", errors.New("@reboot is not supported: cronlock runs jobs on a clock shared " +
			"by all nodes; start boot-time tasks with a systemd unit instead")
	case name == "@at":
		if len(words) != 2 {
			return "", errors.New(`@at wants exactly one RFC 3339 time, e.g. "@at 2026-12-24T18:00:00Z"`)
		}
		t, err := time.Parse(time.RFC3339, words[1])
		if err != nil || t.Nanosecond() != 0 || t.Unix() <= 0 {
			return "", fmt.Errorf("@at wants an RFC 3339 time in whole seconds after 1970, e.g. 2026-12-24T18:00:00Z "+
				"or 2026-12-24T19:00:00+01:00; got %q", words[1])
		}
		s.at = t
		return "", nil
	case name == "@every":
		if len(words) != 2 {
			return "", errors.New(`@every wants exactly one duration, e.g. "@every 1h30m"`)
		}
		d, err := time.ParseDuration(words[1])
		if err != nil || d < time.Second || d%time.Second != 0 {
			return "", errors.New("@every wants a Go duration of whole seconds, at least 1s " +
				"(e.g. 10s, 5m, 1h30m)")
		}
		s.every = d
		return "", nil
	}
	fields, ok := macros[name]
	if !ok {
		return "", fmt.Errorf("unknown macro %s: use @yearly, @annually, @monthly, @weekly, "+
			"@daily, @midnight, @hourly, @every <duration> or @at <RFC 3339 time>", words[0])
	}
	if len(words) > 1 {
		return "", fmt.Errorf("%s takes nothing after it: remove %q", words[0],
			strings.Join(words[1:], " "))
	}
	return fields, nil
}

// compile parses the six fields (second first) with cronlock's parser.
func (s *Schedule) compile(f []string) error {
	for i, field := range f {
		if strings.ContainsAny(field, "@") {
			return fieldError(i, field, "macros must stand alone, e.g. @daily")
		}
	}
	m, err := newMatcher(f)
	if err != nil {
		return err
	}
	s.m, s.fixed = m, !isStar(f[fMinute]) && !isStar(f[fHour])
	return nil
}

// fires reports whether s fires at least once, probing from a fixed
// reference instant and from now.
func (s *Schedule) fires() bool {
	ref := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	return !s.Next(ref).IsZero() || !s.Next(time.Now()).IsZero()
}

// Once returns the fire time of an "@at T" schedule and true; the zero
// time and false for every other form.
func (s *Schedule) Once() (time.Time, bool) { return s.at.In(s.loc), !s.at.IsZero() }

// Location returns the zone the schedule is evaluated in: the CRON_TZ=/TZ=
// prefix if present, else the loc given to Parse (UTC if that was nil).
func (s *Schedule) Location() *time.Location { return s.loc }

// String returns the expression exactly as given to Parse.
func (s *Schedule) String() string { return s.expr }
