package packaging

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/config"
)

// loadStarter loads packaging/cronlock.yaml as -validate does.
func loadStarter(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load(repoFile("packaging/cronlock.yaml"), config.Options{Purpose: config.ForValidate,
		Environ: []string{"STATE_DIRECTORY=/var/lib/cronlock"}, Euid: 1000, Hostname: "test-host"})
	if err != nil {
		t.Fatalf("packaging/cronlock.yaml: %v", err)
	}
	return cfg
}

func TestUnit_Settings(t *testing.T) {
	keys := unitKeys(t, repoFile("packaging/cronlock.service"))
	want := map[string]string{
		"Unit.After":                 "network-online.target",
		"Unit.Wants":                 "network-online.target",
		"Service.Type":               "notify",
		"Service.ExecStart":          "/usr/bin/cronlock -config /etc/cronlock/cronlock.yaml",
		"Service.EnvironmentFile":    "-/etc/default/cronlock",
		"Service.KillMode":           "mixed",
		"Service.User":               "cronlock",
		"Service.Group":              "cronlock",
		"Service.StateDirectory":     "cronlock",
		"Service.WorkingDirectory":   "/var/lib/cronlock",
		"Service.Restart":            "on-failure",
		"Service.ProtectSystem":      "strict",
		"Service.PrivateTmp":         "yes",
		"Service.NoNewPrivileges":    "yes",
		"Service.RestrictNamespaces": "yes",
		"Install.WantedBy":           "multi-user.target",
	}
	for k, v := range want {
		if got := keys[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s: got %q, want exactly %q", k, got, v)
		}
	}
	// Reload validates the file before the signal, so that an invalid one
	// fails `systemctl reload` (TestUnit_ExecReloadRejectsABrokenConfig).
	if got := keys["Service.ExecReload"]; !slices.Equal(got, []string{
		"/usr/bin/cronlock -validate -config /etc/cronlock/cronlock.yaml", "/bin/kill -HUP $MAINPID"}) {
		t.Errorf("ExecReload: got %q; want -validate of the ExecStart's config, then kill -HUP $MAINPID", got)
	}
	// sd_notify comes from the main process only: the default
	// NotifyAccess=main is what cronlock needs; anything else widens it.
	if got, ok := keys["Service.NotifyAccess"]; ok {
		t.Errorf("NotifyAccess: got %q, want unset (main)", got)
	}
	// Jobs reach Redis and the network, and write /tmp and the state dir.
	for _, k := range []string{"Service.PrivateNetwork", "Service.IPAddressDeny", "Service.MemoryDenyWriteExecute", "Service.ReadOnlyPaths"} {
		if got, ok := keys[k]; ok {
			t.Errorf("%s=%q would break ordinary jobs (network, JIT runtimes, writes)", k, got)
		}
	}
	if fams := strings.Join(keys["Service.RestrictAddressFamilies"], " "); !strings.Contains(fams, "AF_INET") || !strings.Contains(fams, "AF_INET6") || !strings.Contains(fams, "AF_UNIX") {
		t.Errorf("RestrictAddressFamilies=%q: jobs and Redis need AF_UNIX, AF_INET and AF_INET6", fams)
	}
}

// TestUnit_TimeoutsCoverTheShutdownPath checks WatchdogSec and
// TimeoutStopSec against the starter config's shutdown path: stop claiming,
// wait node.shutdown_timeout, kill with kill_grace, release leases (a few
// seconds), drain hooks (hook_timeout).
func TestUnit_TimeoutsCoverTheShutdownPath(t *testing.T) {
	keys := unitKeys(t, repoFile("packaging/cronlock.service"))
	cfg := loadStarter(t)
	var killGrace, hookTimeout time.Duration
	for _, j := range cfg.Jobs {
		killGrace = max(killGrace, j.KillGrace)
		hookTimeout = max(hookTimeout, j.HookTimeout)
	}
	const leaseRelease = 5 * time.Second
	drain := cfg.Node.ShutdownTimeout + killGrace + leaseRelease
	sec := func(k string) time.Duration {
		v := keys["Service."+k]
		if len(v) != 1 {
			t.Fatalf("%s: got %q, want one value", k, v)
		}
		d, err := time.ParseDuration(v[0])
		if err != nil {
			t.Fatalf("%s=%s: %v", k, v[0], err)
		}
		return d
	}
	if wd := sec("WatchdogSec"); wd <= drain {
		t.Errorf("WatchdogSec=%v: want more than shutdown_timeout %v + kill_grace %v + %v", wd, cfg.Node.ShutdownTimeout, killGrace, leaseRelease)
	}
	if stop := sec("TimeoutStopSec"); stop <= drain+hookTimeout {
		t.Errorf("TimeoutStopSec=%v: want more than %v + hook_timeout %v", stop, drain, hookTimeout)
	}
}

