package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoFile is the path of a file relative to the repository root (tests
// run in cmd/cronlock).
func repoFile(name string) string { return filepath.Join("..", "..", name) }

// unitKeys parses a systemd unit file into "Section.Key" → values (a key
// may repeat). Comments and blank lines are skipped.
func unitKeys(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: %q is not KEY=VALUE inside a section", path, n, line)
			}
			keys[section+"."+k] = append(keys[section+"."+k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestPackaging_UnitFileSettings(t *testing.T) {
	keys := unitKeys(t, repoFile("packaging/cronlock.service"))
	want := map[string]string{
		"Unit.After":                     "network-online.target",
		"Unit.Wants":                     "network-online.target",
		"Service.Type":                   "notify",
		"Service.ExecStart":              "/usr/local/bin/cronlock -config /etc/cronlock/cronlock.yaml",
		"Service.ExecReload":             "/bin/kill -HUP $MAINPID",
		"Service.WatchdogSec":            "30s",
		"Service.Restart":                "on-failure",
		"Service.RestartSec":             "5s",
		"Service.KillMode":               "mixed",
		"Service.TimeoutStopSec":         "90s",
		"Service.User":                   "cronlock",
		"Service.Group":                  "cronlock",
		"Service.StateDirectory":         "cronlock",
		"Service.ConfigurationDirectory": "cronlock",
		"Service.NoNewPrivileges":        "yes",
		"Service.ProtectSystem":          "full",
		"Service.ProtectHome":            "read-only",
		"Service.PrivateTmp":             "yes",
		"Service.ProtectKernelTunables":  "yes",
		"Service.ProtectKernelModules":   "yes",
		"Service.ProtectControlGroups":   "yes",
		"Service.RestrictSUIDSGID":       "yes",
		"Service.LockPersonality":        "yes",
		"Service.RestrictRealtime":       "yes",
		"Install.WantedBy":               "multi-user.target",
	}
	for k, v := range want {
		if got := keys[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s: got %q, want exactly %q", k, got, v)
		}
	}
	// sd_notify comes from the main process only: the default
	// NotifyAccess=main is what cronlock needs; anything else widens it.
	if got, ok := keys["Service.NotifyAccess"]; ok && (len(got) != 1 || got[0] != "main") {
		t.Errorf("NotifyAccess: got %q, want unset (main)", got)
	}
}

func TestPackaging_SystemdAnalyzeVerify(t *testing.T) {
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (host tool from the Debian 'systemd' package); " +
			"the unit's settings are still checked by TestPackaging_UnitFileSettings")
	}
	// ExecStart must name an existing executable for verify to pass: point
	// a copy of the unit at this test binary instead of /usr/local/bin.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(repoFile("packaging/cronlock.service"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(unit), "ExecStart=/usr/local/bin/cronlock ", "ExecStart="+exe+" ", 1)
	if text == string(unit) {
		t.Fatal("ExecStart=/usr/local/bin/cronlock not found in the unit")
	}
	path := filepath.Join(t.TempDir(), "cronlock.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tool, "verify", path).CombinedOutput()
	// Without a running systemd, verify reports problems but may exit 0:
	// any line about our unit is a failure.
	if err != nil || strings.Contains(string(out), "cronlock.service") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// installScript runs packaging/install.sh with bash and extra PATH entries
// first, and returns its exit code and combined output.
func installScript(t *testing.T, pathPrefix string, args ...string) (int, string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed; install.sh needs it")
	}
	cmd := exec.Command(bash, append([]string{repoFile("packaging/install.sh")}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+pathPrefix+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func TestPackaging_InstallScriptSyntax(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed; install.sh needs it")
	}
	if out, err := exec.Command(bash, "-n", repoFile("packaging/install.sh")).CombinedOutput(); err != nil {
		t.Errorf("bash -n install.sh: %v\n%s", err, out)
	}
}

func TestPackaging_InstallDryRunListsSteps(t *testing.T) {
	code, out := installScript(t, "", "--dry-run")
	if code != 0 {
		t.Fatalf("install.sh --dry-run: exit %d\n%s", code, out)
	}
	// In order; the user and config steps depend on this machine's state.
	steps := []string{
		"nothing is changed",
		"+ make -C ",
		"+ install -D -m 0755 ",
		"cronlock",
		"+ install -d -m 0750 -o root -g cronlock /etc/cronlock",
		"/etc/cronlock/cronlock.yaml",
		"+ /usr/local/bin/cronlock -validate -config /etc/cronlock/cronlock.yaml",
		"+ install -D -m 0644 ",
		"packaging/cronlock.service /etc/systemd/system/cronlock.service",
		"daemon-reload",
		"# done",
	}
	rest := out
	for _, s := range steps {
		i := strings.Index(rest, s)
		if i < 0 {
			t.Fatalf("dry run output lacks %q (in order):\n%s", s, out)
		}
		rest = rest[i+len(s):]
	}
	if !strings.Contains(out, "+ useradd --system") && !strings.Contains(out, "# user 'cronlock' exists") {
		t.Errorf("dry run neither creates nor finds the cronlock user:\n%s", out)
	}
	if !strings.Contains(out, "example-redis.yaml /etc/cronlock/cronlock.yaml") && !strings.Contains(out, "kept unchanged") {
		t.Errorf("dry run neither installs nor keeps the config:\n%s", out)
	}
}

func TestPackaging_InstallNeedsRoot(t *testing.T) {
	// A fake `id` makes the script believe it runs as uid 1000.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "id"), []byte("#!/bin/sh\necho 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out := installScript(t, dir+string(os.PathListSeparator))
	if code != 1 || !strings.Contains(out, "must run as root") || !strings.Contains(out, "--dry-run") {
		t.Errorf("install.sh as non-root: got exit %d, output %q; want 1 and a root message", code, out)
	}
	if code, out := installScript(t, "", "--bogus"); code != 2 || !strings.Contains(out, "unknown argument") {
		t.Errorf("install.sh --bogus: got exit %d, output %q; want 2", code, out)
	}
}
