package config

import (
	"fmt"
	"slices"
	"strings"
)

// RunVariables are the CRONLOCK_* variables that a run's command and its
// hooks receive (actors/env.go sets them). They are not config overrides,
// and a cronlock command started from inside a job sees them, so they are
// not reported as unknown. CRONLOCK_NODE_ID is a run variable too, but it is
// also the node.id override and stays one (a `cronlock` started from a job
// uses the node id of the daemon that ran it).
var RunVariables = []string{
	"CRONLOCK_JOB", "CRONLOCK_NODE_ID", "CRONLOCK_RUN_ID", "CRONLOCK_SCHEDULED_TIME",
	"CRONLOCK_FENCING_TOKEN", "CRONLOCK_ATTEMPT", "CRONLOCK_TRIGGER",
	// hooks only
	"CRONLOCK_RESULT", "CRONLOCK_EXIT_CODE", "CRONLOCK_DURATION_MS", "CRONLOCK_STARTED_AT",
	"CRONLOCK_FINISHED_AT", "CRONLOCK_OUTPUT_TAIL", "CRONLOCK_OUTPUT_FILE",
}

// internalVariables are CRONLOCK_* variables the daemon reads that are not
// config keys: the test-only clock offset and run-record block
// (cmd/cronlock/daemon.go).
var internalVariables = []string{"CRONLOCK_INTERNAL_CLOCK_OFFSET", "CRONLOCK_INTERNAL_BLOCK_RUN_RECORDS"}

// unknownOverrides warns about each CRONLOCK_* variable of environ that is
// neither an override (envKeys: variable → key) nor a run or internal
// variable: a typo such as CRONLOCK_REDIS_ADRESS would otherwise be ignored
// without a word. The warning suggests the closest override.
func unknownOverrides(p *problems, environ []string, envKeys map[string]string) {
	suffixes := make([]string, 0, len(envKeys))
	for name := range envKeys {
		suffixes = append(suffixes, strings.TrimPrefix(name, "CRONLOCK_"))
	}
	seen := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, "CRONLOCK_")
		if _, override := envKeys[name]; !ok || override || seen[name] ||
			slices.Contains(RunVariables, name) || slices.Contains(internalVariables, name) {
			continue
		}
		seen[name] = true
		msg := name + " is not a cronlock setting and is ignored"
		if s := suggest(rest, suffixes); s != "" {
			msg += fmt.Sprintf(" (did you mean CRONLOCK_%s?)", s)
		} else {
			msg += "; the variables are CRONLOCK_ + a config key in upper case with _ for ., e.g. CRONLOCK_REDIS_ADDRESS"
		}
		p.warn("environment", msg)
	}
}
