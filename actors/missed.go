package actors

import (
	"time"

	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
)

// maxMissedCount caps how many missed slots one report counts, so that a
// per-second job down for a month costs no more than this many Next calls;
// beyond it the warning says "at least".
const maxMissedCount = 10_000

// maxLookback bounds how far back latestSlot searches: 200 years, near the
// longest time.Duration (292 years).
const maxLookback = 200 * 365 * 24 * time.Hour

// MissedCheckFor returns the missed-slot check of job cfg at now
// (docs/protocol.md, "Missed slots"): the latest slot whose fire time
// (slot + jitter) has passed, and the latest whose fire time lies at least
// settle (the claim timeout) in the past, so that any live node's claim of
// it has been answered. seen is the highest slot this node has seen decided
// (a claim answer's state slot, Unix seconds). ok is false when there is
// nothing to check: the job is disabled (its slots are skipped "disabled",
// never claimed), no slot has fired yet, or seen is at or after the certain
// slot, so that the report could only answer "nothing missed" (its script
// reports only when the last decided slot, seen included, is older than
// certain) and would cost a script call for nothing — after a Redis outage
// in a herd, one per job per node. Pure function: it only calls
// cfg.Sched.Next.
func MissedCheckFor(cfg config.Job, seen int64, now time.Time, settle time.Duration) (MissedCheck, bool) {
	if !cfg.Enabled || cfg.Sched == nil {
		return MissedCheck{}, false
	}
	latest := latestFired(cfg.Sched, cfg.Name, cfg.Jitter, now)
	if latest.IsZero() {
		return MissedCheck{}, false
	}
	certain := latest
	if limit := now.Add(-settle); latest.Add(jitterFor(cfg.Name, latest, cfg.Jitter)).After(limit) {
		if certain = latestFired(cfg.Sched, cfg.Name, cfg.Jitter, limit); certain.IsZero() {
			return MissedCheck{}, false
		}
	}
	if seen >= certain.Unix() {
		return MissedCheck{}, false
	}
	return MissedCheck{Job: cfg.Name, Seen: seen, Certain: certain.Unix(), Latest: latest.Unix()}, true
}

// latestFired is the latest slot whose fire time (slot + its jitter) is not
// after at, or the zero time.
func latestFired(sched Nexter, job string, jitter time.Duration, at time.Time) time.Time {
	s := latestSlot(sched, at)
	for range 1000 { // jitter longer than the interval passes over a few slots
		if s.IsZero() || !s.Add(jitterFor(job, s, jitter)).After(at) {
			return s
		}
		s = latestSlot(sched, s.Add(-time.Second))
	}
	return time.Time{}
}

// latestSlot is the latest slot of sched not after at, or the zero time
// when there is none within maxLookback. Nexter only goes forward, so it
// looks back by the schedule's interval after at (doubling until a slot is
// found), walks forward a few slots, and bisects down to one second (slots
// are whole seconds) when the walk is not enough: a handful of Next calls
// for a regular schedule, O(log) for any.
func latestSlot(sched Nexter, at time.Time) time.Time {
	fired := func(from time.Time) bool { n := sched.Next(from); return !n.IsZero() && !n.After(at) }
	step := time.Second
	if n1 := sched.Next(at); !n1.IsZero() {
		if n2 := sched.Next(n1); !n2.IsZero() {
			step = max(n2.Sub(n1), time.Second)
		}
	}
	hi := at // invariant: no slot in (hi, at]
	for d := step; d <= maxLookback; d *= 2 {
		lo := at.Add(-d)
		if !fired(lo) {
			hi = lo
			continue
		}
		s := sched.Next(lo)
		for range 8 {
			n := sched.Next(s)
			if n.IsZero() || n.After(at) {
				return s
			}
			s = n
		}
		for lo = s.Add(-time.Nanosecond); hi.Sub(lo) > time.Second; { // invariant: a slot in (lo, hi]
			if mid := lo.Add(hi.Sub(lo) / 2); fired(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		return sched.Next(lo)
	}
	return time.Time{}
}

// reportMissed logs one warning for the slots m names and counts them in
// cronlock_missed_slots_total (at most maxMissedCount; the warning then
// says "at least").
func (j *Job) reportMissed(m MissedSlots) {
	last := time.Unix(m.Last, 0)
	first := j.cfg.Sched.Next(time.Unix(m.After, 0))
	n, capped := 0, false
	for s := first; !s.IsZero() && !s.After(last); s = j.cfg.Sched.Next(s) {
		if n == maxMissedCount {
			capped = true
			break
		}
		n++
	}
	if n == 0 {
		return
	}
	j.deps.Metrics.SlotsMissed(j.cfg.Name, n)
	const why = "no node claimed them (every node was down, could not reach redis or refused it as " +
		"redis_unsafe, or they were skipped locally as disabled or overlap_local)"
	msg := "slots missed: " + why
	if capped {
		msg = "slots missed (at least this many): " + why
	}
	j.deps.Log.Warn(msg, zap.String("job", j.cfg.Name), zap.Int("missed", n), zap.Int64("first_slot", first.Unix()),
		zap.Int64("last_slot", m.Last), zap.Int64("last_claimed_slot", m.After))
}
