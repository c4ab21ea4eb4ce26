package schedule

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/hashicorp/cronexpr"
)

// cronexpr is the oracle for the field syntax: cronlock's parser accepts a
// field exactly when cronexpr does, item by item, except where cronlock
// deliberately differs (see wantAccept).

// cronexprAccepts reports whether cronexpr parses field idx (second first)
// with every other field "*", in its 7-field form (trailing year).
func cronexprAccepts(idx int, field string) (ok bool) {
	f := []string{"0", "*", "*", "*", "*", "*", "*"}
	f[idx] = field
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_, err := cronexpr.Parse(strings.Join(f, " "))
	return err == nil
}

// oursAccepts runs cronlock's field parser alone: no cronexpr gate, no
// never-fires check.
func oursAccepts(idx int, field string) error {
	f := []string{"0", "*", "*", "*", "*", "*"}
	f[idx] = field
	_, err := newMatcher(f)
	return err
}

var (
	rangeItem = regexp.MustCompile(`^([a-z0-9]+)-([a-z0-9]+)(/[0-9]+)?$`)
	dowStep7  = regexp.MustCompile(`/0?7$`)
)

// wantAccept is cronexpr's verdict on field idx, taken item by item and
// adjusted for cronlock's deliberate differences:
//   - an empty list item ("1,,2", "5,") is an error; cronexpr skips it;
//   - every item is read; cronexpr stops reading a second, minute, hour or
//     month list at its first "*" or "?", so it accepts "*,garbage";
//   - a reversed range ("30-10", "fri-mon", "5-0") is an error; cronexpr
//     accepts it and then never fires or panics in Next;
//   - a day-of-week step may be 7 ("*/7" is Sunday): the field runs 0-7 as
//     in crontab(5), cronexpr's stops at 6.
func wantAccept(idx int, field string) bool {
	for _, item := range strings.Split(field, ",") {
		if item == "" || reversed(idx, item) {
			return false
		}
		if idx == fDOW {
			item = dowStep7.ReplaceAllString(item, "/1")
		}
		if !cronexprAccepts(idx, item) {
			return false
		}
	}
	return true
}

// reversed reports whether item is a range "A-B[/S]" with A after B, in
// cronlock's reading (an end of SUN after a later day is 7). It only needs
// to be right for items cronexpr accepts.
func reversed(idx int, item string) bool {
	m := rangeItem.FindStringSubmatch(strings.ToLower(item))
	if m == nil {
		return false
	}
	val := func(tok string) int {
		if n, err := strconv.Atoi(tok); err == nil {
			return n
		}
		if idx == fMonth {
			return monthNames[tok]
		}
		return dowNames[tok]
	}
	a, b := val(m[1]), val(m[2])
	if idx == fDOW && b == 0 && a > 0 && (m[2] == "sun" || m[2] == "sunday") {
		b = 7
	}
	return a > b
}

// checkField asserts that cronlock's parser accepts field idx exactly when
// wantAccept says so, and that Parse (with cronexpr's gate and the
// never-fires check) agrees with the parser alone.
func checkField(t *testing.T, idx int, field string) error {
	t.Helper()
	err := oursAccepts(idx, field)
	if want := wantAccept(idx, field); (err == nil) != want {
		t.Errorf("%s field %q: cronlock accepts=%v (err %v), cronexpr (modulo the documented differences) accepts=%v",
			fieldNames[idx], field, err == nil, err, want)
	}
	f := []string{"0", "*", "*", "*", "*", "*"}
	f[idx] = field
	expr := strings.Join(f, " ")
	if _, perr := Parse(expr, time.UTC); (perr == nil) != (err == nil) {
		t.Errorf("Parse(%q) err %v, but the field parser alone says %v", expr, perr, err)
	}
	return err
}

