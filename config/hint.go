package config

import (
	"fmt"
	"slices"
)

// problems collects validation findings in the order they are found.
type problems struct{ list []Problem }

func (p *problems) err(path, format string, args ...any) {
	p.list = append(p.list, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// errMsg records an error with a ready message (for callbacks such as the
// expander's).
func (p *problems) errMsg(path, msg string) {
	p.list = append(p.list, Problem{Path: path, Msg: msg})
}

func (p *problems) warn(path, msg string) {
	p.list = append(p.list, Problem{Path: path, Msg: msg, Warning: true})
}

// hasErrors reports whether any finding is an error (not a warning).
func (p *problems) hasErrors() bool {
	return slices.ContainsFunc(p.list, func(q Problem) bool { return !q.Warning })
}

// unknownKey reports key (at path) as unknown, suggesting the closest of
// known when it is within a small edit distance.
func (p *problems) unknownKey(path, key string, known []string) {
	msg := fmt.Sprintf("unknown key %q", key)
	if s := suggest(key, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	p.list = append(p.list, Problem{Path: path, Msg: msg})
}

// suggest returns the known word closest to key by Levenshtein distance, or
// "" when none is close enough (distance <= 2, or <= len/3 for long words).
func suggest(key string, known []string) string {
	best, bestD := "", 1<<30
	for _, k := range known {
		if d := editDistance(key, k); d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	limit := max(2, len(key)/3)
	if bestD > limit {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 20 // keys this long are never typos of ours
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
