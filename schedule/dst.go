package schedule

import "time"

// maxDSTWallTimes bounds the wall times a DSTEffect lists (a 6-field job
// with a seconds wildcard has 3600 of them in a one-hour gap).
const maxDSTWallTimes = 3

// DSTEffect is how one DST transition of the schedule's zone changes the
// fire times of a fixed-time schedule (see Next for the rules, those of
// Debian cron(8) and cronie).
type DSTEffect struct {
	// Transition is the instant the zone's UTC offset changes, in the
	// schedule's zone (its offset is the new one).
	Transition time.Time
	// Gap is true for a spring-forward transition (wall times between the
	// old and the new offset do not exist that day), false for a fall-back
	// one (those wall times happen twice).
	Gap bool
	// From and To are the wall clock just before and just after the
	// transition (e.g. 02:00 EST and 03:00 EDT), in the zone.
	From, To time.Time
	// WallTimes are the schedule's wall times (civil times, read as UTC)
	// that the transition affects, at most maxDSTWallTimes; Affected
	// counts all of them.
	WallTimes []time.Time
	Affected  int
	// Fire is what cronlock does: in a gap the one fire time that replaces
	// them all (the first instant after the gap); in an overlap the first
	// copy of the first affected wall time, the one that fires (the second
	// copy, Fire plus the offset change, does not).
	Fire time.Time
}

// NextDSTEffect returns the first DST transition of the schedule's zone in
// (from, until) that changes its fire times, and true; or false when there
// is none. Only fixed-time schedules (neither minute nor hour field starts
// with "*") are affected in this sense: a wildcard schedule follows the
// clock, and "@every" ignores DST, so both always return false, as does a
// zone without transitions (UTC). A pure function of its arguments; it
// never blocks. With an active window (InWindow) only transitions inside
// it count. It walks the zone's transitions with time.Time.ZoneBounds,
// two a year in a DST zone.
func (s *Schedule) NextDSTEffect(from, until time.Time) (DSTEffect, bool) {
	if s.every > 0 || !s.fixed {
		return DSTEffect{}, false
	}
	if !s.from.IsZero() && from.Before(s.from) {
		from = s.from // a transition outside the active window changes nothing
	}
	if !s.until.IsZero() && until.After(s.until) {
		until = s.until
	}
	t := from.In(s.loc)
	for range maxSegments {
		_, end := t.ZoneBounds()
		if end.IsZero() || !end.Before(until) {
			return DSTEffect{}, false
		}
		if e, ok := s.dstEffectAt(end); ok {
			return e, true
		}
		t = end.In(s.loc)
	}
	return DSTEffect{}, false
}

// dstEffectAt returns the effect of the transition at instant tr, if the
// schedule has a wall time in the civil times it skips or repeats.
func (s *Schedule) dstEffectAt(tr time.Time) (DSTEffect, bool) {
	before := tr.Add(-time.Nanosecond).In(s.loc)
	after := tr.In(s.loc)
	nameB, offB := before.Zone()
	_, offA := after.Zone()
	if offA == offB {
		return DSTEffect{}, false // only the abbreviation changed
	}
	e := DSTEffect{Transition: after, Gap: offA > offB, From: tr.In(time.FixedZone(nameB, offB)), To: after}
	// The affected civil times are [lo, hi): the skipped ones in a gap, the
	// repeated ones in an overlap.
	lo, hi := civil(before).Add(time.Nanosecond), civil(after)
	if !e.Gap {
		lo, hi = hi, lo
	}
	lo = lo.Truncate(time.Second)
	for c := s.civilNext(lo.Add(-time.Nanosecond)); !c.IsZero() && c.Before(hi); c = s.civilNext(c) {
		if e.Affected < maxDSTWallTimes {
			e.WallTimes = append(e.WallTimes, c)
		}
		e.Affected++
	}
	if e.Affected == 0 {
		return DSTEffect{}, false
	}
	if e.Gap {
		e.Fire = s.Next(tr.Add(-time.Nanosecond))
	} else {
		first := e.WallTimes[0].Add(-time.Duration(offB) * time.Second)
		e.Fire = s.Next(first.Add(-time.Nanosecond))
	}
	return e, true
}
