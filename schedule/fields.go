package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// Field indexes in the 6-field form (leading seconds). A 5-field expression
// gets second 0.
const (
	fSecond = iota
	fMinute
	fHour
	fDOM
	fMonth
	fDOW
)

// fieldNames names the fields, for error messages.
var fieldNames = [...]string{"second", "minute", "hour", "day-of-month", "month", "day-of-week"}

// fieldMin and fieldMax bound each field's values and fieldMax its steps
// (a step may not exceed the field's maximum, as in cronexpr). Day-of-week
// accepts 7 = Sunday, as in crontab(5), so its steps run to 7 as well.
var (
	fieldMin = [...]int{0, 0, 0, 1, 1, 0}
	fieldMax = [...]int{59, 59, 23, 31, 12, 7}
)

// unitNames and fieldUse word the "is not a ..." errors; perUnit names the
// period a field's single value fires once in ("once an hour").
var (
	unitNames = [...]string{"a second", "a minute", "an hour", "a day of the month", "a month", "a day"}
	fieldUse  = [...]string{
		"use 0-59", "use 0-59", "use 0-23", "use 1-31, L, LW or a weekday such as 15W",
		"use 1-12 or JAN-DEC", "use 0-7 (0 and 7 are Sunday) or SUN-SAT",
	}
	perUnit = [...]string{"a minute", "an hour", "a day", "a month", "a year", "a week"}
)

var monthNames = map[string]int{
	"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
	"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	"january": 1, "february": 2, "march": 3, "april": 4, "june": 6, "july": 7,
	"august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
}

var dowNames = map[string]int{
	"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	"sunday": 0, "monday": 1, "tuesday": 2, "wednesday": 3, "thursday": 4,
	"friday": 5, "saturday": 6,
}

// isStar reports whether a field starts with "*" (or "?", cronexpr's alias),
// the test cronie applies to day-of-month and day-of-week (entry.c: DOM_STAR,
// DOW_STAR) and that cronlock applies to minute and hour for the DST rules.
func isStar(field string) bool {
	return field != "" && (field[0] == '*' || field[0] == '?')
}

// isAny reports whether a field is exactly "*" or "?" (matches everything).
func isAny(field string) bool { return field == "*" || field == "?" }

// fieldError describes a bad field; Parse prefixes it with the expression.
func fieldError(idx int, field, format string, args ...any) error {
	return fmt.Errorf("%s field %q: %s", fieldNames[idx], field, fmt.Sprintf(format, args...))
}

// span is a plain list item: lo, lo+step, ... up to hi.
type span struct{ lo, hi, step int }

func (s span) bits() uint64 {
	var set uint64
	for v := s.lo; v <= s.hi; v += s.step {
		set |= 1 << uint(v)
	}
	return set
}

// parseSpan reads a plain (lowercased) item of field idx: "*", "?", "N",
// "A-B", "*/S", "N/S" or "A-B/S". "N/S" runs from N to the field's maximum,
// as in cronexpr and cronie. The grammar is cronexpr's, so that cronexpr
// accepts every item this accepts (diff_test.go checks it), except that a
// day-of-week step may be 7 (the field runs 0-7) and that reversed ranges
// are rejected here: cronexpr accepts them and then never fires or panics.
func parseSpan(idx int, field, item string) (span, error) {
	if item == "" {
		return span{}, fieldError(idx, field, "empty list item: remove the extra comma")
	}
	base, stepStr, hasStep := strings.Cut(item, "/")
	sp := span{fieldMin[idx], fieldMax[idx], 1}
	switch {
	case base == "*":
	case base == "?":
		if hasStep {
			return span{}, fieldError(idx, field, "%q: \"?\" takes no step, write */%s", item, stepStr)
		}
	default:
		a, b, isRange := strings.Cut(base, "-")
		if isRange && (a == "" || b == "") {
			return span{}, fieldError(idx, field, "range %q wants a value on each side of \"-\", e.g. 1-5", base)
		}
		var err error
		if sp.lo, err = value(idx, field, a); err != nil {
			return span{}, err
		}
		switch {
		case isRange:
			if sp.hi, err = value(idx, field, b); err != nil {
				return span{}, err
			}
			if err := checkRange(idx, field, a, b, &sp); err != nil {
				return span{}, err
			}
		case !hasStep:
			sp.hi = sp.lo
		}
	}
	if hasStep {
		var err error
		if sp.step, err = step(idx, field, stepStr, sp.lo); err != nil {
			return span{}, err
		}
	}
	return sp, nil
}

