package config

import (
	"fmt"
	"slices"
	"strings"
)

// Phase 2, expand: `${VAR}` in the file's string values against the
// explicit environment (expander), while checkTree copies the file's
// settings for the decode and reports unknown keys. Values from the
// environment and flags are taken literally.

// expander performs the `${VAR}` / `${VAR:-default}` expansion of config
// values against an explicit environment (never os.Getenv).
//
// Rules, applied left to right in one pass:
//   - `${NAME}` becomes the value of NAME; NAME unset gives "" and a warning.
//   - `${NAME:-word}` becomes the value of NAME, or word (itself expanded)
//     when NAME is unset or empty, as in sh(1).
//   - `$${` becomes a literal `${` (so `$${X}` yields `${X}`).
//   - `$$` not followed by `{`, bare `$NAME`, `$1`, `$(…)` and any `${…}`
//     whose content is not NAME or NAME:-word (e.g. `${1}`, `${#x}`) are left
//     untouched for the shell.
//   - An unterminated `${` is an error (reported through errf) and is kept
//     as written.
type expander struct {
	env  map[string]string
	warn func(path, msg string)
	errf func(path, msg string)
	// refs records, per config path, the variables its value referenced
	// (set or not), so that the variables behind secrets can be kept
	// from jobs (Config.SecretEnv).
	refs map[string][]string
	// expandedKeys are the top-level keys whose file value held a `${…}`:
	// a number or boolean that comes from the environment is converted
	// from its string, as an environment override is.
	expandedKeys map[string]bool
}

// newExpander indexes environ (KEY=VALUE entries; the last one of a key
// wins). warn and errf receive findings; either may be nil.
func newExpander(environ []string, warn, errf func(path, msg string)) *expander {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return &expander{env: env, warn: warn, errf: errf, refs: map[string][]string{}, expandedKeys: map[string]bool{}}
}

// expand returns s with `${…}` forms replaced; path names the value in
// warnings about unset variables.
func (e *expander) expand(path, s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch {
		case s[i+1] == '$' && i+2 < len(s) && s[i+2] == '{':
			b.WriteString("${")
			i += 3
		case s[i+1] == '$':
			b.WriteString("$$")
			i += 2
		case s[i+1] == '{':
			n := e.expandBraced(&b, path, s[i:])
			i += n
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// expandBraced handles s starting with "${". It writes the result to b and
// returns how many bytes of s it consumed.
func (e *expander) expandBraced(b *strings.Builder, path, s string) int {
	end := matchingBrace(s)
	if end < 0 {
		if e.errf != nil {
			e.errf(path, "unterminated ${…}; close it with } or write $${ for a literal ${")
		}
		b.WriteString("${")
		return 2
	}
	body := s[2:end]
	name, def, hasDef := strings.Cut(body, ":-")
	if !isEnvName(name) {
		b.WriteString(s[:end+1]) // shell syntax such as ${1} or ${#x}: not ours
		return end + 1
	}
	e.refs[path] = append(e.refs[path], name)
	val, set := e.env[name]
	switch {
	case hasDef && val == "":
		b.WriteString(e.expand(path, def))
	case !set && !hasDef:
		if e.warn != nil {
			e.warn(path, "${"+name+"} is not set and has no default (${"+name+":-default}); it expands to \"\"")
		}
	default:
		b.WriteString(val)
	}
	return end + 1
}

// matchingBrace returns the index of the '}' closing the "${" at s[0:2],
// counting nested "${", or -1.
func matchingBrace(s string) int {
	depth := 0
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '{' && s[i-1] == '$':
			depth++
		case s[i] == '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// isEnvName reports whether s is a shell variable name: [A-Za-z_][A-Za-z0-9_]*.
func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// checkTree copies the file's keys outside `jobs`/`defaults` into out,
// expanding string values, and reports unknown keys and mappings given as
// scalars.
func checkTree(in map[string]any, prefix string, d *decoder, out map[string]any) {
	known := knownChildren(prefix)
	for _, k := range sortedKeys(in) {
		val, full := in[k], prefix+k
		switch {
		case prefix == "" && slices.Contains(jobSections, k):
			continue
		case !slices.Contains(known, k):
			if prefix == "" && slices.Contains(jobKeys(), k) {
				d.probs.err(full, "unknown key %q: job fields go under `defaults:` or in a job of `jobs:`", k)
			} else {
				d.probs.unknownKey(full, k, known)
			}
		case slices.Contains(sections, full):
			m, ok := asMap(val)
			if !ok {
				d.probs.err(full, "want a mapping of settings, got %s", describe(val))
				continue
			}
			sub := map[string]any{}
			checkTree(m, full+".", d, sub)
			out[k] = sub
		default:
			if s, ok := val.(string); ok {
				val = d.exp.expand(full, s)
				if strings.Contains(s, "${") {
					d.exp.expandedKeys[full] = true // decoded weakly: it could not be written unquoted
				}
			} else if l, ok := val.([]any); ok {
				val = expandList(d, full, l)
			} else if isMapKey(full) {
				checkMapKeyCase(d.probs, full, val) // node.tags
			}
			out[k] = val
		}
	}
}

// expandList expands the string elements of a list value.
func expandList(d *decoder, path string, l []any) []any {
	out := make([]any, len(l))
	for i, e := range l {
		if s, ok := e.(string); ok {
			e = d.exp.expand(fmt.Sprintf("%s[%d]", path, i), s)
		}
		out[i] = e
	}
	return out
}
