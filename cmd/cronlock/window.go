package main

import (
	"time"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/config"
)

// windowNote is the table's note for a job's active window: "" without
// one, "active window ended 2027-…", "active from … until …".
func windowNote(j *config.Job, now time.Time) string {
	switch api.WindowState(j, now) {
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
