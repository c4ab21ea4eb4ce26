package schedule

import "time"

// maxSegments bounds the zone periods Next walks through: two per year in a
// DST zone, so beyond the matcher's 400-year horizon. It only guards
// against looping forever.
const maxSegments = 1024

// Next returns the first fire time strictly after `after`, in s.Location(),
// or the zero time if none can be computed (no match within 400 years of
// `after`, which Parse rules out for schedules starting now). Safe for
// concurrent callers; it never blocks and does not allocate.
//
// "@every D" fires at the Unix times divisible by D, whatever the zone and
// DST. Other schedules are matched against the zone's wall clock, with the
// DST rules of Debian cron(8) and cronie:
//
//   - a fixed-time job (neither minute nor hour field starts with "*") whose
//     wall time falls in a spring-forward gap fires once, at the first
//     instant after the gap; in a fall-back overlap it fires once, in the
//     first copy of the repeated hour;
//   - a wildcard job follows the clock: nothing in a gap (no catch-up), and
//     it fires in both copies of a repeated hour.
//
// "@at T" fires once: Next returns T when T is after `after`, else zero.
func (s *Schedule) Next(after time.Time) time.Time {
	if !s.at.IsZero() {
		if s.at.After(after) {
			return s.at.In(s.loc)
		}
		return time.Time{}
	}
	if s.every > 0 {
		return s.nextEvery(after)
	}
	t := s.nextCron(after)
	if t.IsZero() {
		return t
	}
	return t.In(s.loc)
}

// nextEvery returns the first multiple of s.every (in Unix seconds) after
// `after`.
func (s *Schedule) nextEvery(after time.Time) time.Time {
	d := int64(s.every / time.Second)
	sec := after.Unix() // floor, also before 1970
	q := sec / d
	if sec%d < 0 {
		q--
	}
	return time.Unix((q+1)*d, 0).In(s.loc)
}

// nextCron walks the zone's periods of constant UTC offset (segments),
// starting with the one holding `after`. In a segment the wall clock is
// "civil time": the instant plus the offset, read as UTC, where cronexpr
// has no DST. A civil match c maps back to the instant c - offset if it
// lies inside the segment. A match past the segment's end is either in a
// spring-forward gap (fixed-time jobs fire at the transition) or belongs
// to a later segment. For fixed-time jobs a segment that follows a fall
// back skips the civil times the previous segment already covered.
func (s *Schedule) nextCron(after time.Time) time.Time {
	local := after.In(s.loc)
	civFrom := civil(local) // exclusive lower bound on civil matches
	for range maxSegments {
		_, off := local.Zone()
		offset := time.Duration(off) * time.Second
		start, end := local.ZoneBounds()
		if s.fixed && !start.IsZero() {
			if _, prev := start.Add(-time.Nanosecond).In(s.loc).Zone(); prev > off {
				// Civil times before start+prev ran in the first copy.
				if lo := start.Add(time.Duration(prev) * time.Second).UTC().Add(-time.Nanosecond); lo.After(civFrom) {
					civFrom = lo
				}
			}
		}
		c := s.civilNext(civFrom)
		if c.IsZero() {
			return c
		}
		inst := c.Add(-offset)
		if end.IsZero() || inst.Before(end) {
			return inst
		}
		local = end.In(s.loc)
		if s.fixed && c.Before(civil(local)) {
			return end // wall time in a spring-forward gap: first instant after it
		}
		civFrom = civil(local).Add(-time.Nanosecond) // inclusive of the segment start
	}
	return time.Time{}
}

// civil returns the wall clock of t (which carries its zone) as a UTC time.
func civil(t time.Time) time.Time {
	_, off := t.Zone()
	return t.Add(time.Duration(off) * time.Second).UTC()
}

// civilNext returns the first matching civil time strictly after from
// (rounded up to whole seconds), or zero.
func (s *Schedule) civilNext(from time.Time) time.Time { return s.m.next(from) }
