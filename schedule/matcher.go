package schedule

import (
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// horizonDays bounds the search for a matching day: one 400-year Gregorian
// cycle, after which the calendar repeats, so a schedule with no match in
// it never fires.
const horizonDays = 400 * 366

// matcher is the compiled form of a cron expression that Next evaluates in
// civil time. It is immutable after Parse, so Next needs no lock. cronexpr
// only validates the syntax: its Next allocates on every call, stops at
// 2099 and mutates the expression (LIBRARY-NOTES §1.9, §1.10).
type matcher struct {
	sec, min uint64 // bits 0-59
	hour     uint64 // bits 0-23
	month    uint64 // bits 1-12
	dom      uint64 // bits 1-31
	domW     uint64 // bits 1-31: "15W", nearest weekday in the month
	domL     bool   // "L": last day of the month
	domLW    bool   // "LW": last weekday of the month
	dow      uint64 // bits 0-6
	dowL     uint64 // bits 0-6: "5L", last Friday of the month
	dowNth   [7]uint64
	// How day-of-month and day-of-week combine (crontab(5) as cronie
	// implements it): a field that is exactly "*"/"?" defers to the other;
	// otherwise both must match if either starts with "*", else either.
	domAny, dowAny, and bool
}

// newMatcher builds a matcher from six fields (second first); dow is the
// rewritten day-of-week field (see rewriteDOW).
func newMatcher(f []string, dow string) (*matcher, error) {
	m := &matcher{domAny: isAny(f[3]), dowAny: isAny(f[5])}
	m.and = isStar(f[3]) || isStar(f[5])
	var err error
	for _, p := range []struct {
		set  *uint64
		idx  int
		lo   int
		hi   int
		text string
	}{{&m.sec, 0, 0, 59, f[0]}, {&m.min, 1, 0, 59, f[1]}, {&m.hour, 2, 0, 23, f[2]}, {&m.month, 4, 1, 12, f[4]}} {
		if *p.set, err = parseSet(p.idx, p.text, p.lo, p.hi); err != nil {
			return nil, err
		}
	}
	if err = m.parseDOM(f[3]); err != nil {
		return nil, err
	}
	return m, m.parseDOW(dow)
}

// parseSet reads a list of "*", "?", "N", "A-B", "N/S", "A-B/S", "*/S" into a
// bit set; "N/S" runs from N to hi, as in cronexpr.
func parseSet(idx int, field string, lo, hi int) (uint64, error) {
	var set uint64
	for _, item := range strings.Split(strings.ToLower(field), ",") {
		base, stepStr, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepStr)
			if err != nil || n < 1 {
				return 0, fieldError(idx, field, "bad step %q", stepStr)
			}
			step = n
		}
		a, b := lo, hi
		if !isAny(base) {
			as, bs, isRange := strings.Cut(base, "-")
			var okA, okB bool
			a, okA = fieldValue(idx, as)
			b, okB = a, true
			if isRange {
				b, okB = fieldValue(idx, bs)
			} else if hasStep {
				b = hi
			}
			if !okA || !okB || a < lo || b > hi || a > b {
				return 0, fieldError(idx, field, "bad item %q", item)
			}
		}
		for v := a; v <= b; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

// parseDOM reads the day-of-month field: numbers, ranges and steps plus
// cronexpr's L, LW and NW.
func (m *matcher) parseDOM(field string) error {
	var plain []string
	for _, item := range strings.Split(strings.ToLower(field), ",") {
		switch {
		case item == "l":
			m.domL = true
		case item == "lw":
			m.domLW = true
		case strings.HasSuffix(item, "w"):
			n, ok := fieldValue(3, strings.TrimSuffix(item, "w"))
			if !ok || n < 1 || n > 31 {
				return fieldError(3, field, "bad item %q", item)
			}
			m.domW |= 1 << n
		default:
			plain = append(plain, item)
		}
	}
	if len(plain) == 0 {
		return nil
	}
	var err error
	m.dom, err = parseSet(3, strings.Join(plain, ","), 1, 31)
	return err
}

// parseDOW reads a rewritten day-of-week field: days 0-6, "*", "?", and
// cronexpr's "NL" and "N#K" (N 0-7, K 1-5).
func (m *matcher) parseDOW(field string) error {
	if isAny(field) {
		m.dow = 0x7f
		return nil
	}
	for _, item := range strings.Split(field, ",") {
		day, nth, isNth := strings.Cut(item, "#")
		last := !isNth && strings.HasSuffix(day, "l")
		n, ok := fieldValue(5, strings.TrimSuffix(day, "l"))
		k, okK := 0, true
		if isNth {
			k, okK = fieldValue(0, nth)
		}
		if !ok || n < 0 || n > 7 || !okK || k < 0 || k > 5 || (isNth && k == 0) {
			return fieldError(5, field, "bad item %q", item)
		}
		switch n %= 7; {
		case isNth:
			m.dowNth[n] |= 1 << k
		case last:
			m.dowL |= 1 << n
		default:
			m.dow |= 1 << n
		}
	}
	return nil
}

// next returns the first civil time strictly after from (after rounding it
// up to a whole second, as cronexpr does) that matches, or the zero time if
// none does within horizonDays.
func (m *matcher) next(from time.Time) time.Time {
	t := from.Truncate(time.Second).Add(time.Second)
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	wd := int(t.Weekday())
	for range horizonDays {
		last := daysIn(mo, y)
		if m.month&(1<<uint(mo)) == 0 {
			d, wd = last, (wd+last-d)%7 // skip the rest of the month
		} else if m.dayMatches(d, wd, last) {
			if hh, mm, ss, ok := m.clock(h, mi, s); ok {
				return time.Date(y, mo, d, hh, mm, ss, 0, time.UTC)
			}
		}
		d, wd, h, mi, s = d+1, (wd+1)%7, 0, 0, 0
		if d > last {
			d, mo = 1, mo+1
			if mo > time.December {
				mo, y = time.January, y+1
			}
		}
	}
	return time.Time{}
}

// clock returns the first matching time of day at or after h:mi:s.
func (m *matcher) clock(h, mi, s int) (int, int, int, bool) {
	for hh := nextBit(m.hour, h); hh >= 0; hh = nextBit(m.hour, hh+1) {
		if hh != h {
			return hh, nextBit(m.min, 0), nextBit(m.sec, 0), true
		}
		for mm := nextBit(m.min, mi); mm >= 0; mm = nextBit(m.min, mm+1) {
			if mm != mi {
				return hh, mm, nextBit(m.sec, 0), true
			}
			if ss := nextBit(m.sec, s); ss >= 0 {
				return hh, mm, ss, true
			}
		}
	}
	return 0, 0, 0, false
}

// nextBit returns the lowest set bit of set at or above from, or -1.
func nextBit(set uint64, from int) int {
	if from > 63 {
		return -1
	}
	if rest := set &^ (1<<uint(from) - 1); rest != 0 {
		return bits.TrailingZeros64(rest)
	}
	return -1
}

// dayMatches applies the day-of-month / day-of-week rule to day d of a
// month of `last` days, d falling on weekday wd (0 = Sunday).
func (m *matcher) dayMatches(d, wd, last int) bool {
	switch {
	case m.domAny:
		return m.dowMatches(d, wd, last)
	case m.dowAny:
		return m.domMatches(d, wd, last)
	case m.and:
		return m.domMatches(d, wd, last) && m.dowMatches(d, wd, last)
	}
	return m.domMatches(d, wd, last) || m.dowMatches(d, wd, last)
}

func (m *matcher) domMatches(d, wd, last int) bool {
	if m.dom&(1<<uint(d)) != 0 || (m.domL && d == last) {
		return true
	}
	if m.domLW && d == workday(last, (wd+last-d)%7, last) {
		return true
	}
	for w := m.domW; w != 0; w &= w - 1 {
		if v := bits.TrailingZeros64(w); v <= last && workday(v, ((wd+v-d)%7+7)%7, last) == d {
			return true
		}
	}
	return false
}

func (m *matcher) dowMatches(d, wd, last int) bool {
	return m.dow&(1<<uint(wd)) != 0 ||
		(m.dowL&(1<<uint(wd)) != 0 && d+7 > last) ||
		m.dowNth[wd]&(1<<uint((d-1)/7+1)) != 0
}

// workday returns the weekday nearest day v (weekday vwd) without leaving
// the month, as cronexpr's "W": Saturday -> Friday (or Monday the 3rd for
// the 1st), Sunday -> Monday (or Friday for the last day).
func workday(v, vwd, last int) int {
	switch {
	case vwd == 6 && v > 1:
		return v - 1
	case vwd == 6:
		return v + 2
	case vwd == 0 && v < last:
		return v + 1
	case vwd == 0:
		return v - 2
	}
	return v
}

func daysIn(m time.Month, y int) int {
	switch m {
	case time.February:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}
