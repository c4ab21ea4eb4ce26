package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/cronlock/cronlock/config"
)

// loadConfig loads path and prints its warnings. When the config cannot be
// used it prints every problem to stderr (one per line) and returns nil and
// exit code 1. A file that could not be decoded at all (syntax, size or
// nesting limit) has one problem without a path; it is printed on one line.
func loadConfig(path string, purpose config.Purpose, flags map[string]string, env *runEnv) (*config.Config, int) {
	cfg, err := config.Load(path, env.loadOptions(purpose, flags))
	return reportLoad(path, cfg, err, env)
}

// reportLoad prints the outcome of config.Load(path) as loadConfig
// describes it and returns the config (nil when unusable) and exit code.
func reportLoad(path string, cfg *config.Config, err error, env *runEnv) (*config.Config, int) {
	var ve *config.ValidationError
	switch {
	case errors.As(err, &ve) && len(ve.Problems) == 1 && ve.Problems[0].Path == "" && !ve.Problems[0].Warning:
		fmt.Fprintf(env.stderr, "Configuration invalid: %s: %s\n", path, ve.Problems[0].Msg)
		return nil, 1
	case errors.As(err, &ve):
		n := 0
		for _, p := range ve.Problems {
			if !p.Warning {
				n++
			}
		}
		fmt.Fprintf(env.stderr, "Configuration invalid: %s (%d problem(s))\n", path, n)
		for _, p := range ve.Problems {
			fmt.Fprintln(env.stderr, p.String())
		}
		return nil, 1
	case err != nil && errors.Is(err, fs.ErrNotExist) && path == defaultConfig:
		fmt.Fprintf(env.stderr, "cronlock: %v; give the config file with -config FILE (default: cronlock.yaml in the working directory)\n", err)
		return nil, 1
	case err != nil:
		fmt.Fprintf(env.stderr, "cronlock: %v\n", err)
		return nil, 1
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(env.stderr, w.String())
	}
	return cfg, 0
}

// validateMode is how -validate reports: strict fails on warnings too
// (-strict), asJSON prints one JSON object on stdout (-json), allNotices
// lists every DST notice as text (-all-notices; else dstSummary).
type validateMode struct{ strict, asJSON, allNotices bool }

// runValidate implements -validate: load for validation and print the
// seed's summary, or with -json the validateResult. -strict makes a
// config with warnings invalid (exit 1). A valid config also gets one DST
// notice per fixed-time job that the next DST transition within a year of
// env.clockNow() affects (dstNotices): printed as `notice: PATH: MSG` on
// stderr after the warnings (more than dstListMax summarised per zone and
// transition unless mode.allNotices: dstSummary), severity "notice" in
// -json (every one); notices describe
// designed behaviour, so they never fail validation, not even with
// -strict. The Redis password is never printed.
//
// On a host with systemd (validate_unit.go): run inside a cronlock service,
// as the shipped unit's ExecReload= runs it before signalling the daemon,
// the file is checked as the daemon loads it at start and reload (a host
// problem is an error, not a warning), so that `systemctl reload` fails
// when the daemon would reject the file; and when the unit's ExecStart=
// names this file, jobs whose work_dir or user cannot work under the
// unit's settings get warnings.
func runValidate(path string, flags map[string]string, mode validateMode, env *runEnv) int {
	uc := probeUnit(path, env.environ)
	purpose := config.ForValidate
	if uc.inside != "" {
		purpose = config.ForStart
	}
	cfg, err := config.Load(path, env.loadOptions(purpose, flags))
	var notices []config.Problem
	if err == nil {
		cfg.Warnings = append(cfg.Warnings, unitWarnings(cfg, uc)...)
	}
	if err == nil && mode.asJSON {
		notices = dstNotices(cfg, env.clockNow())
	} else if err == nil {
		notices = dstSummary(cfg, env.clockNow(), mode.allNotices)
	}
	if mode.asJSON {
		return printValidateJSON(env.stdout, path, cfg, err, notices, mode.strict)
	}
	if mode.strict && err == nil && len(cfg.Warnings) > 0 {
		fmt.Fprintf(env.stderr, "Configuration invalid: %s (%d warning(s), and -strict fails on warnings)\n", path, len(cfg.Warnings))
		for _, w := range cfg.Warnings {
			fmt.Fprintln(env.stderr, w.String())
		}
		printNotices(env.stderr, notices)
		return 1
	}
	cfg, code := reportLoad(path, cfg, err, env)
	if cfg == nil {
		return code
	}
	printNotices(env.stderr, notices)
	fmt.Fprintf(env.stdout, "Configuration valid: %s\n", path)
	fmt.Fprintln(env.stdout, backendSummary(cfg))
	fmt.Fprintf(env.stdout, "Node id: %s (%s)\n", cfg.Node.ID, cfg.Node.IDOrigin())
	fmt.Fprintf(env.stdout, "Jobs: %d\n", len(cfg.Jobs))
	return 0
}

