package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

// unknownKeys reports every key of m (in sorted order) that is not in
// known as unknown at path.KEY (unknownKey).
func (p *problems) unknownKeys(path string, m map[string]any, known []string) {
	for _, k := range sortedKeys(m) {
		if !slices.Contains(known, k) {
			p.unknownKey(path+"."+k, k, known)
		}
	}
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

// yamlErrLine finds the line of a yaml.v3 error message ("yaml: line 3:
// …"); unknownAnchor its alias name ("unknown anchor 'x' referenced", which
// has no line).
var (
	yamlErrLine   = regexp.MustCompile(`^(?:yaml: )?line (\d+):`)
	unknownAnchor = regexp.MustCompile(`unknown anchor '([^']*)' referenced`)
	// plainStar matches `key: *…` or `key: @…` in block or flow style: a
	// plain value that starts with * (a YAML alias) or @ (reserved).
	plainStar = regexp.MustCompile(`(?:^|[\s{,?-])([A-Za-z0-9_.-]+)\s*:\s+([*@][^,}\]#\n]*)`)
)

// quoteHint returns the fix for a YAML error caused by an unquoted value
// starting with * or @, such as `schedule: */5 * * * *` or `schedule:
// @daily`: "; quote the schedule: schedule: \"*/5 * * * *\" (…)". It looks
// at the error's line, or for an unknown anchor at the lines that use it;
// "" when no such value is there.
func quoteHint(data []byte, msg string) string {
	lines := strings.Split(string(data), "\n")
	var cands []string
	if m := yamlErrLine.FindStringSubmatch(msg); m != nil {
		if n, _ := strconv.Atoi(m[1]); n >= 1 && n <= len(lines) {
			cands = append(cands, lines[n-1])
		}
	} else if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		for _, l := range lines {
			if strings.Contains(l, "*"+m[1]) {
				cands = append(cands, l)
			}
		}
	}
	for _, l := range cands {
		m := plainStar.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		key, val := m[1], strings.TrimSpace(m[2])
		why := "an unquoted * starts a YAML alias"
		if val[0] == '@' {
			why = "YAML reserves @ at the start of a plain value"
		}
		what := "the value"
		if key == "schedule" {
			what = "the schedule"
		}
		return fmt.Sprintf("; quote %s: %s: %q (%s)", what, key, val, why)
	}
	return ""
}
