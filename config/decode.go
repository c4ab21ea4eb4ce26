package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
)

// Phase 3, decode: raw values (from the file, CRONLOCK_* variables or
// flags) to typed values. viper layers the settings (its defaults, the
// file, the environment, the flags: loadScalars) and hands each key's
// winning raw value to the decoder below, which converts it with a
// problem per failure. viper's own decoding (mapstructure) is not used:
// it lower-cases keys (job env names keep their case), accepts `300` for
// a duration as 300 ns, and stops at the first error, where a load must
// report every problem with its path and fix.

// decoder converts raw values (from YAML, TOML, JSON, environment variables
// or flags) into typed values. Each conversion failure is recorded as a
// Problem with the value's path and a hint at the fix; it never panics and
// never falls back to a default silently.
type decoder struct {
	probs *problems
	exp   *expander
	// weak accepts strings for numbers, booleans and lists ("2", "true",
	// "a:1,b:2"): environment variables and flags only carry strings. Values
	// from the file must have the right type.
	weak bool
	// purpose is Options.Purpose: whether host problems (a webhook's
	// secret_file) are errors or warnings.
	purpose Purpose
}

// describe renders a raw value for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case map[string]any, map[any]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("%q", x)
	case float64:
		return formatNumber(x)
	}
	return fmt.Sprintf("%v", v)
}

