package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// fieldNames names the fields of the 6-field form (leading seconds), for
// error messages. A 5-field expression uses fieldNames[1:].
var fieldNames = [...]string{"second", "minute", "hour", "day-of-month", "month", "day-of-week"}

// fieldMax is the largest value each field accepts (day-of-week accepts 7 =
// Sunday, as in crontab(5)).
var fieldMax = [...]int{59, 59, 23, 31, 12, 7}

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

// checkRanges rejects reversed ranges ("30-10", "dec-jan") in a field other
// than day-of-week: cronexpr accepts them and then panics or never fires
// (LIBRARY-NOTES §1.3). Items it cannot read are left for cronexpr to reject.
func checkRanges(idx int, field string) error {
	for _, item := range strings.Split(strings.ToLower(field), ",") {
		base, _, _ := strings.Cut(item, "/")
		lo, hi, ok := strings.Cut(base, "-")
		if !ok {
			continue
		}
		a, okA := fieldValue(idx, lo)
		b, okB := fieldValue(idx, hi)
		if okA && okB && a > b {
			return fieldError(idx, field, "range %s runs backwards (%d > %d): write the smaller value first, "+
				"or split a wrap-around into two ranges such as %d-%d,%d-%d",
				base, a, b, a, fieldMax[idx], fieldMin(idx), b)
		}
	}
	return nil
}

func fieldMin(idx int) int {
	if idx == 3 || idx == 4 {
		return 1
	}
	return 0
}

// fieldValue reads one value of field idx: a decimal number or, for month
// and day-of-week, a name. It does not check bounds.
func fieldValue(idx int, tok string) (int, bool) {
	if n, err := strconv.Atoi(tok); err == nil && tok[0] != '+' && tok[0] != '-' {
		return n, true
	}
	switch idx {
	case 4:
		n, ok := monthNames[tok]
		return n, ok
	case 5:
		n, ok := dowNames[tok]
		return n, ok
	}
	return 0, false
}

// rewriteDOW expands a day-of-week field into an explicit list of days 0-6 so
// that 7 means Sunday in every form (7, 5-7, SAT-SUN, 1-7/2, MON-SUN), which
// cronexpr gets wrong for ranges ending at 7/SUN (LIBRARY-NOTES §1.4).
// Items with L or # ("5L", "1#2") are passed through for cronexpr.
func rewriteDOW(field string) (string, error) {
	if isAny(field) {
		return field, nil
	}
	var days [7]bool
	var kept []string
	for _, item := range strings.Split(strings.ToLower(field), ",") {
		if strings.Contains(item, "#") || strings.HasSuffix(item, "l") {
			kept = append(kept, item)
			continue
		}
		if err := expandDOWItem(field, item, &days); err != nil {
			return "", err
		}
	}
	out := kept[:0:0]
	for d, on := range days {
		if on {
			out = append(out, strconv.Itoa(d))
		}
	}
	return strings.Join(append(out, kept...), ","), nil
}

// expandDOWItem marks the days of one list item: "*", "N", "A-B", each
// optionally with "/step". N/step runs to 7, as "*" runs 0-7 in cronie.
func expandDOWItem(field, item string, days *[7]bool) error {
	const idx = 5
	base, stepStr, hasStep := strings.Cut(item, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepStr)
		if err != nil || n < 1 || n > 7 || stepStr[0] == '+' {
			return fieldError(idx, field, "step %q must be a number from 1 to 7", stepStr)
		}
		step = n
	}
	lo, hi := 0, 7
	switch {
	case isAny(base):
	case strings.Contains(base, "-"):
		a, b, _ := strings.Cut(base, "-")
		var err error
		if lo, hi, err = dowRange(field, a, b); err != nil {
			return err
		}
	default:
		n, err := dowValue(field, base)
		if err != nil {
			return err
		}
		lo, hi = n, n
		if hasStep {
			hi = 7
		}
	}
	for d := lo; d <= hi; d += step {
		days[d%7] = true
	}
	return nil
}

// dowRange reads "A-B". An end of SUN/SUNDAY after a later day means 7, so
// SAT-SUN is Saturday and Sunday.
func dowRange(field, a, b string) (lo, hi int, err error) {
	if lo, err = dowValue(field, a); err != nil {
		return 0, 0, err
	}
	if hi, err = dowValue(field, b); err != nil {
		return 0, 0, err
	}
	if hi == 0 && lo > 0 && (b == "sun" || b == "sunday") {
		hi = 7
	}
	if lo > hi {
		return 0, 0, fieldError(5, field, "range %s-%s runs backwards: write the earlier day first "+
			"(0 and 7 are both Sunday, e.g. 5-7 for Fri-Sun)", a, b)
	}
	return lo, hi, nil
}

func dowValue(field, tok string) (int, error) {
	n, ok := fieldValue(5, tok)
	if !ok || n < 0 || n > 7 {
		return 0, fieldError(5, field, "%q is not a day: use 0-7 (0 and 7 are Sunday) or SUN-SAT", tok)
	}
	return n, nil
}
