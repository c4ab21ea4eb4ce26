package config

import (
	"fmt"
	"strings"
)

// Problem is one validation finding, with the path of the offending value
// (e.g. `jobs[2] "backup": schedule`).
type Problem struct {
	Path    string
	Msg     string
	Warning bool
}

// String renders the problem as `PATH: MSG`, prefixed with "warning: " for
// warnings.
func (p Problem) String() string {
	s := p.Msg
	if p.Path != "" {
		s = p.Path + ": " + p.Msg
	}
	if p.Warning {
		return "warning: " + s
	}
	return s
}

// ValidationError is returned by Load when at least one Problem is an
// error. It lists every problem found (errors and warnings), one per line.
type ValidationError struct {
	File     string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	n := 0
	for _, p := range e.Problems {
		if !p.Warning {
			n++
		}
	}
	fmt.Fprintf(&b, "%s: %d problem(s)", e.File, n)
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}
