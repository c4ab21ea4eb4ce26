package api

import (
	"context"
	"slices"
	"time"

	"github.com/cronlock/cronlock/redislock"
)

// Event is one entry of `cronlock history -events -json` and GET
// /api/v1/jobs/{job}/events. Auto marks
// the end of a pause with an end that lifted itself (its key expired):
// nothing writes that event, so it is derived from the pause event, when
// no pause or resume came between the pause and its end.
type Event struct {
	redislock.Event
	Auto bool `json:"auto,omitempty"`
}

// EventAutoResume is the type of a derived Event.
const EventAutoResume = "auto_resume"

// WithAutoResumes returns evs (newest first) with an auto_resume row at
// the end of every pause that lifted itself by now.
func WithAutoResumes(evs []redislock.Event, now time.Time) []Event {
	rows := make([]Event, 0, len(evs))
	for i, e := range evs {
		rows = append(rows, Event{Event: e})
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
			rows = append(rows, Event{Event: redislock.Event{Type: EventAutoResume, At: e.Until, Note: e.Note}, Auto: true})
		}
	}
	slices.SortStableFunc(rows, func(a, b Event) int { return b.At.Compare(a.At) })
	return rows
}

// Events returns job's last n events, newest first, with the derived
// auto_resume rows (WithAutoResumes), in one round trip.
func Events(ctx context.Context, r ReadStore, job string, n int, now time.Time) ([]Event, error) {
	evs, err := r.Events(ctx, job, n)
	if err != nil {
		return nil, err
	}
	return WithAutoResumes(evs, now), nil
}
