package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cronlock/cronlock/config"
)

// loadConfig loads path and prints its warnings. When the config cannot be
// used it prints every problem to stderr (one per line) and returns nil and
// exit code 1. A file that could not be decoded at all (syntax, size or
// nesting limit) has one problem without a path; it is printed on one line.
func loadConfig(path string, purpose config.Purpose, flags map[string]string, env *runEnv) (*config.Config, int) {
	cfg, err := config.Load(path, env.loadOptions(purpose, flags))
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
	case err != nil:
		fmt.Fprintf(env.stderr, "cronlock: %v\n", err)
		return nil, 1
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(env.stderr, w.String())
	}
	return cfg, 0
}

// runValidate implements -validate: load for validation and print the
// seed's summary. The Redis password is never printed.
func runValidate(path string, flags map[string]string, env *runEnv) int {
	cfg, code := loadConfig(path, config.ForValidate, flags, env)
	if cfg == nil {
		return code
	}
	fmt.Fprintf(env.stdout, "Configuration valid: %s\n", path)
	fmt.Fprintln(env.stdout, backendSummary(cfg))
	fmt.Fprintf(env.stdout, "Node id: %s (%s)\n", cfg.Node.ID, cfg.Node.IDOrigin())
	fmt.Fprintf(env.stdout, "Jobs: %d\n", len(cfg.Jobs))
	return 0
}

// backendSummary is the "Redis: ADDR" line (addresses only, no
// credentials), or the memory backend notice.
func backendSummary(cfg *config.Config) string {
	if cfg.Lock.Backend != "redis" {
		return "Lock backend: memory (single node)"
	}
	r := cfg.Redis
	addrs := r.Address
	if len(r.Addresses) > 0 {
		addrs = strings.Join(r.Addresses, ", ")
	}
	switch {
	case r.SentinelMaster != "":
		return fmt.Sprintf("Redis: %s (sentinel master %q)", addrs, r.SentinelMaster)
	case len(r.Addresses) > 1:
		return fmt.Sprintf("Redis: %s (cluster)", addrs)
	}
	return "Redis: " + addrs
}