// printNotices prints each notice as `notice: PATH: MSG`, one per line.
func printNotices(w io.Writer, notices []config.Problem) {
	for _, n := range notices {
		fmt.Fprintf(w, "notice: %s: %s\n", n.Path, n.Msg)
	}
}

// validateResult is what `cronlock -validate -json` prints: one object,
// also for a file that cannot be read or decoded at all.
type validateResult struct {
	Valid    bool          `json:"valid"`    // no errors (with -strict: no warnings either); the exit code is 0 exactly when true
	Config   string        `json:"config"`   // the -config path as given
	Problems []problemJSON `json:"problems"` // every error and warning in the order Load found them; [] when none
}

// problemJSON is one config.Problem of a validateResult.
type problemJSON struct {
	Path     string `json:"path"`     // e.g. `jobs[2] "backup": schedule`; "" for the file as a whole (unreadable, undecodable)
	Severity string `json:"severity"` // "error", "warning" or "notice" (a DST notice, which never makes the config invalid)
	Message  string `json:"message"`  // config.Problem.Msg, without the path
}

// printValidateJSON writes the validateResult of config.Load(path) (cfg,
// err), followed by the DST notices, to w as one line of JSON and returns the exit code: 0 when valid,
// else 1. An error that is not a list of problems (the file is missing,
// its extension unsupported) is one error problem with path "".
func printValidateJSON(w io.Writer, path string, cfg *config.Config, err error, notices []config.Problem, strict bool) int {
	var problems []config.Problem
	var ve *config.ValidationError
	switch {
	case errors.As(err, &ve):
		problems = ve.Problems
	case err != nil:
		problems = []config.Problem{{Msg: err.Error()}}
	default:
		problems = cfg.Warnings
	}
	res := validateResult{Valid: err == nil, Config: path, Problems: make([]problemJSON, 0, len(problems))}
	for _, p := range problems {
		sev := "error"
		if p.Warning {
			sev = "warning"
			res.Valid = res.Valid && !strict
		}
		res.Problems = append(res.Problems, problemJSON{Path: p.Path, Severity: sev, Message: p.Msg})
	}
	for _, n := range notices {
		res.Problems = append(res.Problems, problemJSON{Path: n.Path, Severity: "notice", Message: n.Msg})
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // messages quote config text: keep <, > and & readable
	_ = enc.Encode(res)      // strings, bools and slices of them always encode (invalid UTF-8 becomes U+FFFD)
	if res.Valid {
		return 0
	}
	return 1
}

// backendSummary is the "Redis: ADDR (MODE, TLS on|off)" line (addresses
// only, no credentials), or the memory backend notice. The mode is the one
// the configuration selects, redis.mode or inferred (a standalone address
// that is a Cluster node is found, and refused, only at connect).
func backendSummary(cfg *config.Config) string {
	if cfg.Lock.Backend != "redis" {
		return "Lock backend: memory (single node)"
	}
	r := cfg.Redis
	addrs := r.Address
	if len(r.Addresses) > 0 {
		addrs = strings.Join(r.Addresses, ", ")
	}
	if r.AddressDefaulted {
		addrs += " (the default address: lock.backend is redis and no redis.address is set)"
	}
	tls := "TLS off"
	if r.TLS.Enabled {
		tls = "TLS on"
	}
	switch r.EffectiveMode() {
	case "sentinel":
		return fmt.Sprintf("Redis: %s (sentinel, master %q, %s)", addrs, r.SentinelMaster, tls)
	case "cluster":
		return fmt.Sprintf("Redis: %s (cluster, %s)", addrs, tls)
	}
	return fmt.Sprintf("Redis: %s (standalone, %s)", addrs, tls)
}