// formatNumber renders f without an exponent when that stays readable
// (1e9 → "1000000000").
func formatNumber(f float64) string {
	if math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// toFloat returns a YAML/TOML/JSON number as a float64.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// unitFix returns the fix for a duration written as the bare number f
// (f != 0): a suggestion that time.ParseDuration accepts, in seconds.
func unitFix(f float64) string {
	f = math.Abs(f)
	var s string
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
	case f == math.Trunc(f) && f < 1e18:
		s = fmt.Sprintf("%ds", int64(f))
	default:
		s = strconv.FormatFloat(f, 'f', -1, 64) + "s"
	}
	if _, err := time.ParseDuration(s); s != "" && err == nil {
		return "e.g. " + s + " (units: ms, s, m, h)"
	}
	if s != "" {
		return fmt.Sprintf("but %s is longer than the longest duration (2562047h); write e.g. 30s, 5m or 1h", s)
	}
	return "write e.g. 30s, 5m or 1h (units: ms, s, m, h)"
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

// expanded applies ${} expansion to a string written for a number,
// duration or boolean setting and reports whether it held an expansion:
// a value that comes from the environment is converted like an
// environment override (weakly), since the user could not write it
// without quotes.
func (d *decoder) expanded(path, s string) (string, bool) {
	if d.exp == nil || !strings.Contains(s, "${") {
		return s, false
	}
	return d.exp.expand(path, s), true
}

// duration converts a value to a time.Duration. Strings must carry a unit
// ("90s", "1h30m"); bare numbers other than 0 are rejected because the
// original cronlock read `timeout: 300` as 300ns (a bare 0 is unambiguous
// and is the documented "off" value). Negative durations are rejected.
func (d *decoder) duration(path string, v any) (time.Duration, bool) {
	var dur time.Duration
	switch x := v.(type) {
	case time.Duration:
		dur = x
	case int, int64, uint64, float64:
		if f, _ := toFloat(x); f != 0 {
			d.probs.err(path, "%s needs a unit, %s", describe(x), unitFix(f))
			return 0, false
		}
	case string:
		x, _ = d.expanded(path, x)
		s := strings.TrimSpace(x)
		if f, err := strconv.ParseFloat(s, 64); err == nil && f == 0 {
			return 0, true
		} else if err == nil {
			d.probs.err(path, "%q needs a unit, %s", x, unitFix(f))
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

// integer converts a whole number to an int; its decimal string only when
// d.weak (environment, flags). Range checks are the caller's.
func (d *decoder) integer(path string, v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true // int is 64-bit on every platform cronlock supports
	case uint64:
		if x <= math.MaxInt64 {
			return int(x), true
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<62 {
			return int(x), true
		}
	case string:
		x, env := d.expanded(path, x)
		n, err := strconv.Atoi(strings.TrimSpace(x))
		switch {
		case err == nil && (d.weak || env):
			return n, true
		case err == nil:
			d.probs.err(path, "want a number, got the string %q; write %d without quotes", x, n)
			return 0, false
		}
	}
	d.probs.err(path, "want a whole number, got %s", describe(v))
	return 0, false
}

// boolean converts true/false to bool; also "true"/"false", "1"/"0" when
// d.weak (environment, flags).
func (d *decoder) boolean(path string, v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		x, env := d.expanded(path, x)
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		switch {
		case err == nil && (d.weak || env):
			return b, true
		case err == nil:
			d.probs.err(path, "want true or false, got the string %q; write %t without quotes", x, b)
			return false, false
		}
	}
	d.probs.err(path, "want true or false, got %s", describe(v))
	return false, false
}

// strings converts a list of scalars to a []string; also a comma-separated
// string when d.weak (environment variables and flags carry strings).
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
		if !d.weak {
			quoted := make([]string, len(out))
			for i, e := range out {
				quoted[i] = strconv.Quote(e)
			}
			d.probs.err(path, "want a list, got the string %q; write [%s]", x, strings.Join(quoted, ", "))
			return nil, false
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

// loadScalars fills every key of Config.fields (see keyTable) with precedence
// flag > CRONLOCK_* environment > file > default, using viper's layers:
// SetDefault for defaults, MergeConfigMap for the file, and Set for
// environment then flags (Set is viper's top layer, so the later Set wins).
// Unknown keys in the file, and CRONLOCK_* variables that are not
// overrides, are reported with a hint.
//
// It returns, for keys set by environment or flag, a suffix naming the
// source for problem paths, e.g. " (from CRONLOCK_REDIS_DB)".
func loadScalars(cfg *Config, raw map[string]any, d *decoder, opts Options) map[string]string {
	v := viper.New()
	for k, def := range builtinDefaults() {
		v.SetDefault(k, def)
	}
	file := map[string]any{}
	checkTree(raw, "", d, file)
	_ = v.MergeConfigMap(file) // never fails
	src := map[string]string{}
	envKeys := map[string]string{}
	for _, k := range Keys() {
		envKeys[EnvName(k)] = k
	}
	for _, kv := range opts.Environ {
		name, val, _ := strings.Cut(kv, "=")
		if k, ok := envKeys[name]; ok && val != "" {
			v.Set(k, val)
			src[k] = " (from " + name + ")"
		}
	}
	unknownOverrides(d.probs, opts.Environ, envKeys)
	for _, k := range sortedKeys(opts.Flags) {
		if !slices.Contains(Keys(), k) {
			d.probs.err("flag", "unknown config key %q", k)
			continue
		}
		v.Set(k, opts.Flags[k])
		src[k] = " (from flag)"
	}
	weak := *d
	weak.weak = true // environment and flag values are strings
	for _, f := range cfg.fields() {
		dec := d
		if src[f.key] != "" || d.exp.expandedKeys[f.key] {
			dec = &weak
		}
		if val := v.Get(f.key); val != nil {
			setField(dec, f.key+src[f.key], f.ptr, val)
		}
	}
	cfg.Lock.Backend = resolveBackend(cfg)
	return src
}

// setField decodes val into ptr (see field).
func setField(d *decoder, path string, ptr, val any) {
	switch p := ptr.(type) {
	case *string:
		// Values from files are already expanded (checkTree); env and flag
		// values are taken literally.
		if s, ok := val.(string); ok {
			*p = s
		} else if s, ok := (&decoder{probs: d.probs}).str(path, val); ok {
			*p = s
		}
	case *time.Duration:
		if x, ok := d.duration(path, val); ok {
			*p = x
		}
	case *int:
		if x, ok := d.integer(path, val); ok {
			*p = x
		}
	case *bool:
		if x, ok := d.boolean(path, val); ok {
			*p = x
		}
	case *[]string:
		if x, ok := d.strings(path, val); ok {
			*p = x
		}
	case *map[string]string:
		if x, ok := d.tagMap(path, val); ok {
			*p = x
		}
	default:
		panic(fmt.Sprintf("config: key %s has unsupported type %T", path, ptr)) // programming error: extend setField
	}
}
