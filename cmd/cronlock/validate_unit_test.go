package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cronlock/cronlock/config"
)

func TestServiceUnit(t *testing.T) {
	inv := []string{"INVOCATION_ID=0123456789abcdef0123456789abcdef"}
	for _, tt := range []struct {
		environ []string
		cgroup  string
		want    string
	}{
		{inv, "0::/system.slice/cronlock.service\n", "cronlock.service"},
		{inv, "0::/system.slice/cronlock@eu.service\n", "cronlock@eu.service"},
		{inv, "0::/system.slice/cronlock.service/control\n", "cronlock.service"}, // a control process in a sub-cgroup
		{inv, "12:cpu,cpuacct:/\n1:name=systemd:/system.slice/cronlock.service\n0::/\n", "cronlock.service"},
		{nil, "0::/system.slice/cronlock.service\n", ""},              // not started by systemd
		{inv, "0::/system.slice/gitlab-runner.service\n", ""},         // another service (a CI runner validating a file)
		{inv, "0::/user.slice/user-1000.slice/session-3.scope\n", ""}, // a login shell
		{inv, "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-1.scope\n", ""},
		{inv, "0::/\n", ""}, // a container's own cgroup namespace
		{inv, "", ""},
	} {
		if got := serviceUnit(tt.environ, tt.cgroup); got != tt.want {
			t.Errorf("serviceUnit(%q, %q) = %q; want %q", tt.environ, tt.cgroup, got, tt.want)
		}
	}
}

func TestUnitConfigIs(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfigFile(t, dir, "cronlock.yaml", "jobs: []\n")
	other := writeConfigFile(t, dir, "other.yaml", "jobs: []\n")
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(cfg, link); err != nil {
		t.Fatal(err)
	}
	exec := func(argv string) map[string]string {
		return map[string]string{"WorkingDirectory": dir,
			"ExecStart": "{ path=/usr/bin/cronlock ; argv[]=" + argv + " ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }"}
	}
	for _, tt := range []struct {
		argv, path string
		want       bool
	}{
		{"/usr/bin/cronlock -config " + cfg, cfg, true},
		{"/usr/bin/cronlock --config " + cfg, cfg, true},
		{"/usr/bin/cronlock -config=" + cfg, cfg, true},
		{"/usr/bin/cronlock --config=" + cfg + " -log-level debug", cfg, true},
		{"/usr/bin/cronlock -config " + link, cfg, true}, // the same file
		{"/usr/bin/cronlock", cfg, true},                 // cronlock.yaml in WorkingDirectory=
		{"/usr/bin/cronlock -config " + cfg, other, false},
		{"/usr/bin/cronlock -config /etc/cronlock/none.yaml", "/etc/cronlock/none.yaml", true}, // neither exists: by name
		{"/usr/bin/cronlock -config /etc/cronlock/none.yaml", other, false},
	} {
		if got := unitConfigIs(exec(tt.argv), tt.path); got != tt.want {
			t.Errorf("ExecStart %q, config %s: %v; want %v", tt.argv, tt.path, got, tt.want)
		}
	}
	if unitConfigIs(map[string]string{}, cfg) {
		t.Error("no ExecStart: want false")
	}
}

// shippedProps are systemctl show's properties of packaging/cronlock.service
// as systemd 252 prints them.
func shippedProps() map[string]string {
	return map[string]string{"LoadState": "loaded", "User": "cronlock", "CapabilityBoundingSet": "",
		"ProtectSystem": "strict", "ProtectHome": "read-only", "PrivateTmp": "yes", "StateDirectory": "cronlock",
		"WorkingDirectory": "/var/lib/cronlock"}
}

