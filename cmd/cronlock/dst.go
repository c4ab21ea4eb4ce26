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

// dstListMax is how many DST notices -validate prints one by one; more
// are summarised, one line per zone and transition (dstSummary), unless
// -all-notices.
const dstListMax = 10

// dstNotices returns one notice per fixed-time job of cfg whose fire
// times the next DST transition within a year of now changes (path
// `jobs[i] "name": schedule`), in job order. Jobs in UTC, wildcard and
// @every jobs get none (schedule.NextDSTEffect).
func dstNotices(cfg *config.Config, now time.Time) []config.Problem {
	var out []config.Problem
	for _, d := range dstEffects(cfg, now) {
		out = append(out, d.notice())
	}
	return out
}

// dstJob is one job that a DST transition affects.
type dstJob struct {
	index  int
	name   string
	loc    *time.Location
	effect schedule.DSTEffect
}

// notice is the job's DST notice.
func (d dstJob) notice() config.Problem {
	return config.Problem{Path: fmt.Sprintf("jobs[%d] %q: schedule", d.index, d.name), Msg: dstMessage(d.effect, d.loc)}
}

// dstEffects returns the jobs of cfg that the next DST transition of
// their zone within a year of now affects, in job order.
func dstEffects(cfg *config.Config, now time.Time) []dstJob {
	var out []dstJob
	for i := range cfg.Jobs {
		j := &cfg.Jobs[i]
		if j.Sched == nil {
			continue
		}
		if e, ok := j.Sched.NextDSTEffect(now, now.Add(dstHorizon)); ok {
			out = append(out, dstJob{index: i, name: j.Name, loc: j.Sched.Location(), effect: e})
		}
	}
	return out
}

// dstSummary returns the DST notices -validate prints as text: every one
// when there are at most dstListMax (or all is set), else one per zone
// and transition, naming the first jobs and counting the others, and a
// last one saying how to list them all. -json always has every notice.
func dstSummary(cfg *config.Config, now time.Time, all bool) []config.Problem {
	jobs := dstEffects(cfg, now)
	if all || len(jobs) <= dstListMax {
		out := make([]config.Problem, 0, len(jobs))
		for _, d := range jobs {
			out = append(out, d.notice())
		}
		return out
	}
	type key struct {
		zone string
		at   time.Time
	}
	var order []key
	groups := map[key][]dstJob{}
	for _, d := range jobs {
		k := key{d.loc.String(), d.effect.Transition.UTC()}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], d)
	}
	out := make([]config.Problem, 0, len(order)+1)
	for _, k := range order {
		g := groups[k]
		e := g[0].effect
		names := make([]string, 0, 3)
		for _, d := range g[:min(len(g), 3)] {
			names = append(names, fmt.Sprintf("jobs[%d] %q", d.index, d.name))
		}
		list := strings.Join(names, ", ")
		if more := len(g) - len(names); more > 0 {
			list += fmt.Sprintf(" and %d more", more)
		}
		what := "go back from %s to %s: %d %s fire at local times that happen twice that day (%s); " +
			"cronlock runs each of them once, at the first copy (cronie's rule)"
		if e.Gap {
			what = "go forward from %s to %s: %d %s fire at local times that do not exist that day (%s); " +
				"cronlock runs each of them once instead, at the first instant after the gap (cronie's rule)"
		}
		out = append(out, config.Problem{Path: "DST " + k.zone, Msg: fmt.Sprintf("on %s clocks in %s "+what,
			e.Transition.Format("Mon 2006-01-02"), k.zone, wallClock(e.From), wallClock(e.To), len(g), plural(len(g), "job", "jobs"), list)})
	}
	out = append(out, config.Problem{Path: "DST", Msg: fmt.Sprintf("%d jobs have a fire time that a DST transition changes, "+
		"summarised above by zone and transition; cronlock -validate -all-notices lists each with its times "+
		"(-validate -json always does)", len(jobs))})
	return out
}

// dstNotice describes the next DST transition in (now, now+1 year) that
// changes s's fire times (dstMessage); "" when there is none or s is nil.
func dstNotice(s *schedule.Schedule, now time.Time) string {
	if s == nil {
		return ""
	}
	e, ok := s.NextDSTEffect(now, now.Add(dstHorizon))
	if !ok {
		return ""
	}
	return dstMessage(e, s.Location())
}

// dstMessage describes DST transition e of zone loc that changes a
// schedule's fire times: which local times do not exist or repeat, when,
// and what cronlock does (the rule of Debian cron(8) and cronie, see
// schedule.Schedule.Next).
func dstMessage(e schedule.DSTEffect, loc *time.Location) string {
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
