package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// decoder converts raw values (from YAML, TOML, JSON, environment variables
// or flags) into typed values. Each conversion failure is recorded as a
// Problem with the value's path and a hint at the fix; it never panics and
// never falls back to a default silently.
type decoder struct {
	probs *problems
	exp   *expander
}

// describe renders a raw value for an error message.
func describe(v any) string {
	switch v.(type) {
	case map[string]any, map[any]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%v", v)
}

// str converts a scalar to a string and applies ${} expansion. Numbers and
// booleans are accepted (YAML reads `name: 2024` as a number).
func (d *decoder) str(path string, v any) (string, bool) {
	switch x := v.(type) {
	case string:
		if d.exp != nil {
			return d.exp.expand(path, x), true
		}
		return x, true
	case bool, int, int64, uint64, float64:
		return fmt.Sprint(x), true
	}
	d.probs.err(path, "want a string, got %s", describe(v))
	return "", false
}

// duration converts a value to a time.Duration. Strings must carry a unit
// ("90s", "1h30m"); bare numbers are rejected because the original cronlock
// read `timeout: 300` as 300ns. Negative durations are rejected.
func (d *decoder) duration(path string, v any) (time.Duration, bool) {
	var dur time.Duration
	switch x := v.(type) {
	case time.Duration:
		dur = x
	case int, int64, uint64, float64:
		d.probs.err(path, "%v needs a unit, e.g. %vs (units: ms, s, m, h)", x, x)
		return 0, false
	case string:
		s := strings.TrimSpace(x)
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			d.probs.err(path, "%q needs a unit, e.g. %ss (units: ms, s, m, h)", x, s)
			return 0, false
		}
		var err error
		if dur, err = time.ParseDuration(s); err != nil {
			d.probs.err(path, "%q is not a duration; write e.g. 30s, 5m or 1h30m", x)
			return 0, false
		}
	default:
		d.probs.err(path, "want a duration such as 30s, got %s", describe(v))
		return 0, false
	}
	if dur < 0 {
		d.probs.err(path, "%s is negative; durations must be >= 0", dur)
		return 0, false
	}
	return dur, true
}

// integer converts a whole number (or its decimal string) to an int.
func (d *decoder) integer(path string, v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return int(x), true
		}
	case uint64:
		if x <= math.MaxInt32 {
			return int(x), true
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) <= math.MaxInt32 {
			return int(x), true
		}
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
			return n, true
		}
	}
	d.probs.err(path, "want a whole number, got %s", describe(v))
	return 0, false
}

// boolean converts true/false (or "true"/"false", "1"/"0" from env) to bool.
func (d *decoder) boolean(path string, v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
			return b, true
		}
	}
	d.probs.err(path, "want true or false, got %s", describe(v))
	return false, false
}

// strings converts a list of scalars, or a comma-separated string (as
// environment variables give), to a []string.
func (d *decoder) strings(path string, v any) ([]string, bool) {
	switch x := v.(type) {
	case []string:
		return x, true
	case string:
		var out []string
		for _, p := range strings.Split(x, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out, true
	case []any:
		out := make([]string, 0, len(x))
		ok := true
		for i, e := range x {
			s, good := d.str(fmt.Sprintf("%s[%d]", path, i), e)
			ok = ok && good
			out = append(out, s)
		}
		return out, ok
	}
	d.probs.err(path, "want a list of strings, got %s", describe(v))
	return nil, false
}

// stringMap converts a mapping of scalars (job env) to map[string]string,
// keeping key case.
func (d *decoder) stringMap(path string, v any) (map[string]string, bool) {
	m, ok := asMap(v)
	if !ok {
		d.probs.err(path, "want a mapping of NAME: value, got %s", describe(v))
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, good := d.str(path+"."+k, e)
		ok = ok && good
		out[k] = s
	}
	return out, ok
}

// asMap returns v as a map with string keys. YAML gives map[any]any for
// mappings with non-string keys; those keys are rendered with fmt.
func asMap(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return x, true
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = e
		}
		return out, true
	}
	return nil, false
}
