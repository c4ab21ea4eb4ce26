package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestHelp_ListsEverySubcommand(t *testing.T) {
	var names []string
	for name := range subcommands() {
		names = append(names, name)
	}
	var listed []string
	for _, c := range commandSummaries {
		listed = append(listed, c.name)
	}
	slices.Sort(names)
	slices.Sort(listed)
	if !slices.Equal(names, listed) {
		t.Fatalf("commandSummaries %v; subcommands() %v: every subcommand needs one line of help", listed, names)
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, errOut := runCLI(t, nil, args...)
		if code != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
		for _, c := range commandSummaries {
			if !strings.Contains(out, "\n  "+c.name+" ") || !strings.Contains(out, c.summary) {
				t.Errorf("%v does not list %q with its summary:\n%s", args, c.name, out)
			}
		}
		for _, flag := range []string{"-config", "-validate", "-version", "-log-level"} {
			if !strings.Contains(out, "  "+flag) {
				t.Errorf("%v does not show the daemon flag %s", args, flag)
			}
		}
	}
}

func TestHelp_CommandShowsItsFlags(t *testing.T) {
	tests := map[string][]string{
		"next":       {"-config", "-n", "-from", "-json", "-schedule", "-timezone"},
		"status":     {"-config", "-json"},
		"history":    {"-config", "-n", "-json"},
		"run":        {"-config", "-force"},
		"backfill":   {"-config", "-from", "-to", "-overlap", "-dry-run"},
		"pause":      {"-config"},
		"resume":     {"-config"},
		"completion": {"bash", "zsh"},
		"help":       {"COMMAND"},
	}
	for cmd, want := range tests {
		code, helpOut, errOut := runCLI(t, nil, "help", cmd)
		if code != 0 {
			t.Errorf("help %s: exit %d, stderr %q", cmd, code, errOut)
		}
		code, _, dashH := runCLI(t, nil, cmd, "-h")
		if code != 0 {
			t.Errorf("%s -h: exit %d", cmd, code)
		}
		for _, w := range want {
			if !strings.Contains(helpOut, w) {
				t.Errorf("help %s lacks %q:\n%s", cmd, w, helpOut)
			}
			if cmd != "help" && !strings.Contains(dashH, w) {
				t.Errorf("%s -h lacks %q:\n%s", cmd, w, dashH)
			}
		}
	}
}

func TestHelp_UnknownCommandSuggestsTheNearest(t *testing.T) {
	tests := []struct{ args []string }{{[]string{"stauts"}}, {[]string{"help", "stauts"}}}
	for _, tt := range tests {
		code, _, errOut := runCLI(t, nil, tt.args...)
		if code != 2 || !strings.Contains(errOut, `unknown command "stauts"; did you mean "status"?`) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a suggestion of status", tt.args, code, errOut)
		}
	}
	for name, want := range map[string]string{"histroy": "history", "rn": "run", "pasue": "pause", "nxt": "next", "completon": "completion", "frobnicate": ""} {
		if got := nearestCommand(name); got != want {
			t.Errorf("nearestCommand(%q) = %q, want %q", name, got, want)
		}
	}
}

// completionScript writes `cronlock completion SHELL` to a file.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	code, out, errOut := runCLI(t, nil, "completion", shell)
	if code != 0 {
		t.Fatalf("completion %s: exit %d, stderr %q", shell, code, errOut)
	}
	path := filepath.Join(t.TempDir(), "cronlock."+shell)
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCompletion_BashSourcesAndCompletes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	script := completionScript(t, "bash")
	// Source it with errexit and nounset, then ask for completions as bash
	// would: COMP_WORDS/COMP_CWORD in, COMPREPLY out.
	probe := `set -eu; source "$1"; complete -p cronlock
c() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _cronlock; echo "${COMPREPLY[*]}"; }
c cronlock st; c cronlock history -; c cronlock -va; c cronlock completion ''; c cronlock help pa`
	out, err := exec.Command(bash, "-c", probe, "bash", script).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	want := "complete -F _cronlock cronlock\nstatus\n-config -events -from -json -missed -n -output -runs -status -to\n-validate\nbash zsh\npause\n"
	if string(out) != want {
		t.Errorf("bash completion:\n%s\nwant\n%s", out, want)
	}
}

func TestCompletion_ZshParses(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("zsh not installed (Debian package zsh; .ci/run installs it): only the bash script is checked")
	}
	script := completionScript(t, "zsh")
	if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
		t.Errorf("zsh -n: %v\n%s", err, out)
	}
	// Loaded after compinit, it registers itself for cronlock.
	probe := `autoload -Uz compinit && compinit -u -d "$1/zcompdump" && source "$0" && print -r -- ${_comps[cronlock]}`
	out, err := exec.Command(zsh, "-f", "-c", probe, script, t.TempDir()).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_cronlock" {
		t.Errorf("zsh: %v: %q; want _cronlock registered for cronlock", err, out)
	}
}

func TestCompletion_Errors(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "fish"}, {"completion", "bash", "zsh"}} {
		if code, _, errOut := runCLI(t, nil, args...); code != 2 || !strings.Contains(errOut, "bash") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and the usage", args, code, errOut)
		}
	}
}

func TestVersion_JSON(t *testing.T) {
	code, out, _ := runCLI(t, nil, "-version", "-json")
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("-version -json: exit %d, %v: %q", code, err, out)
	}
	if len(got) != 3 || got["go_version"] != runtime.Version() {
		t.Errorf("-version -json = %v; want version, commit and go_version %s", got, runtime.Version())
	}
	if code, _, errOut := runCLI(t, nil, "-json"); code != 2 || !strings.Contains(errOut, "-version") {
		t.Errorf("-json alone: exit %d, stderr %q; want 2 naming -version", code, errOut)
	}
}

func TestBuildInfo_Metric(t *testing.T) {
	b := buildInfo{Version: "1.2.3", Commit: "abc1234", GoVersion: "go1.26.8"}
	reg := newMetricsRegistry(b)
	want := `
# HELP cronlock_build_info Always 1; the labels say which cronlock build is running (version, commit, Go version).
# TYPE cronlock_build_info gauge
cronlock_build_info{commit="abc1234",go_version="go1.26.8",version="1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cronlock_build_info"); err != nil {
		t.Error(err)
	}
}
