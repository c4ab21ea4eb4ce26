package process

import (
	"bytes"
	"cmp"
	"regexp"
	"slices"
)

// MinSecret is the length in bytes of the shortest env value a Redactor
// replaces: shorter values ("1", "on", "yes", a port) would blank out
// ordinary output wherever they occur and give away little; a secret
// worth hiding is longer.
const MinSecret = 4

// Redactor replaces secrets in lines of output: every value of a job's
// env of at least MinSecret bytes by "[redacted env NAME]", then every
// match of the configured patterns by "[redacted]". It works on whole
// lines (Spec.Redact), so a secret is never split between two chunks of
// output; only a line longer than Spec.MaxLine is redacted in pieces, and a
// secret across the cut between two pieces is not found. A Redactor is
// immutable and safe for concurrent use.
type Redactor struct {
	values   []secret // longest first: a value inside another is replaced after it
	patterns []*regexp.Regexp
}

type secret struct {
	value, marker []byte
}

// patternMarker replaces a match of a pattern.
var patternMarker = []byte("[redacted]")

// NewRedactor returns the Redactor of env (a job's env: name → value) and
// patterns (output.redact), or nil when there is nothing to redact (a nil
// *Redactor's Redact returns its input).
func NewRedactor(env map[string]string, patterns []*regexp.Regexp) *Redactor {
	r := &Redactor{patterns: patterns}
	for name, v := range env {
		if len(v) >= MinSecret {
			r.values = append(r.values, secret{value: []byte(v), marker: []byte("[redacted env " + name + "]")})
		}
	}
	if len(r.values) == 0 && len(patterns) == 0 {
		return nil
	}
	slices.SortFunc(r.values, func(a, b secret) int {
		if c := cmp.Compare(len(b.value), len(a.value)); c != 0 {
			return c
		}
		return bytes.Compare(a.marker, b.marker)
	})
	return r
}

// Redact returns line with its secrets replaced: line itself when it holds
// none (no allocation), else a new slice.
func (r *Redactor) Redact(line []byte) []byte {
	if r == nil {
		return line
	}
	for _, s := range r.values {
		if bytes.Contains(line, s.value) {
			line = bytes.ReplaceAll(line, s.value, s.marker)
		}
	}
	for _, re := range r.patterns {
		if re.Match(line) {
			line = re.ReplaceAllLiteral(line, patternMarker)
		}
	}
	return line
}

// RedactString is Redact for a string (the dashboard's stored tails).
func (r *Redactor) RedactString(s string) string {
	if r == nil {
		return s
	}
	return string(r.Redact([]byte(s)))
}
