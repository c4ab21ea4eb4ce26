package config

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestEnvOverrides_Unknown: a CRONLOCK_* variable that is no override is a
// warning with the closest override; run variables (a cronlock command
// started from inside a job sees them) and the internal clock offset are
// not; CRONLOCK_NODE_ID stays the node.id override.
func TestEnvOverrides_Unknown(t *testing.T) {
	wantProblems(t, job(""), "yaml", Options{Environ: []string{"CRONLOCK_REDIS_ADRESS=x:1", "CRONLOCK_REDIS_ADRESS=x:2", "CRONLOCK_LOG_LEVLE=debug"}},
		`warning: environment: CRONLOCK_REDIS_ADRESS is not a cronlock setting and is ignored (did you mean CRONLOCK_REDIS_ADDRESS?)`,
		`warning: environment: CRONLOCK_LOG_LEVLE is not a cronlock setting and is ignored (did you mean CRONLOCK_LOG_LEVEL?)`)
	wantProblems(t, job(""), "yaml", Options{Environ: []string{"CRONLOCK_FROBNICATE=1"}},
		`warning: environment: CRONLOCK_FROBNICATE is not a cronlock setting and is ignored; the variables are CRONLOCK_ + a config key in upper case with _ for ., e.g. CRONLOCK_REDIS_ADDRESS`)
	inJob := []string{"CRONLOCK_INTERNAL_CLOCK_OFFSET=1s", "CRONLOCK_NODE_ID=n1"}
	for _, v := range RunVariables {
		if v != "CRONLOCK_NODE_ID" {
			inJob = append(inJob, v+"=1")
		}
	}
	cfg := mustParse(t, job(""), "yaml", Options{Environ: inJob})
	if len(cfg.Warnings) != 0 || cfg.Node.ID != "n1" {
		t.Errorf("inside a job: warnings %q, node.id %q; want none and n1", render(cfg.Warnings), cfg.Node.ID)
	}
}

// TestRunVariables_MatchActors: every CRONLOCK_* variable that
// actors/env.go gives a run or a hook is in RunVariables (so a cronlock
// command run from a job does not warn about it), and each entry of
// RunVariables is one of them.
func TestRunVariables_MatchActors(t *testing.T) {
	src, err := os.ReadFile("../actors/env.go")
	if err != nil {
		t.Fatal(err)
	}
	var set []string
	for _, m := range regexp.MustCompile(`"(CRONLOCK_[A-Z_]+)="`).FindAllStringSubmatch(string(src), -1) {
		set = append(set, m[1])
	}
	if len(set) < 10 {
		t.Fatalf("found only %q in actors/env.go; has the way run variables are set changed?", set)
	}
	for _, v := range set {
		if !slices.Contains(RunVariables, v) {
			t.Errorf("actors/env.go sets %s, which RunVariables lacks", v)
		}
	}
	for _, v := range RunVariables {
		if !slices.Contains(set, v) {
			t.Errorf("RunVariables has %s, which actors/env.go does not set", v)
		}
	}
}