func TestFields_AgreeWithCronexpr(t *testing.T) {
	tests := []struct {
		idx   int
		field string
		want  string // substring of the error, "" to accept
		// differs is true where cronexpr's verdict differs (a deliberate
		// difference, see wantAccept); the test checks that it really does.
		differs bool
	}{
		{fMinute, "*/59", "", false},
		{fMinute, "*/05", "", false},
		{fMinute, "00", "", false},
		{fMinute, "1-59/58", "", false},
		{fMinute, "*/60", `minute field "*/60": step 60 is larger than the field's range 0-59`, false},
		{fMinute, "5/60", "step 60 is larger", false},
		{fMinute, "10-20/60", "or write 10 alone to fire once an hour", false},
		{fMinute, "*/100", "step 100 is larger", false},
		{fMinute, "*/0", "step 0 never advances", false},
		{fMinute, "*/00", "step 00 never advances", false},
		{fMinute, "*/005", `"005" has too many digits: write 5`, false},
		{fMinute, "*/+5", `step "+5" is not a number`, false},
		{fMinute, "*/", "a step is missing", false},
		{fMinute, "?/5", `"?" takes no step, write */5`, false},
		{fMinute, "007", `"007" has too many digits: write 7`, false},
		{fMinute, "0030", `"0030" has too many digits: write 30`, false},
		{fMinute, "60", `"60" is not a minute: use 0-59`, false},
		{fMinute, "+5", `"+5" is not a minute`, false},
		{fMinute, "-5", `wants a value on each side`, false},
		{fMinute, "5-", `wants a value on each side`, false},
		{fMinute, "*-5", `"*" is not a minute`, false},
		{fMinute, "1-2-3", `"2-3" is not a minute`, false},
		{fMinute, ",", "empty list item", false},
		{fMinute, "1,,2", "empty list item", true},
		{fMinute, "5,", "empty list item", true},
		{fMinute, "*,garbage", `"garbage" is not a minute`, true},
		{fMinute, "30-10", "range 30-10 runs backwards", true},
		{fSecond, "*/60", "step 60 is larger than the field's range 0-59", false},
		{fSecond, "007", "too many digits", false},
		{fHour, "*/23", "", false},
		{fHour, "*/24", `hour field "*/24": step 24 is larger than the field's range 0-23`, false},
		{fHour, "24", `"24" is not an hour: use 0-23`, false},
		{fHour, "?,24", `"24" is not an hour`, true},
		{fDOM, "*/31", "", false},
		{fDOM, "*/32", `day-of-month field "*/32": step 32 is larger than the field's range 1-31`, false},
		{fDOM, "0", `"0" is not a day of the month`, false},
		{fDOM, "L", "", false},
		{fDOM, "LW,L", "", false},
		{fDOM, "15W", "", false},
		{fDOM, "01W", "", false},
		{fDOM, "001W", `"001" has too many digits`, false},
		{fDOM, "0W", `"0" is not a day of the month`, false},
		{fDOM, "W", "a value is missing", false},
		{fDOM, "1-5W", "W takes a single day", false},
		{fDOM, "L/2", `"l" is not a day of the month`, false},
		{fDOM, "20-10", "runs backwards", true},
		{fMonth, "*/12", "", false},
		{fMonth, "*/13", "step 13 is larger than the field's range 1-12", false},
		{fMonth, "jan/2", "", false},
		{fMonth, "JAN-3", "", false},
		{fMonth, "00", `"00" is not a month`, false},
		{fMonth, "dec-jan", "runs backwards", true},
		{fDOW, "*/6", "", false},
		{fDOW, "*/7", "", true},
		{fDOW, "1-7/7", "", true},
		{fDOW, "*/8", "step 8 is larger than the field's range 0-7", false},
		{fDOW, "5-7", "", false},
		{fDOW, "sat-sun", "", false},
		{fDOW, "07", "", false},
		{fDOW, "007", "too many digits", false},
		{fDOW, "5L", "", false},
		{fDOW, "FRIL", "", false},
		{fDOW, "sundayl", "", false},
		{fDOW, "007l", "too many digits", false},
		{fDOW, "07#1", "", false},
		{fDOW, "1#01", "the week after # must be 1-5", false},
		{fDOW, "1#0", "the week after # must be 1-5", false},
		{fDOW, "5#6", "the week after # must be 1-5", false},
		{fDOW, "5l#2", `"5l" is not a day`, false},
		{fDOW, "1-5L", "L and # take a single day", false},
		{fDOW, "L", "a value is missing", false},
		{fDOW, "?/2", `"?" takes no step`, false},
		{fDOW, "8", `"8" is not a day`, false},
		{fDOW, "5-0", "runs backwards", true},
		{fDOW, "fri-mon", "runs backwards", true},
		{fDOW, "1,", "empty list item", true},
	}
	for _, tc := range tests {
		err := checkField(t, tc.idx, tc.field)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s field %q: %v, want it accepted", fieldNames[tc.idx], tc.field, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s field %q: error %v, want it to contain %q", fieldNames[tc.idx], tc.field, err, tc.want)
		}
		if got := cronexprAccepts(tc.idx, tc.field) != (tc.want == ""); got != tc.differs {
			t.Errorf("%s field %q: differs from cronexpr = %v, table says %v", fieldNames[tc.idx], tc.field, got, tc.differs)
		}
	}
}

// FuzzFields compares cronlock's field parser with cronexpr on single
// fields (see wantAccept). The corpus is in testdata/fuzz/FuzzFields.
func FuzzFields(f *testing.F) {
	for _, s := range []string{
		"*/60", "*/59", "5/60", "007", "*/+5", "?/5", "1,,2", "*,x", "30-10/2", "l", "lw", "15w", "5l",
		"1#2", "1#01", "sat-sun", "*/7", "0-7/7", "jan-mar/2", "00", "0", "59", "23", "31", "12", "7",
	} {
		for idx := range 6 {
			f.Add(uint8(idx), s)
		}
	}
	f.Fuzz(func(t *testing.T, idx uint8, field string) {
		if field == "" || strings.ContainsFunc(field, unicode.IsSpace) {
			return // not one field
		}
		checkField(t, int(idx)%6, field)
	})
}

// The matcher must agree with cronexpr's Next wherever cronexpr is right:
// UTC, no day-of-week range ending at 7/SUN (cronexpr reads 5-7 as 5-6), and
// day fields that are not in cronie's AND case (cronexpr always ORs).
func TestMatcher_AgreesWithCronexpr(t *testing.T) {
	exprs := []string{
		"*/5 * * * *", "0 9 * * mon-fri", "15,45 */6 * * *", "0 0 1 */3 *", "0 0 13 * 5",
		"0 0 L * *", "0 0 LW * *", "0 0 15W * *", "0 0 1W * *", "0 0 31W * *", "0 0 * * 5L",
		"0 0 * * 1#2", "0 0 * * 5#5", "0 0 29 2 *", "59 23 31 12 *", "0 12 1,15 * 1#1",
		"0 0 L * 0L", "30 8-17/3 * jan-mar,oct *", "0 0 10-20/5 * 2,4", "7 7 7 7 *",
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, e := range exprs {
		s, err := Parse(e, time.UTC)
		if err != nil {
			t.Fatalf("Parse(%q): %v", e, err)
		}
		ce := cronexpr.MustParse(e)
		a, b := from, from
		for i := range 200 {
			a, b = s.Next(a), ce.Next(b)
			if b.IsZero() && a.Year() > 2099 {
				break // cronexpr stops at 2099
			}
			if !a.Equal(b) {
				t.Fatalf("%q step %d: got %s, cronexpr %s", e, i, a, b)
			}
		}
	}
}
