package process

import (
	"bytes"
	"cmp"
	"regexp"
	"slices"
	"strings"
)

// MinSecret is the length in bytes of the shortest env value a Redactor
// replaces: shorter values ("1", "on", "yes", a port) would blank out
// ordinary output wherever they occur and give away little; a secret
// worth hiding is longer.
const MinSecret = 4

// PatternReach is how far in bytes past the cut of an over-long line a
// Redactor with patterns looks for a match across the cut (Cut): a match of
// up to PatternReach bytes is never split between two pieces.
const PatternReach = 256

// Redactor replaces secrets in lines of output: every value of a job's
// env of at least MinSecret bytes by "[redacted env NAME]", and each line
// of a multi-line value (without a trailing "\r", at least MinSecret bytes)
// by the same marker, since output is handled line by line; then every
// match of the configured patterns by "[redacted]". It works on whole
// lines (Spec.Redact), so a secret is never split between two chunks of
// output; a line longer than Spec.MaxLine is cut into pieces where no
// secret crosses the cut (Cut). A Redactor is immutable and safe for
// concurrent use.
type Redactor struct {
	values   []secret // longest first: a value inside another is replaced after it
	patterns []*regexp.Regexp
	reach    int // longest secret without "\n" (PatternReach at least with patterns)
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
		marker := []byte("[redacted env " + name + "]")
		r.add(v, marker)
		if strings.Contains(v, "\n") {
			for line := range strings.SplitSeq(v, "\n") {
				r.add(strings.TrimSuffix(line, "\r"), marker)
			}
		}
	}
	if len(r.values) == 0 && len(patterns) == 0 {
		return nil
	}
	if len(patterns) > 0 {
		r.reach = max(r.reach, PatternReach)
	}
	slices.SortFunc(r.values, func(a, b secret) int {
		if c := cmp.Compare(len(b.value), len(a.value)); c != 0 {
			return c
		}
		return bytes.Compare(a.marker, b.marker)
	})
	// A value found twice (two names, a line repeated) keeps its first marker.
	seen := make(map[string]bool, len(r.values))
	r.values = slices.DeleteFunc(r.values, func(s secret) bool {
		dup := seen[string(s.value)]
		seen[string(s.value)] = true
		return dup
	})
	return r
}

// add registers v as a secret replaced by marker if it is long enough.
func (r *Redactor) add(v string, marker []byte) {
	if len(v) < MinSecret {
		return
	}
	r.values = append(r.values, secret{value: []byte(v), marker: marker})
	if !strings.Contains(v, "\n") {
		r.reach = max(r.reach, len(v))
	}
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

// overlap is how many bytes past the cut of an over-long line the line
// writer holds before it cuts: the longest secret (without "\n"; with
// patterns PatternReach at least) less one byte, so that a secret starting
// before the cut is seen whole.
func (r *Redactor) overlap() int {
	if r == nil {
		return 0
	}
	return max(r.reach-1, 0)
}

// cut returns where to end the next piece of an over-long line whose next
// bytes are b (at most size+overlap() of them): size, or the start of a
// secret (or pattern match) in b that crosses size, moved back until no
// secret crosses it, so that none is split between two pieces. When
// secrets overlapping each other reach from b's start across size (only a
// value repeating itself, "abab" in a run of "ab", does that), it returns
// size and such a secret may be split.
func (r *Redactor) cut(b []byte, size int) int {
	if r == nil || len(b) <= size {
		return min(len(b), size)
	}
	var matches [][]int
	for _, re := range r.patterns {
		matches = append(matches, re.FindAllIndex(b, -1)...)
	}
	at := size
	for moved := true; moved && at > 0; {
		moved = false
		for _, s := range r.values {
			if p := crossing(b, at, s.value); p >= 0 {
				at, moved = p, true
			}
		}
		for _, m := range matches {
			if m[0] < at && at < m[1] {
				at, moved = m[0], true
			}
		}
	}
	if at == 0 {
		return size
	}
	return at
}

// crossing returns the start of the first occurrence of s in b that
// begins before at and ends after it, or -1.
func crossing(b []byte, at int, s []byte) int {
	lo, hi := max(0, at-len(s)+1), min(len(b), at+len(s)-1)
	if hi-lo < len(s) {
		return -1
	}
	if i := bytes.Index(b[lo:hi], s); i >= 0 {
		return lo + i
	}
	return -1
}
