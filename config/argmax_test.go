package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestArgLimits: a command, hook or env entry longer than one exec string
// may be is an error naming the job and field (every run would fail with
// E2BIG); a job whose argument list with its environment exceeds exec's
// space on this host is a host problem.
func TestArgLimits(t *testing.T) {
	at := strings.Repeat("x", maxArgStrlen-1) // the longest string exec takes
	over := at + "x"
	oneArg := `is 131072 bytes, more than the 131071 bytes Linux allows in one argument (MAX_ARG_STRLEN, NUL included); every run would fail with "argument list too long"; put it in a script file and run that`
	tests := []struct {
		name, data string
		want       []string
	}{
		{"at the limit", "jobs:\n- {name: j, schedule: '@daily', command: " + at + ", on_failure: " + at + "}\n", nil},
		{"command", "jobs:\n- {name: j, schedule: '@daily', command: " + over + "}\n", []string{`jobs[0] "j": command: the command ` + oneArg}},
		{"hook", "jobs:\n- {name: j, schedule: '@daily', command: x, on_success: " + over + "}\n", []string{`jobs[0] "j": on_success: the on_success ` + oneArg}},
		{"defaults once", "defaults: {command: " + over + "}\njobs:\n- {name: a, schedule: '@daily'}\n- {name: b, schedule: '@daily'}\n",
			[]string{`defaults.command: the command ` + oneArg}},
		{"env entry", "jobs:\n- {name: j, schedule: '@daily', command: x, env: {BIG: " + at[3:] + "}}\n",
			[]string{`jobs[0] "j": env.BIG: BIG=… is 131072 bytes, more than the 131071 bytes Linux allows in one environment string (MAX_ARG_STRLEN, NUL included); every run would fail with "argument list too long"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantProblems(t, tt.data, "yaml", Options{Purpose: ForStart}, tt.want...) })
	}

	// Each entry fits, all of them together do not: one entry in the job's
	// env, the rest inherited from the daemon's environment (where
	// CRONLOCK_* variables do not count); a job that does not inherit it
	// fits. (The file stays small: YAML scanning is slow under -race.)
	space := argSpace()
	var b strings.Builder
	b.WriteString("jobs:\n- name: j\n  schedule: '@daily'\n  command: x\n  env:\n")
	var environ []string
	for i := range space/(maxArgStrlen-100) + 1 {
		if i == 0 {
			fmt.Fprintf(&b, "    E%03d: %s\n", i, at[:maxArgStrlen-100])
		} else {
			environ = append(environ, fmt.Sprintf("E%03d=%s", i, at[:maxArgStrlen-100]), "CRONLOCK_X"+strconv.Itoa(i)+"="+at[:maxArgStrlen-100])
		}
	}
	re := regexp.MustCompile(`^(warning: )?jobs\[0\] "j": command: /bin/sh -c <command> and the run's environment take \d+ bytes, ` +
		`more than the (\d+) bytes exec allows on this host \(a quarter of the stack limit, ulimit -s, at most 6 MiB\); ` +
		`every run would fail with "argument list too long"; make env or the command smaller(; the daemon will refuse to start)?$`)
	for _, purpose := range []Purpose{ForStart, ForValidate} {
		var got []string
		for _, p := range render(problemsOf(t, b.String(), "yaml", Options{Purpose: purpose, Environ: environ})) {
			if !strings.Contains(p, "CRONLOCK_X") { // the unknown-variable warnings
				got = append(got, p)
			}
		}
		m := []string(nil)
		if len(got) == 1 {
			m = re.FindStringSubmatch(got[0])
		}
		switch {
		case m == nil:
			t.Errorf("purpose %d: got %q, want one problem matching %s", purpose, got, re)
		case m[2] != strconv.Itoa(space):
			t.Errorf("purpose %d: limit %s, want this host's %d", purpose, m[2], space)
		case (m[1] == "") != (purpose == ForStart) || (m[3] == "") != (purpose == ForStart):
			t.Errorf("purpose %d: got %q, want an error at start and a warning at -validate", purpose, got[0])
		}
	}
	minimal := strings.Replace(b.String(), "  env:\n", "  inherit_env: false\n  env:\n", 1)
	for _, p := range render(problemsOf(t, minimal, "yaml", Options{Purpose: ForStart, Environ: environ})) {
		if !strings.Contains(p, "CRONLOCK_X") {
			t.Errorf("inherit_env: false: got %q, want no problem (the daemon's environment is not passed on)", p)
		}
	}
}
