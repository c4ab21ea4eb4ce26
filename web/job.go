package web

import (
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/redislock"
)

// Limits of the job page.
const (
	jobOccurrences = 100 // occurrences listed (and drawn)
	jobNext        = 10  // next fire times
	jobEvents      = 100 // events read to find pause notes
)

// jobPage is the job page's data.
type jobPage struct {
	Status   api.JobStatus
	Row      string // its status (stOK, …)
	Words    string // the schedule in words
	Next     []nextRun
	DST      string // how the next DST transition changes its fire times; "" = it does not
	Occ      []occRow
	Timeline template.HTML
	Did      string // the change just made: paused, resumed, run
	Events   []api.Event
	Overlap  string
	Timeout  time.Duration
}

// nextRun is one next fire time; Note says the zone's offset changed since
// the previous one.
type nextRun struct {
	At   time.Time
	Note string
}

// occRow is one occurrence of the list, with its answer to "ran where,
// with what result" or "why didn't it run".
type occRow struct {
	ledger.Occurrence
	At     time.Time
	Delay  time.Duration
	Dur    time.Duration
	Answer string
	Class  string // the result's CSS class
}

// job answers GET /ui/jobs/{job}.
func (s *server) job(w http.ResponseWriter, r *http.Request, a access) {
	j, ok := s.pathJob(w, r)
	if !ok {
		return
	}
	st, ctx, cancel, ok := s.storeFor(w, r)
	if !ok {
		return
	}
	defer cancel()
	now := s.o.Now()
	rows, err := api.Jobs(ctx, st, []config.Job{j}, now)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	occ, err := api.Occurrences(ctx, st, j.Name, api.OccurrenceQuery{To: now.Unix(), Limit: jobOccurrences})
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	evs, err := api.Events(ctx, st, j.Name, jobEvents, now)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	row := jobRow{JobStatus: rows[0]}
	p := jobPage{Status: rows[0], Row: jobStatus(&j, row.JobStatus), Words: describe(j.Sched, j.Schedule), Events: evs,
		Did: didTexts[r.URL.Query().Get("did")], Overlap: j.Overlap, Timeout: j.Timeout}
	p.Next, p.DST = nextRuns(&j, now)
	for _, o := range occ {
		p.Occ = append(p.Occ, newOccRow(o, evs, now))
	}
	p.Timeline = timeline(p.Occ, now)
	if len(p.Events) > 10 {
		p.Events = p.Events[:10]
	}
	s.render(w, r, http.StatusOK, "job", a, j.Name, p)
}

// nextRuns returns the job's next jobNext fire times, each noting a change
// of the zone's UTC offset since the one before (or since now), and the
// DST notice of the first transition among them that changes its fire
// times (schedule.NextDSTEffect).
func nextRuns(j *config.Job, now time.Time) ([]nextRun, string) {
	var out []nextRun
	if j.Sched == nil {
		return nil, ""
	}
	prev := now.In(j.Location)
	for t := j.Sched.Next(now); !t.IsZero() && len(out) < jobNext; t = j.Sched.Next(t) {
		t = t.In(j.Location)
		n := nextRun{At: t}
		pn, po := prev.Zone()
		if tn, to := t.Zone(); to != po {
			n.Note = fmt.Sprintf("DST: clocks in %s change before this one (%s, UTC%s → %s, UTC%s)", j.Location, pn, offset(po), tn, offset(to))
		}
		out, prev = append(out, n), t
	}
	if len(out) == 0 {
		return out, ""
	}
	e, ok := j.Sched.NextDSTEffect(now, out[len(out)-1].At.Add(time.Second))
	if !ok {
		return out, ""
	}
	verb := "go back; the wall times that happen twice run once, at the first copy"
	if e.Gap {
		verb = "go forward; the wall times that do not exist that day run once, at the first instant after the gap"
	}
	return out, fmt.Sprintf("On %s clocks in %s %s (%d affected fire %s; it fires at %s). Rule of Debian cron(8) and cronie.",
		e.Transition.Format("Mon 2006-01-02"), j.Location, verb, e.Affected, plural(e.Affected, "time", "times"),
		e.Fire.Format("15:04:05 MST"))
}

