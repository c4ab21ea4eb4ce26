package schedule

import "time"

// InWindow returns a copy of s that fires only in its active window
// [from, until): Next skips the fire times before from and returns the
// zero time for those at or after until. A zero bound is open (no
// active_from, no active_until). s itself is unchanged; the copy shares
// its parsed expression and is as safe for concurrent use.
func (s *Schedule) InWindow(from, until time.Time) *Schedule {
	base := s
	if s.base != nil {
		base = s.base
	}
	w := *base
	w.base, w.from, w.until = base, from, until
	return &w
}

// Window returns the active window set by InWindow; both are zero when s
// has none. A zero bound is open.
func (s *Schedule) Window() (from, until time.Time) { return s.from, s.until }

// windowNext is Next for a schedule with an active window: the base
// schedule's first fire time after max(after, from−1ns), unless it is at
// or after until.
func (s *Schedule) windowNext(after time.Time) time.Time {
	if !s.from.IsZero() && after.Before(s.from) {
		after = s.from.Add(-time.Nanosecond)
	}
	t := s.base.Next(after)
	if !s.until.IsZero() && !t.Before(s.until) {
		return time.Time{}
	}
	return t
}