// testUnit writes a copy of the unit whose ExecStart= and ExecReload= name
// the built binary (verify wants an existing executable), with the given
// drop-ins of packaging/dropins in its cronlock.service.d, and returns its
// path.
func testUnit(t *testing.T, dropins ...string) string {
	t.Helper()
	unit, err := os.ReadFile(repoFile("packaging/cronlock.service"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(buildDir(t), "cronlock")
	text := strings.ReplaceAll(string(unit), "=/usr/bin/cronlock ", "="+bin+" ")
	if strings.Count(text, bin) != 2 {
		t.Fatal("want ExecStart=/usr/bin/cronlock and ExecReload=/usr/bin/cronlock in the unit")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "cronlock.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range dropins {
		b, err := os.ReadFile(repoFile("packaging/dropins/" + d))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "cronlock.service.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cronlock.service.d", d), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// shippedDropins are the files of packaging/dropins, which the package
// installs in /usr/share/cronlock/dropins.
func shippedDropins(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(repoFile("packaging/dropins/*.conf"))
	if err != nil || len(m) < 3 {
		t.Fatalf("packaging/dropins: %v %v; want write-paths.conf, run-as-root.conf and no-sandbox.conf", m, err)
	}
	var names []string
	for _, p := range m {
		names = append(names, filepath.Base(p))
	}
	return names
}

// TestUnit_SystemdAnalyzeVerify verifies the unit alone and with each
// shipped drop-in (systemd-analyze verify reads the drop-ins in
// cronlock.service.d beside the unit file).
func TestUnit_SystemdAnalyzeVerify(t *testing.T) {
	t.Run("unit", func(t *testing.T) { verifyUnit(t, testUnit(t)) })
	for _, d := range shippedDropins(t) {
		t.Run(d, func(t *testing.T) { verifyUnit(t, testUnit(t, d)) })
	}
}

func verifyUnit(t *testing.T, unit string) {
	tool := lookTool(t, "systemd-analyze", "systemd")
	// Documentation=man:… is checked with man(1): point MANPATH at the
	// pages built from docs/man, in man's SECTION directories.
	manpath := t.TempDir()
	for page, section := range map[string]string{"cronlock.1.gz": "man1", "cronlock.yaml.5.gz": "man5"} {
		if err := os.MkdirAll(filepath.Join(manpath, section), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(buildDir(t), "man", page), filepath.Join(manpath, section, page)); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"verify", unit}
	if _, err := exec.LookPath("man"); err != nil {
		t.Log("man not installed (Debian package man-db): verify --man=no, Documentation=man:… not checked")
		args = []string{"verify", "--man=no", unit}
	}
	code, out := runCmd(t, "", []string{"MANPATH=" + manpath}, nil, tool, args...)
	// Without a running systemd, verify may print problems of other units
	// and still exit 0: any line about ours is a failure.
	if code != 0 || strings.Contains(out, "cronlock.service") {
		t.Errorf("systemd-analyze verify: exit %d\n%s", code, out)
	}
}

func TestUnit_SecurityExposure(t *testing.T) {
	tool := lookTool(t, "systemd-analyze", "systemd")
	code, out := runCmd(t, "", nil, nil, tool, "security", "--offline=yes", "--no-pager", testUnit(t))
	m := regexp.MustCompile(`Overall exposure level for cronlock\.service: ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: exit %d, no overall exposure level in\n%s", code, out)
	}
	score, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("systemd-analyze security --offline=yes: exposure %.1f (want ≤ 4.5)", score)
	if score > 4.5 {
		t.Errorf("exposure %.1f > 4.5:\n%s", score, out)
	}
}

func TestStarterConfig_ValidatesAndRunsNothingHarmful(t *testing.T) {
	cfg := loadStarter(t)
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
	if cfg.Lock.Backend != "memory" {
		t.Errorf("lock.backend %q: the starter config must run without Redis until one is configured", cfg.Lock.Backend)
	}
	enabled := 0
	for _, j := range cfg.Jobs {
		if !j.Enabled {
			continue
		}
		enabled++
		// The only enabled job logs one line: nothing else runs until the
		// operator edits the file.
		if !strings.HasPrefix(j.Command, "echo ") || strings.ContainsAny(j.Command, ">|;&`") {
			t.Errorf("enabled job %q runs %q: want a single echo", j.Name, j.Command)
		}
	}
	if enabled != 1 {
		t.Errorf("%d enabled jobs; want exactly the one harmless example", enabled)
	}
	b, err := os.ReadFile(repoFile("packaging/cronlock.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	comments := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			comments++
		}
	}
	if comments < 20 || !strings.Contains(string(b), "/etc/default/cronlock") || !strings.Contains(string(b), "man cronlock.yaml") {
		t.Errorf("the starter config explains too little (%d comment lines; want ≥ 20, pointing to man cronlock.yaml and /etc/default/cronlock)", comments)
	}
}

// TestDefaultFile_IsAnEnvironmentFile checks /etc/default/cronlock against
// systemd.exec(5)'s EnvironmentFile= syntax and cronlock's variables.
func TestDefaultFile_IsAnEnvironmentFile(t *testing.T) {
	b, err := os.ReadFile(repoFile("packaging/default"))
	if err != nil {
		t.Fatal(err)
	}
	assign := regexp.MustCompile(`^#?(CRONLOCK_[A-Z0-9_]+)=`)
	found := map[string]bool{}
	for i, line := range strings.Split(string(b), "\n") {
		if m := assign.FindStringSubmatch(line); m != nil {
			found[m[1]] = true
			continue
		}
		if line != "" && !strings.HasPrefix(line, "#") {
			t.Errorf("line %d %q: want a comment or CRONLOCK_KEY=value", i+1, line)
		}
	}
	for _, k := range []string{"CRONLOCK_REDIS_ADDRESS", "CRONLOCK_REDIS_PASSWORD", "CRONLOCK_NODE_ID"} {
		if !found[k] {
			t.Errorf("%s is not offered", k)
		}
	}
	// Each offered variable is one the config loader accepts: loading the
	// starter config with all of them set yields no problem.
	env := []string{"STATE_DIRECTORY=/var/lib/cronlock"}
	samples := map[string]string{"CRONLOCK_REDIS_ADDRESS": "127.0.0.1:6379", "CRONLOCK_REDIS_TLS_ENABLED": "false",
		"CRONLOCK_LOG_LEVEL": "info", "CRONLOCK_NODE_ID": "n1", "CRONLOCK_REDIS_USERNAME": "u", "CRONLOCK_REDIS_PASSWORD": "p"}
	for k := range found {
		v, ok := samples[k]
		if !ok {
			t.Errorf("%s: no sample value in this test; add one", k)
		}
		env = append(env, k+"="+v)
	}
	if _, err := config.Load(repoFile("packaging/cronlock.yaml"), config.Options{Purpose: config.ForValidate,
		Environ: env, Euid: 1000, Hostname: "h"}); err != nil {
		t.Errorf("starter config with %v: %v", env, err)
	}
}

func TestManPages_Render(t *testing.T) {
	man := lookTool(t, "man", "man-db")
	dir := buildDir(t)
	for _, page := range []string{"cronlock.1.gz", "cronlock.yaml.5.gz"} {
		path := filepath.Join(dir, "man", page)
		// As lintian checks man pages: groff warnings on, output discarded.
		code, out := runCmd(t, "", []string{"MANWIDTH=80", "LC_ALL=C.UTF-8"}, nil, "sh", "-c",
			man+` --warnings -E UTF-8 -l -Tutf8 -Z "$0" 2>&1 >/dev/null`, path)
		if code != 0 || strings.TrimSpace(out) != "" {
			t.Errorf("man -l %s: exit %d, warnings:\n%s", page, code, out)
		}
		code, text := runCmd(t, "", []string{"MANWIDTH=80"}, nil, man, "-l", path)
		if code != 0 || !strings.Contains(text, "NAME") || !strings.Contains(text, "SEE ALSO") {
			t.Errorf("man -l %s: exit %d, want NAME and SEE ALSO sections:\n%s", page, code, text)
		}
	}
}

// TestStarterConfig_DaemonStartsAndStops runs the daemon on the starter
// config as the unit would (StateDirectory= → $STATE_DIRECTORY, the config
// path of ExecStart) until "engine running", then stops it with SIGTERM:
// the shipped file does not only validate, it starts.
func TestStarterConfig_DaemonStartsAndStops(t *testing.T) {
	bin := filepath.Join(buildDir(t), "cronlock")
	cmd := exec.Command(bin, "-config", repoFile("packaging/cronlock.yaml"))
	cmd.Env = append(os.Environ(), "STATE_DIRECTORY="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var log []string
	deadline := time.After(15 * time.Second)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the daemon exited before \"engine running\":\n%s", strings.Join(log, "\n"))
			}
			log = append(log, l)
			if strings.Contains(l, `"engine running"`) {
				break wait
			}
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("no \"engine running\" within 15s:\n%s", strings.Join(log, "\n"))
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for l := range lines { // drain until the daemon closes stderr
		log = append(log, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v; want 0\n%s", err, strings.Join(log, "\n"))
	}
	for _, l := range log {
		// The memory backend's start-up warning is meant for this config:
		// it tells the operator that a cluster needs Redis.
		if strings.Contains(l, `"msg":"memory lock backend:`) {
			continue
		}
		if strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"warn"`) {
			t.Errorf("the starter config logs a problem: %s", l)
		}
	}
}

// TestUnit_DropInsDoWhatTheySay reads the unit with each shipped drop-in
// through systemd-analyze security --offline, which shows the effective
// settings: run-as-root.conf runs as root with the capabilities and
// privileges that `user:` and sudo need and the host's /tmp;
// no-sandbox.conf lifts the file-system and system-call sandbox too;
// write-paths.conf changes no protection score (it only adds paths).
func TestUnit_DropInsDoWhatTheySay(t *testing.T) {
	tool := lookTool(t, "systemd-analyze", "systemd")
	security := func(t *testing.T, dropins ...string) (string, float64) {
		code, out := runCmd(t, "", nil, nil, tool, "security", "--offline=yes", "--no-pager", testUnit(t, dropins...))
		m := regexp.MustCompile(`Overall exposure level for cronlock\.service: ([0-9.]+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("systemd-analyze security: exit %d, no overall exposure level in\n%s", code, out)
		}
		score, _ := strconv.ParseFloat(m[1], 64)
		return out, score
	}
	// lines returns the ✗ (exposed) or ✓ (protected) lines of out.
	has := func(out, mark, setting string) bool {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == mark && f[1] == setting {
				return true
			}
		}
		return false
	}
	_, base := security(t)
	wantExposed := map[string][]string{
		"write-paths.conf": nil,
		"run-as-root.conf": {"User=/DynamicUser=", "NoNewPrivileges=", "PrivateTmp=", "ProtectHome=",
			"CapabilityBoundingSet=~CAP_SET(UID|GID|PCAP)", "CapabilityBoundingSet=~CAP_KILL"},
		"no-sandbox.conf": {"User=/DynamicUser=", "NoNewPrivileges=", "PrivateTmp=", "ProtectHome=", "ProtectSystem=",
			"PrivateDevices=", "SystemCallFilter=~@mount", "RestrictNamespaces=~user", "ProtectKernelModules=", "ProtectClock="},
	}
	wantProtected := map[string][]string{
		"write-paths.conf": {"User=/DynamicUser=", "ProtectSystem=", "PrivateTmp=", "NoNewPrivileges="},
		"run-as-root.conf": {"ProtectSystem=", "PrivateDevices=", "SystemCallFilter=~@mount", "ProtectKernelModules="},
	}
	for _, d := range shippedDropins(t) {
		t.Run(d, func(t *testing.T) {
			out, score := security(t, d)
			t.Logf("systemd-analyze security --offline=yes with %s: exposure %.1f (the unit alone: %.1f)", d, score, base)
			if _, known := wantExposed[d]; !known {
				t.Fatalf("%s: a drop-in this test does not know; add what it must change", d)
			}
			for _, s := range wantExposed[d] {
				if !has(out, "✗", s) {
					t.Errorf("%s: want %s lifted (✗)", d, s)
				}
			}
			for _, s := range wantProtected[d] {
				if !has(out, "✓", s) {
					t.Errorf("%s: want %s kept (✓)", d, s)
				}
			}
			if d == "write-paths.conf" && score != base {
				t.Errorf("write-paths.conf changes the exposure %.1f -> %.1f; it should only add writable paths", base, score)
			}
			if t.Failed() {
				t.Log(out)
			}
		})
	}
}

// TestUnit_ExecReloadRejectsABrokenConfig runs the unit's ExecReload=
// command lines as systemd does (in order, stopping at the first that
// fails, $MAINPID the main process) against a stand-in main process: with
// a broken config the reload exits non-zero and the main process gets no
// SIGHUP; with a valid one it exits 0 and the SIGHUP arrives.
func TestUnit_ExecReloadRejectsABrokenConfig(t *testing.T) {
	keys := unitKeys(t, repoFile("packaging/cronlock.service"))
	bin := filepath.Join(buildDir(t), "cronlock")
	const unitConfig = "/etc/cronlock/cronlock.yaml"
	if got := keys["Service.ExecStart"]; len(got) != 1 || !strings.HasSuffix(got[0], " -config "+unitConfig) {
		t.Fatalf("ExecStart %q: want it to run %s", got, unitConfig)
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	starter, err := os.ReadFile(repoFile("packaging/cronlock.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, config string
		ok           bool
	}{
		{"the starter config", string(starter), true},
		{"a YAML syntax error", "jobs:\n- {name: a, schedule: '@daily'\n", false},
		{"an invalid schedule", "jobs:\n- {name: a, schedule: 'every tuesday', command: 'true'}\n", false},
		{"a duplicate job", "jobs:\n- {name: a, schedule: '@daily', command: 'true'}\n- {name: a, schedule: '@hourly', command: 'true'}\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := write(strings.ReplaceAll(tt.name, " ", "-")+".yaml", tt.config)
			main := exec.Command("sleep", "60") // the stand-in daemon: SIGHUP ends it
			if err := main.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- main.Wait() }()
			defer func() { _ = main.Process.Kill(); <-exited }()

			var failed bool
			var log strings.Builder
			for _, line := range keys["Service.ExecReload"] {
				line = strings.ReplaceAll(line, "$MAINPID", strconv.Itoa(main.Process.Pid))
				line = strings.ReplaceAll(line, unitConfig, cfg)
				args := strings.Fields(line)
				if args[0] == "/usr/bin/cronlock" {
					args[0] = bin
				}
				// As the unit runs it: StateDirectory= sets $STATE_DIRECTORY.
				code, out := runCmd(t, "", []string{"STATE_DIRECTORY=" + dir}, nil, args[0], args[1:]...)
				fmt.Fprintf(&log, "$ %s\nexit %d\n%s", strings.Join(args, " "), code, out)
				if code != 0 {
					failed = true
					break
				}
			}
			if failed == tt.ok {
				t.Fatalf("reload failed %v; want %v\n%s", failed, !tt.ok, log.String())
			}
			wait := 200 * time.Millisecond // no signal was sent: nothing to wait for
			if tt.ok {
				wait = 30 * time.Second // a bound on a loaded machine, not a measure: the signal comes at once
			}
			select {
			case err := <-exited:
				exited <- err
				if tt.ok != strings.Contains(fmt.Sprint(err), "hangup") {
					t.Errorf("main process: %v; want a SIGHUP only for a valid config\n%s", err, log.String())
				}
			case <-time.After(wait):
				if tt.ok {
					t.Errorf("no SIGHUP within %v after a successful reload\n%s", wait, log.String())
				}
			}
			if !tt.ok && !strings.Contains(log.String(), "Configuration invalid") {
				t.Errorf("want the validation's problems in the output (the journal)\n%s", log.String())
			}
		})
	}
}
