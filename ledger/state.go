package ledger

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Pause is the value of a job's pause key.
type Pause struct {
	By    string    `json:"by"`             // user@host of the operator
	At    time.Time `json:"at"`             // when, UTC, by the operator's clock
	Note  string    `json:"note,omitempty"` // why
	Until time.Time `json:"until,omitzero"` // the pause's end, UTC; zero = until resumed
}

// JobState is what `cronlock status` shows for one job.
type JobState struct {
	Slot   int64 // the last run's slot, 0 if none (or a manual run)
	Fence  int64 // last fencing token handed out, 0 if none
	Seq    int64 // ledger writes (docs/protocol.md, R5)
	Paused bool
	// Pause is who paused the job, when, why and until (Redis backend;
	// empty fields for a pause written without them); nil when not paused
	// or on the memory backend.
	Pause       *Pause
	LeaseHolder string        // "" when no lease is held
	LeaseTTL    time.Duration // remaining lease time, 0 when not held
	Runs        int64         // successful runs counted for max_runs (state.runs), 0 if none
	Pending     int64         // the pending slot (overlap queue, replace), 0 if none
	// Last is the last recorded run, nil if the job never ran. Its
	// OutputTail is empty: read it with History.
	Last *RunRecord
}

// CheckLease checks Renew and Release arguments (ttl < 0 means "unused").
func CheckLease(job, owner string, ttl time.Duration) error {
	switch {
	case job == "":
		return errors.New("empty job name")
	case owner == "":
		return errors.New("empty lease owner")
	case ttl >= 0 && ttl < time.Millisecond:
		return fmt.Errorf("lease ttl %v below 1ms", ttl)
	}
	return nil
}

// Tail returns the last MaxOutputTail bytes of s, starting at a rune
// boundary.
func Tail(s string) string {
	if len(s) <= MaxOutputTail {
		return s
	}
	s = s[len(s)-MaxOutputTail:]
	for i := 0; i < utf8.UTFMax && i < len(s); i++ {
		if utf8.RuneStart(s[i]) {
			return s[i:]
		}
	}
	return s
}
