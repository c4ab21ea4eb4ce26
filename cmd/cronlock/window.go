package main

import (
	"time"

	"github.com/cronlock/cronlock/config"
)

// windowState describes a job's active window at now for `next` and
// `status`: "" without a window, else "not_started", "active" or "ended".
func windowState(j *config.Job, now time.Time) string {
	if j.Sched == nil {
		return ""
	}
	from, until := j.Sched.Window()
	switch {
	case from.IsZero() && until.IsZero():
		return ""
	case !until.IsZero() && !now.Before(until):
		return "ended"
	case !from.IsZero() && now.Before(from):
		return "not_started"
	}
	return "active"
}

// windowNote is the table's note for a job's active window: "" without
// one, "active window ended 2027-…", "active from … until …".
func windowNote(j *config.Job, now time.Time) string {
	switch windowState(j, now) {
	case "":
		return ""
	case "ended":
		return "active window ended " + j.ActiveUntil
	}
	switch {
	case j.ActiveFrom == "":
		return "active until " + j.ActiveUntil
	case j.ActiveUntil == "":
		return "active from " + j.ActiveFrom
	}
	return "active from " + j.ActiveFrom + " until " + j.ActiveUntil
}
