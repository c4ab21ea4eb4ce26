package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/schedule"
)

// dstHorizon is how far ahead DST warnings look: "the coming year".
const dstHorizon = 365 * 24 * time.Hour

// dstNotices returns one notice per fixed-time job of cfg whose fire
// times the next DST transition within a year of now changes (path
// `jobs[i] "name": schedule`), in job order. Jobs in UTC, wildcard and
// @every jobs get none (schedule.NextDSTEffect).
func dstNotices(cfg *config.Config, now time.Time) []config.Problem {
	var out []config.Problem
	for i := range cfg.Jobs {
		j := &cfg.Jobs[i]
		if msg := dstNotice(j.Sched, now); msg != "" {
			out = append(out, config.Problem{Path: fmt.Sprintf("jobs[%d] %q: schedule", i, j.Name), Msg: msg})
		}
	}
	return out
}

// dstNotice describes the next DST transition in (now, now+1 year) that
// changes s's fire times: which local times do not exist or repeat, when,
// and what cronlock does (the rule of Debian cron(8) and cronie, see
// schedule.Schedule.Next). "" when there is none or s is nil.
func dstNotice(s *schedule.Schedule, now time.Time) string {
	if s == nil {
		return ""
	}
	e, ok := s.NextDSTEffect(now, now.Add(dstHorizon))
	if !ok {
		return ""
	}
	loc := s.Location()
	wall := wallList(e)
	day := e.Transition.Format("Mon 2006-01-02")
	if e.Gap {
		return fmt.Sprintf("DST: on %s clocks in %s go forward from %s to %s, so %s %s not exist that day; "+
			"cronlock runs the job once instead, at %s (%s), the first instant after the gap (cronie's rule); "+
			"to avoid it schedule the job outside %s–%s local time or in UTC",
			day, loc, wallClock(e.From), wallClock(e.To), wall, plural(e.Affected, "does", "do"),
			wallClock(e.Fire), e.Fire.UTC().Format(time.RFC3339), e.From.Format("15:04"), e.To.Format("15:04"))
	}
	_, offB := e.From.Zone()
	_, offA := e.To.Zone()
	second := e.Fire.Add(time.Duration(offB-offA) * time.Second) // the repeated copy, which does not fire
	return fmt.Sprintf("DST: on %s clocks in %s go back from %s to %s, so %s %s twice that day; "+
		"cronlock runs the job once, at %s (%s), and not again at %s (%s) (cronie's rule); "+
		"to avoid it schedule the job outside %s–%s local time or in UTC",
		day, loc, wallClock(e.From), wallClock(e.To), wall, plural(e.Affected, "happens", "happen"),
		wallClock(e.Fire), e.Fire.UTC().Format(time.RFC3339), wallClock(second.In(loc)), second.UTC().Format(time.RFC3339),
		e.To.Format("15:04"), e.From.Format("15:04"))
}

// wallClock renders a wall time with its zone abbreviation: "02:00 EST",
// with seconds when they are not zero.
func wallClock(t time.Time) string {
	if t.Second() != 0 {
		return t.Format("15:04:05 MST")
	}
	return t.Format("15:04 MST")
}

// wallList renders the affected wall times: "02:30", "02:00 and 02:30",
// "02:00:15, 02:01:15, 02:02:15 and 57 more".
func wallList(e schedule.DSTEffect) string {
	f := "15:04"
	for _, w := range e.WallTimes {
		if w.Second() != 0 {
			f = "15:04:05"
		}
	}
	parts := make([]string, len(e.WallTimes))
	for i, w := range e.WallTimes {
		parts[i] = w.Format(f)
	}
	if more := e.Affected - len(parts); more > 0 {
		return strings.Join(parts, ", ") + fmt.Sprintf(" and %d more", more)
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// plural returns one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
