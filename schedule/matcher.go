package schedule

import (
	"math/bits"
	"strings"
	"time"
)

// horizonDays bounds the search for a matching day: one 400-year Gregorian
// cycle, after which the calendar repeats, so a schedule with no match in
// it never fires.
const horizonDays = 400 * 366

// matcher is the compiled form of a cron expression that Next evaluates in
// civil time. It is immutable after Parse, so Next needs no lock. It is
// cronlock's own rather than cronexpr's Expression.Next, which mutates the
// expression (a data race between concurrent callers), allocates on every
// call and stops at 2099.
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

// newMatcher parses six fields (second first). Its errors name the field
// and the fix.
func newMatcher(f []string) (*matcher, error) {
	m := &matcher{domAny: isAny(f[fDOM]), dowAny: isAny(f[fDOW])}
	m.and = isStar(f[fDOM]) || isStar(f[fDOW])
	for idx, set := range [...]*uint64{&m.sec, &m.min, &m.hour, &m.dom, &m.month, &m.dow} {
		if err := m.parseField(idx, f[idx], set); err != nil {
			return nil, err
		}
	}
	if m.dow&(1<<7) != 0 { // 7 is Sunday
		m.dow = m.dow&^(1<<7) | 1
	}
	return m, nil
}

// parseField reads a comma-separated list into set; day-of-month and
// day-of-week items that are not plain (L, W, #) go to their own fields.
func (m *matcher) parseField(idx int, field string, set *uint64) error {
	for _, item := range strings.Split(strings.ToLower(field), ",") {
		var special bool
		var err error
		switch idx {
		case fDOM:
			special, err = m.parseDOMItem(field, item)
		case fDOW:
			special, err = m.parseDOWItem(field, item)
		}
		if err != nil {
			return err
		}
		if special {
			continue
		}
		sp, err := parseSpan(idx, field, item)
		if err != nil {
			return err
		}
		*set |= sp.bits()
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
