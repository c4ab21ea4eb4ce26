package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	_ "time/tzdata"
	"unicode/utf8" // schedules must resolve zones on hosts without /usr/share/zoneinfo

	"github.com/spf13/viper"
)

// Purpose says why a config is loaded; it decides whether some findings are
// warnings or errors.
type Purpose int

const (
	// ForValidate: `cronlock -validate`, `cronlock next` and other tools.
	// `user` set while not root is a warning.
	ForValidate Purpose = iota
	// ForStart: the daemon is about to run the jobs. `user` set while not
	// root is an error.
	ForStart
)

// Options are the inputs of Load and Parse besides the file itself. The
// config package never reads the process environment or flags itself.
type Options struct {
	// Environ holds KEY=VALUE entries (os.Environ() in main). It is the
	// source of ${VAR} expansion and of CRONLOCK_* overrides.
	Environ []string
	// Flags maps config keys to values from command-line flags, e.g.
	// {"log.level": "debug"}. Highest precedence.
	Flags map[string]string
	// Purpose selects warning-versus-error for `user` when not root.
	Purpose Purpose
	// Euid is the effective user id the daemon runs as.
	Euid int
	// Hostname is the first part of the default node.id "<hostname>-<8
	// hex>".
	Hostname string
	// MachineID is the content of /etc/machine-id (machine-id(5)), ""
	// when there is none: the default node.id is derived from it, so that
	// it stays the same across restarts (see resolveNodeID).
	MachineID string
}

