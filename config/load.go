package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	_ "time/tzdata" // schedules must resolve zones on hosts without /usr/share/zoneinfo
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

// Parse is Load without the file: data is the file content in format
// ("yaml", "yml", "toml" or "json"). It never panics on any input.
//
// Loading runs in five phases, each in the file named for it: read
// (read.go: bytes to a raw tree, input guards), expand (expand.go:
// `${VAR}` in file values, unknown keys), decode (decode.go for the
// settings, layered file < environment < flags with viper;
// decode_jobs.go for `defaults:` and the jobs), default (defaults.go)
// and validate (validate.go for the settings, validate_jobs.go for the
// jobs). The settings go through the phases together (loadScalars decodes
// over viper's defaults layer; checkTop fills the defaults that depend on
// other values, then checks); each job goes through decode, default and
// validate before the next (loadJobs), so that its problems stay together.
// Every phase records its problems and goes on: one load reports them all.
func Parse(data []byte, format string, opts Options) (*Config, error) {
	var probs problems
	exp := newExpander(opts.Environ, probs.warn, probs.errMsg)
	d := &decoder{probs: &probs, exp: exp, purpose: opts.Purpose}
	raw, err := decodeRaw(data, format) // read
	if err != nil {
		probs.err("", "%v", err)
		return nil, &ValidationError{File: "config", Problems: probs.list}
	}
	cfg := &Config{}
	z := zones{}
	src := loadScalars(cfg, raw, d, opts) // expand (checkTree), decode, default (viper's layer)
	cfg.SecretEnv = exp.refs["redis.password"]
	checkTop(cfg, &probs, opts, z, src) // default (node.state_dir, node.id), validate
	loadNotify(cfg, raw, d)             // notify: decode, validate
	loadJobs(cfg, raw, d, opts, z)      // each job: decode, default, validate
	checkRetention(cfg, &probs, src)    // validate across settings and jobs
	if probs.hasErrors() {
		return nil, &ValidationError{File: "config", Problems: probs.list}
	}
	cfg.Warnings = probs.list
	return cfg, nil
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

// loadJobs decodes `defaults:` and every job of `jobs:`, merges them with
// the built-in defaults and validates each job. Every problem
// is recorded once: a value set in `defaults:` is checked under
// `defaults.<key>`, not again in each job that inherits it. A bad job does
// not stop the others from being checked.
func loadJobs(cfg *Config, raw map[string]any, d *decoder, opts Options, z zones) {
	c := &checker{cfg: cfg, p: d.probs, opts: opts, z: z, scheds: schedCache{}, host: newHostChecks(d.exp.env["PATH"]),
		argSpace: argSpace(), inherited: -1}
	jd := newJobDecoder(d)
	var dbad map[string]bool
	if rd, ok := raw["defaults"]; ok && rd != nil {
		if m, ok := asMap(rd); ok {
			cfg.Defaults, dbad = jd.fields(m, "defaults.", jd.dknown)
			c.fields("defaults.", cfg.Defaults)
		} else {
			d.probs.err("defaults", "want a mapping of job fields, got %s", describe(rd))
		}
	}
	list, ok := raw["jobs"].([]any)
	if rj := raw["jobs"]; rj != nil && !ok {
		d.probs.err("jobs", "want a list of jobs, got %s", describe(rj))
		return
	}
	if len(list) == 0 {
		d.probs.warn("jobs", "no jobs configured; add at least one job under `jobs:`")
		return
	}
	inherited := jd.inherited(cfg.Defaults, builtinJobDefaults())
	seen := make(map[string]int, len(list))
	cfg.Jobs = make([]Job, 0, len(list))
	for i, e := range list {
		m, ok := asMap(e)
		if !ok {
			d.probs.err(fmt.Sprintf("jobs[%d]", i), "want a mapping with name, schedule and command, got %s", describe(e))
			continue
		}
		start := len(d.probs.list)
		job, base, own, bad := jd.decode(i, m, inherited, seen, dbad)
		c.fields(base+": ", own)
		c.checkJob(&job, base, own, bad)
		jd.sortProblems(d.probs.list[start:], i, base)
		cfg.Jobs = append(cfg.Jobs, job)
	}
}