func TestAccessOf(t *testing.T) {
	props := shippedProps()
	props["ReadWritePaths"] = "/var/backups -/srv/data /home/alice/out"
	props["ReadOnlyPaths"] = "/srv/data/archive"
	props["InaccessiblePaths"] = "-/srv/secret"
	rules := unitRules(props)
	for dir, want := range map[string]access{
		"/var/lib/cronlock":       writable, // StateDirectory=
		"/var/lib/cronlock/jobs/": writable,
		"/var/lib/other":          readOnly,
		"/var/backups":            writable,
		"/var/backups/db":         writable,
		"/var/backupsX":           readOnly, // not below /var/backups
		"/srv/data/x":             writable,
		"/srv/data/archive/2026":  readOnly,
		"/srv/secret/k":           hidden,
		"/home/bob":               readOnly, // ProtectHome=read-only
		"/home/alice/out/today":   writable,
		"/root":                   readOnly,
		"/tmp/x":                  privateTmpfs,
		"/var/tmp":                privateTmpfs,
		"/":                       readOnly,
	} {
		if got, r := accessOf(rules, dir); got != want {
			t.Errorf("%s: access %d (%s); want %d", dir, got, r.setting, want)
		}
	}
	for ps, want := range map[string]access{"no": writable, "yes": writable, "full": readOnly, "strict": readOnly} {
		if got, _ := accessOf(unitRules(map[string]string{"ProtectSystem": ps}), "/etc/app"); got != want {
			t.Errorf("ProtectSystem=%s: /etc/app access %d; want %d", ps, got, want)
		}
	}
	if got, _ := accessOf(unitRules(map[string]string{"ProtectHome": "yes"}), "/home/alice"); got != hidden {
		t.Errorf("ProtectHome=yes: /home/alice access %d; want hidden", got)
	}
}

func TestUnitWarnings(t *testing.T) {
	job := func(name, workDir, user string) config.Job {
		return config.Job{Name: name, WorkDir: workDir, User: user}
	}
	cfg := &config.Config{Jobs: []config.Job{
		job("plain", "", ""),
		job("state", "/var/lib/cronlock/work", ""),
		job("backup", "/var/backups", ""),
		job("scratch", "/tmp/scratch", ""),
		job("as-alice", "", "alice"),
	}}
	shipped := unitContext{unit: "cronlock.service", props: shippedProps()}
	got := map[string]string{}
	for _, p := range unitWarnings(cfg, shipped) {
		if !p.Warning {
			t.Errorf("%s: not a warning", p)
		}
		got[p.Path] = p.Msg
	}
	want := map[string][]string{
		`jobs[2] "backup": work_dir`:  {`"/var/backups" is read-only for cronlock.service's jobs (ProtectSystem=strict)`, "ReadWritePaths=/var/backups", "write-paths.conf"},
		`jobs[3] "scratch": work_dir`: {"PrivateTmp=yes", "refuses to start"},
		`jobs[4] "as-alice": user`:    {"User=cronlock", "refuses to start", "run-as-root.conf"},
	}
	if len(got) != len(want) {
		t.Errorf("warnings %q; want them for %d paths", got, len(want))
	}
	for path, parts := range want {
		for _, s := range parts {
			if !strings.Contains(got[path], s) {
				t.Errorf("%s: %q lacks %q", path, got[path], s)
			}
		}
	}

	// The run-as-root drop-in: root with every capability, the host's /tmp
	// (which ProtectSystem=strict makes read-only unless it is in
	// ReadWritePaths=, as with PrivateTmp=no it is not the unit's own).
	root := shippedProps()
	root["User"], root["PrivateTmp"], root["ProtectHome"] = "root", "no", "no"
	root["CapabilityBoundingSet"] = "cap_chown cap_dac_override cap_kill cap_setgid cap_setuid"
	root["ReadWritePaths"] = "/tmp /var/tmp /var/backups"
	if ws := unitWarnings(cfg, unitContext{unit: "cronlock.service", props: root}); len(ws) != 0 {
		t.Errorf("run as root, /var/backups writable: warnings %v; want none", ws)
	}
	// Root without CAP_SETUID: user: fails at every run. PrivateTmp=no
	// without ReadWritePaths=/tmp: the host's /tmp is read-only.
	root["CapabilityBoundingSet"], root["ReadWritePaths"] = "", "/var/backups"
	ws := unitWarnings(cfg, unitContext{unit: "cronlock.service", props: root})
	if len(ws) != 2 || ws[0].Path != `jobs[3] "scratch": work_dir` || !strings.Contains(ws[0].Msg, "read-only") ||
		ws[1].Path != `jobs[4] "as-alice": user` || !strings.Contains(ws[1].Msg, "CAP_SETUID") {
		t.Errorf("root without capabilities nor a writable /tmp: %v; want a read-only warning on scratch's work_dir and one naming CAP_SETUID on as-alice's user", ws)
	}
	// Settings not known: nothing is said.
	if ws := unitWarnings(cfg, unitContext{unit: "cronlock.service"}); ws != nil {
		t.Errorf("no unit settings: %v; want none", ws)
	}
}