// checkRange rejects a reversed range ("30-10", "dec-jan", "fri-mon").
// In day-of-week an end of SUN/SUNDAY after a later day means 7, so
// SAT-SUN is Saturday and Sunday.
func checkRange(idx int, field, a, b string, sp *span) error {
	if idx == fDOW {
		if sp.hi == 0 && sp.lo > 0 && (b == "sun" || b == "sunday") {
			sp.hi = 7
		}
		if sp.lo > sp.hi {
			return fieldError(idx, field, "range %s-%s runs backwards: write the earlier day first "+
				"(0 and 7 are both Sunday, e.g. 5-7 for Fri-Sun)", a, b)
		}
		return nil
	}
	if sp.lo > sp.hi {
		return fieldError(idx, field, "range %s-%s runs backwards (%d > %d): write the smaller value first, "+
			"or split a wrap-around into two ranges such as %d-%d,%d-%d",
			a, b, sp.lo, sp.hi, sp.lo, fieldMax[idx], fieldMin[idx], sp.hi)
	}
	return nil
}

// value reads one value of field idx: a number of one or two digits, as
// cronexpr reads them, or for month and day-of-week an English name or its
// first three letters.
func value(idx int, field, tok string) (int, error) {
	n, isNum := digits(tok)
	if !isNum {
		var names map[string]int
		switch idx {
		case fMonth:
			names = monthNames
		case fDOW:
			names = dowNames
		}
		if n, ok := names[tok]; ok {
			return n, nil
		}
		if tok == "" {
			return 0, fieldError(idx, field, "a value is missing: %s", fieldUse[idx])
		}
		return 0, fieldError(idx, field, "%q is not %s: %s", tok, unitNames[idx], fieldUse[idx])
	}
	if n < fieldMin[idx] || n > fieldMax[idx] {
		return 0, fieldError(idx, field, "%q is not %s: %s", tok, unitNames[idx], fieldUse[idx])
	}
	if len(tok) > 2 {
		return 0, tooManyDigits(idx, field, tok, n)
	}
	return n, nil
}

// step reads the step after "/"; from is the first value it applies to.
func step(idx int, field, tok string, from int) (int, error) {
	n, isNum := digits(tok)
	switch {
	case tok == "":
		return 0, fieldError(idx, field, "a step is missing after \"/\": write e.g. */5")
	case !isNum:
		return 0, fieldError(idx, field, "step %q is not a number: write e.g. */5", tok)
	case n == 0:
		return 0, fieldError(idx, field, "step %s never advances: use a step from 1 to %d", tok, fieldMax[idx])
	case n > fieldMax[idx]:
		return 0, fieldError(idx, field, "step %s is larger than the field's range %d-%d: "+
			"use a step of at most %d, or write %d alone to fire once %s",
			tok, fieldMin[idx], fieldMax[idx], fieldMax[idx], from, perUnit[idx])
	case len(tok) > 2:
		return 0, tooManyDigits(idx, field, tok, n)
	}
	return n, nil
}

func tooManyDigits(idx int, field, tok string, n int) error {
	return fieldError(idx, field, "%q has too many digits: write %d (numbers have at most two digits)", tok, n)
}

// digits reads a non-empty string of ASCII digits, capping the value at
// 1000 (more than any field allows) so long strings cannot overflow.
func digits(tok string) (int, bool) {
	if tok == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = min(n*10+int(c-'0'), 1000)
	}
	return n, true
}

// parseDOMItem reads cronexpr's day-of-month extras: "l" (last day), "lw"
// (last weekday) and "Nw" (weekday nearest day N). ok is false for a plain
// item.
func (m *matcher) parseDOMItem(field, item string) (ok bool, err error) {
	switch {
	case item == "l":
		m.domL = true
	case item == "lw":
		m.domLW = true
	case strings.HasSuffix(item, "w"):
		day := strings.TrimSuffix(item, "w")
		if strings.ContainsAny(day, "*?-/") {
			return true, fieldError(fDOM, field, "%q: W takes a single day, e.g. 15W", item)
		}
		n, err := value(fDOM, field, day)
		if err != nil {
			return true, err
		}
		m.domW |= 1 << uint(n)
	default:
		return false, nil
	}
	return true, nil
}

// parseDOWItem reads cronexpr's day-of-week extras: "Nl" (last weekday N
// of the month) and "N#K" (K-th weekday N, K 1-5). ok is false for a plain
// item.
func (m *matcher) parseDOWItem(field, item string) (ok bool, err error) {
	day, nth, isNth := strings.Cut(item, "#")
	if !isNth {
		if !strings.HasSuffix(item, "l") {
			return false, nil
		}
		day = strings.TrimSuffix(item, "l")
	}
	if strings.ContainsAny(day, "*?-/") {
		return true, fieldError(fDOW, field, "%q: L and # take a single day, e.g. 5L or 1#2", item)
	}
	n, err := value(fDOW, field, day)
	if err != nil {
		return true, err
	}
	n %= 7
	if !isNth {
		m.dowL |= 1 << uint(n)
		return true, nil
	}
	if len(nth) != 1 || nth < "1" || nth > "5" {
		return true, fieldError(fDOW, field, "%q: the week after # must be 1-5 (1#2 is the second Monday)", item)
	}
	k, _ := strconv.Atoi(nth)
	m.dowNth[n] |= 1 << uint(k)
	return true, nil
}
