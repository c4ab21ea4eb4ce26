package main

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/cronlock/cronlock/redislock"
)

// eventRow is one entry of `cronlock history -events -json`. Auto marks
// the end of a pause with an end that lifted itself (its key expired):
// nothing writes that event, so it is derived from the pause event, when
// no pause or resume came between the pause and its end.
type eventRow struct {
	redislock.Event
	Auto bool `json:"auto,omitempty"`
}

// EventAutoResume is the type of a derived eventRow.
const EventAutoResume = "auto_resume"

// withAutoResumes returns evs (newest first) with an auto_resume row at
// the end of every pause that lifted itself by now.
func withAutoResumes(evs []redislock.Event, now time.Time) []eventRow {
	rows := make([]eventRow, 0, len(evs))
	for i, e := range evs {
		rows = append(rows, eventRow{Event: e})
		if e.Type != redislock.EventPause || e.Until.IsZero() || e.Until.After(now) {
			continue
		}
		lifted := true
		for _, later := range evs[:i] { // newer entries
			if (later.Type == redislock.EventPause || later.Type == redislock.EventResume) && !later.At.After(e.Until) {
				lifted = false // replaced or resumed before its end
			}
		}
		if lifted {
			rows = append(rows, eventRow{Event: redislock.Event{Type: EventAutoResume, At: e.Until, Note: e.Note}, Auto: true})
		}
	}
	slices.SortStableFunc(rows, func(a, b eventRow) int { return b.At.Compare(a.At) })
	return rows
}

// printEvents prints job's last n events, newest first.
func (s *opsSession) printEvents(ctx context.Context, env *runEnv, job string, n int, asJSON bool) int {
	evs, err := s.redis.Events(ctx, job, n)
	if err != nil {
		return opsFail(env, "history", 1, s.redisHint(err))
	}
	rows := withAutoResumes(evs, time.Now())
	if asJSON {
		return printJSON(env, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(env.stdout, "no events recorded for %s\n", job)
		return 0
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tEVENT\tBY\tDETAILS\t")
	for _, r := range rows {
		by, details := r.By, ""
		switch r.Type {
		case redislock.EventPause:
			if !r.Until.IsZero() {
				details = "until " + r.Until.UTC().Format(time.RFC3339) + " "
			}
			details += r.Note
		case EventAutoResume:
			by, details = "-", "the pause ended"
		case redislock.EventReload:
			by, details = r.Node, "config hash "+r.ConfigHash
			if r.ConfigHash == "" {
				details = "job removed from the node's config"
			}
		case redislock.EventRunRequest:
			details = "request " + r.Request
			if r.Note != "" {
				details += ": " + r.Note
			}
		}
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", r.At.UTC().Format(time.RFC3339), r.Type, by, details)
	}
	_ = tw.Flush()
	return 0
}
