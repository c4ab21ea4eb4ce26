package schedule

import (
	"errors"
	"time"
)

// TEMPORARY placeholder so dependent packages compile; replaced by the real
// implementation.

// Schedule is a parsed schedule.
type Schedule struct{ loc *time.Location }

// Parse parses expr in the default zone loc.
func Parse(expr string, loc *time.Location) (*Schedule, error) {
	return nil, errors.New("schedule: not implemented yet")
}

// Next returns the first fire time strictly after after.
func (s *Schedule) Next(after time.Time) time.Time { return time.Time{} }

// Location returns the schedule's zone.
func (s *Schedule) Location() *time.Location { return s.loc }