// Formats maps supported file extensions to viper config types.
var formats = map[string]string{".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}

// FormatOf returns the config format ("yaml", "toml" or "json") for path's
// extension, or an error naming the supported extensions. The match is
// case-sensitive, as in viper.
func FormatOf(path string) (string, error) {
	ext := filepath.Ext(path)
	if f, ok := formats[ext]; ok {
		return f, nil
	}
	if ext == "" {
		return "", fmt.Errorf("config file %s has no extension; use .yaml, .yml, .toml or .json", path)
	}
	return "", fmt.Errorf("config file %s: unsupported extension %q; use .yaml, .yml, .toml or .json", path, ext)
}

// Load reads, expands and validates the config file at path. The format is
// chosen by extension. It returns a *ValidationError (listing every problem)
// when the config is invalid, or another error when the file cannot be read.
// On success cfg.Warnings holds the non-fatal findings.
func Load(path string, opts Options) (*Config, error) {
	format, err := FormatOf(path)
	if err != nil {
		return nil, err
	}
	data, size, err := readLimited(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if size > maxFileBytes {
		return nil, &ValidationError{File: path, Problems: []Problem{{Msg: tooLarge(size)}}}
	}
	cfg, err := Parse(data, format, opts)
	if cfg != nil {
		cfg.Path = path
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		ve.File = path
	}
	return cfg, err
}

// readLimited reads at most maxFileBytes+1 bytes of path, so that a huge
// file (or /dev/zero) is never read whole. size is the file's size: its
// length when it was read whole, else its stat size (at least what was read).
func readLimited(path string) (data []byte, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	size = int64(len(data))
	if fi, serr := f.Stat(); serr == nil && size > maxFileBytes && fi.Mode().IsRegular() {
		size = max(size, fi.Size())
	}
	return data, size, err
}

// Parse is Load without the file: data is the file content in format
// ("yaml", "yml", "toml" or "json"). It never panics on any input.
func Parse(data []byte, format string, opts Options) (*Config, error) {
	var probs problems
	exp := newExpander(opts.Environ, probs.warn, probs.errMsg)
	d := &decoder{probs: &probs, exp: exp, purpose: opts.Purpose}
	raw, err := decodeRaw(data, format)
	if err != nil {
		probs.err("", "%v", err)
		return nil, &ValidationError{File: "config", Problems: probs.list}
	}
	cfg := &Config{}
	z := zones{}
	src := loadScalars(cfg, raw, d, opts)
	cfg.SecretEnv = exp.refs["redis.password"]
	checkTop(cfg, &probs, opts, z, src)
	loadNotify(cfg, raw, d)
	loadJobs(cfg, raw, d, opts, z)
	checkRetention(cfg, &probs, src)
	if probs.hasErrors() {
		return nil, &ValidationError{File: "config", Problems: probs.list}
	}
	cfg.Warnings = probs.list
	return cfg, nil
}

// decodeRaw parses data with viper's codec for format (yaml.v3 directly
// for YAML, so that its node tree can be measured first), keeping key case
// (viper itself lower-cases every key, which would corrupt job env names).
// Size and nesting depth are checked before decoding (limits.go); invalid
// UTF-8 is rejected in every format (with its byte offset); an empty or
// blank file is an empty config in every format.
func decodeRaw(data []byte, format string) (map[string]any, error) {
	dec, err := viper.NewCodecRegistry().Decoder(format)
	if err != nil || !slices.Contains([]string{"yaml", "yml", "toml", "json"}, format) {
		return nil, fmt.Errorf("unsupported config format %q; use yaml, toml or json", format)
	}
	if len(data) > maxFileBytes {
		return nil, inputError(tooLarge(int64(len(data))))
	}
	if !utf8.Valid(data) {
		off := invalidUTF8(data)
		line, col := lineCol(data, off)
		return nil, fmt.Errorf("invalid UTF-8 at byte offset %d (line %d, column %d); save the file as UTF-8", off, line, col)
	}
	raw := map[string]any{}
	if len(bytes.TrimSpace(data)) == 0 {
		return raw, nil
	}
	switch format {
	case "yaml", "yml":
		raw, err = decodeYAML(data)
	case "toml":
		if line := tomlTooDeep(data); line > 0 {
			return nil, inputError(tooDeep(line))
		}
		err = dec.Decode(data, raw)
	case "json":
		if err = checkJSON(data); err == nil {
			err = dec.Decode(data, raw)
		}
	}
	if err != nil {
		return nil, syntaxError(data, format, err)
	}
	return raw, nil
}

// syntaxError renders a parser error once, with its position: line:column
// for JSON (from the byte offset) and TOML, the parser's own line for YAML.
func syntaxError(data []byte, format string, err error) error {
	name := strings.ToUpper(format)
	if name == "YML" {
		name = "YAML"
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var pe interface{ Position() (row, column int) } // go-toml/v2's DecodeError
	var le inputError
	switch {
	case errors.As(err, &le):
		return le
	case errors.As(err, &pe):
		row, col := pe.Position()
		return fmt.Errorf("invalid %s at line %d, column %d: %s", name, row, col, strings.TrimPrefix(oneLine(err.Error()), "toml: "))
	case errors.As(err, &se):
		line, col := lineCol(data, int(se.Offset)-1) // Offset is just past the bad byte
		return fmt.Errorf("invalid JSON at line %d, column %d: %s", line, col, se.Error())
	case errors.As(err, &te):
		line, col := lineCol(data, int(te.Offset)-1)
		return fmt.Errorf("invalid JSON at line %d, column %d: want an object of settings, got a JSON %s", line, col, te.Value)
	}
	msg := oneLine(err.Error())
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "toml: ")
	if name == "YAML" {
		msg += quoteHint(data, msg)
	}
	return fmt.Errorf("invalid %s: %s", name, msg)
}

// invalidUTF8 returns the byte offset of the first invalid UTF-8 sequence.
func invalidUTF8(data []byte) int {
	for off := 0; off < len(data); {
		r, n := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && n <= 1 {
			return off
		}
		off += n
	}
	return len(data)
}

// lineCol returns the 1-based line and column (in bytes) of offset off,
// clamped to data.
func lineCol(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	line = 1 + bytes.Count(data[:off], []byte("\n"))
	return line, off - bytes.LastIndexByte(data[:off], '\n')
}

// oneLine folds a multi-line parser message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
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

// resolveBackend returns lock.backend, or when unset "redis" if a Redis
// address was configured in the file, environment or flags (the built-in
// default address does not count) and "memory" otherwise.
func resolveBackend(cfg *Config) string {
	addressGiven := cfg.Redis.Address != "" || len(cfg.Redis.Addresses) > 0
	backend := cfg.Lock.Backend
	if backend == "" && addressGiven {
		backend = "redis"
	} else if backend == "" {
		backend = "memory"
	}
	if backend == "redis" && !addressGiven {
		cfg.Redis.Address, cfg.Redis.AddressDefaulted = DefaultRedisAddress, true
	}
	return backend
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

// sortedKeys returns m's keys in sorted order, for deterministic output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