// TestRun_ValidateUnderTheShippedUnit runs -validate with a systemctl on
// PATH that answers as systemd does for the shipped unit: the warnings
// appear for the config the unit runs, and only for it.
func TestRun_ValidateUnderTheShippedUnit(t *testing.T) {
	dir := t.TempDir()
	work := t.TempDir() // under /tmp (or $TMPDIR): private under PrivateTmp=yes when it is /tmp
	path := writeConfigFile(t, dir, "cronlock.yaml", "node: {id: n1, state_dir: "+dir+"}\njobs:\n"+
		"- {name: ro, schedule: '@daily', command: 'true', work_dir: /usr}\n"+
		"- {name: tmp, schedule: '@daily', command: 'true', work_dir: "+work+"}\n"+
		"- {name: ok, schedule: '@daily', command: 'true'}\n")
	other := writeConfigFile(t, dir, "other.yaml", "node: {id: n1, state_dir: "+dir+"}\njobs:\n- {name: ro, schedule: '@daily', command: 'true', work_dir: /usr}\n")
	bin := t.TempDir()
	script := "#!/bin/sh\n[ \"$1\" = show ] || exit 1\ncat <<'EOF'\nLoadState=loaded\nUser=cronlock\nCapabilityBoundingSet=\n" +
		"ProtectSystem=strict\nProtectHome=read-only\nPrivateTmp=yes\nStateDirectory=cronlock\nWorkingDirectory=/var/lib/cronlock\n" +
		"ExecStart={ path=/usr/bin/cronlock ; argv[]=/usr/bin/cronlock -config " + path + " ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\nEOF\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	environ := []string{"PATH=" + bin + ":/usr/bin:/bin"}
	code, out, errOut := runCLI(t, environ, "-validate", "-config", path)
	if code != 0 || !strings.Contains(out, "Configuration valid") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, `warning: jobs[0] "ro": work_dir: "/usr" is read-only for cronlock.service's jobs (ProtectSystem=strict)`) {
		t.Errorf("no read-only warning for /usr:\n%s", errOut)
	}
	if strings.HasPrefix(work, "/tmp/") && !strings.Contains(errOut, `warning: jobs[1] "tmp": work_dir: `) {
		t.Errorf("no PrivateTmp warning for %s:\n%s", work, errOut)
	}
	if strings.Contains(errOut, `"ok"`) {
		t.Errorf("a warning for the job without work_dir:\n%s", errOut)
	}
	// Another file than the unit's: the unit's settings do not apply.
	if code, _, errOut := runCLI(t, environ, "-validate", "-config", other); code != 0 || strings.Contains(errOut, "cronlock.service") {
		t.Errorf("other.yaml: exit %d, stderr %q; want no unit warnings", code, errOut)
	}
	// systemctl failing (no systemd running): nothing is said.
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho 'System has not been booted with systemd' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, environ, "-validate", "-config", path); code != 0 || strings.Contains(errOut, "cronlock.service") {
		t.Errorf("without systemd: exit %d, stderr %q; want no unit warnings", code, errOut)
	}
}