// offset formats a UTC offset in seconds as +hh:mm.
func offset(sec int) string {
	sign := "+"
	if sec < 0 {
		sign, sec = "-", -sec
	}
	return fmt.Sprintf("%s%02d:%02d", sign, sec/3600, sec%3600/60)
}

// plural picks one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// newOccRow answers, for occurrence o, "ran where, with what result" or
// "why didn't it run"; a pause skip names the pause's note, found among
// the job's events (newest first).
func newOccRow(o ledger.Occurrence, evs []api.Event, now time.Time) occRow {
	row := occRow{Occurrence: o, At: occurrenceTime(o), Delay: startDelay(o), Class: o.Status}
	if o.Started > 0 {
		end := now
		if o.Finished > 0 {
			end = time.UnixMilli(o.Finished)
		}
		row.Dur = end.Sub(time.UnixMilli(o.Started))
	}
	switch o.Status {
	case "ran":
		row.Class = o.Result
		row.Answer = fmt.Sprintf("ran on %s: %s in %s", o.Node, resultText(o), roundDur(row.Dur))
		if o.Attempts > 1 {
			row.Answer += fmt.Sprintf(", %d attempts", o.Attempts)
		}
	case "claimed":
		row.Class = "running"
		row.Answer = "running on " + o.Node
		if o.Started > 0 {
			row.Answer += " for " + roundDur(row.Dur)
		}
	case "queued":
		row.Answer = "queued behind the run in progress (overlap: queue)"
	case "skipped":
		row.Answer = "not run: " + skipText(o.Reason, o.Node)
		if strings.HasPrefix(o.Reason, "paused") {
			if e, ok := pauseAt(evs, row.At); ok {
				row.Answer += pauseText(e.By, e.Note)
			}
		}
	case "missed":
		row.Answer = "missed: " + o.Reason
	default:
		row.Answer = o.Status + " " + o.Reason
	}
	return row
}

// skipReasons say in words why a slot was skipped (docs/protocol.md,
// "Skip reasons").
var skipReasons = map[string]string{
	"overlap":        "the previous run still held the lease (overlap: skip)",
	"paused":         "the job was paused",
	"max_runs":       "the job reached max_runs",
	"state_lost":     "Redis had lost the job's state",
	"expired":        "its catch-up window had passed",
	"lock_lost":      "the lease or answer window ran out before the command started",
	"not_replicated": "the claim was not acknowledged by enough replicas",
}

// skipText is a skip reason in words, with the raw reason kept.
func skipText(reason, node string) string {
	key, _, _ := strings.Cut(reason, ":")
	text, ok := skipReasons[key]
	if !ok {
		text = reason
	} else {
		text += " [" + reason + "]"
	}
	if node != "" {
		text += ", decided by " + node
	}
	return text
}

// pauseAt returns the pause event in force at t: the newest pause or
// resume event at or before t, when it is a pause.
func pauseAt(evs []api.Event, t time.Time) (api.Event, bool) {
	for _, e := range evs { // newest first
		if e.At.After(t) {
			continue
		}
		switch e.Type {
		case redislock.EventPause:
			return e, true
		case redislock.EventResume, api.EventAutoResume:
			return api.Event{}, false
		}
	}
	return api.Event{}, false
}

// pauseText is " (by B: "note")" for a pause.
func pauseText(by, note string) string {
	s := " (by " + by
	if note != "" {
		s += fmt.Sprintf(": %q", note)
	}
	return s + ")"
}

// didTexts say what the change just made did (the ?did= of the page a
// form's POST redirects to); unknown values say nothing.
var didTexts = map[string]string{
	"paused":       "Paused. Its slots are skipped (reason paused) until it is resumed or the pause ends.",
	"resumed":      "Resumed. Its next slots run.",
	"run:taken":    "Run requested: a daemon took it; it is running (the list shows it once it is recorded).",
	"run:finished": "Run requested: it ran; the list shows its result.",
	"run:refused":  "Run requested, but refused by the daemon that took it (paused, or a run holds the lease): see the events.",
}
