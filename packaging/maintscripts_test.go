package packaging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maintRoot is a DPKG_ROOT for the maintainer scripts with a running
// systemd (/run/systemd/system), the package's config and state, and stub
// commands that log their calls instead of touching this machine.
type maintRoot struct {
	root, stubs, log string
}

func newMaintRoot(t *testing.T, userExists bool) *maintRoot {
	t.Helper()
	m := &maintRoot{root: t.TempDir(), stubs: t.TempDir()}
	m.log = filepath.Join(m.stubs, "calls.log")
	for _, d := range []string{"run/systemd/system", "etc/cronlock", "var/lib/cronlock"} {
		if err := os.MkdirAll(filepath.Join(m.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"etc/cronlock/cronlock.yaml", "var/lib/cronlock/node-id"} {
		if err := os.WriteFile(filepath.Join(m.root, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	getent := "exit 2" // getent's "not found"
	if userExists {
		getent = "echo 'cronlock:x:999:999::/var/lib/cronlock:/usr/sbin/nologin'"
	}
	stubs := map[string]string{
		"adduser":            "",
		"getent":             getent,
		"deb-systemd-helper": "", // was-enabled exits 0: enable, as on a first install
		"deb-systemd-invoke": "",
		"systemctl":          "",
	}
	for name, body := range stubs {
		script := "#!/bin/sh\necho \"" + name + " $*\" >> " + m.log + "\n" + body + "\n"
		if err := os.WriteFile(filepath.Join(m.stubs, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// run runs packaging/deb/SCRIPT with args and returns the logged calls.
func (m *maintRoot) run(t *testing.T, script string, args ...string) string {
	t.Helper()
	_ = os.Remove(m.log)
	env := []string{"DPKG_ROOT=" + m.root, "PATH=" + m.stubs + ":/usr/sbin:/usr/bin:/sbin:/bin"}
	code, out := runCmd(t, "", env, nil, "sh", append([]string{repoFile("packaging/deb/" + script)}, args...)...)
	if code != 0 {
		t.Fatalf("%s %v: exit %d\n%s", script, args, code, out)
	}
	b, _ := os.ReadFile(m.log)
	return string(b)
}

func (m *maintRoot) exists(path string) bool {
	_, err := os.Stat(filepath.Join(m.root, path))
	return err == nil
}

func TestMaintScripts_FirstInstallCreatesUserAndEnablesWithoutStarting(t *testing.T) {
	m := newMaintRoot(t, false)
	calls := m.run(t, "postinst", "configure", "")
	for _, want := range []string{"adduser --system --group", "deb-systemd-helper enable cronlock.service", "systemctl --system daemon-reload"} {
		if !strings.Contains(calls, want) {
			t.Errorf("postinst configure (first install) did not call %q; calls:\n%s", want, calls)
		}
	}
	for _, never := range []string{"start", "restart"} {
		if strings.Contains(calls, " "+never+" ") || strings.Contains(calls, "try-restart") {
			t.Errorf("postinst configure (first install) called %q: the service must not start before the config is edited; calls:\n%s", never, calls)
		}
	}
}

func TestMaintScripts_UpgradeRestartsKeepsUser(t *testing.T) {
	m := newMaintRoot(t, true)
	calls := m.run(t, "postinst", "configure", "0.0.0~git20260101000000.abc1234")
	if !strings.Contains(calls, "deb-systemd-invoke try-restart cronlock.service") {
		t.Errorf("postinst configure (upgrade) did not restart a running daemon; calls:\n%s", calls)
	}
	if strings.Contains(calls, "adduser") {
		t.Errorf("postinst created the existing user again; calls:\n%s", calls)
	}
}

func TestMaintScripts_RemoveKeepsConfigAndStatePurgeDeletes(t *testing.T) {
	m := newMaintRoot(t, true)
	if calls := m.run(t, "prerm", "remove"); !strings.Contains(calls, "deb-systemd-invoke stop cronlock.service") {
		t.Errorf("prerm remove did not stop the daemon; calls:\n%s", calls)
	}
	if calls := m.run(t, "prerm", "upgrade", "1.0"); strings.Contains(calls, "stop") {
		t.Errorf("prerm upgrade stopped the daemon (postinst restarts it instead); calls:\n%s", calls)
	}
	m.run(t, "postrm", "remove")
	if !m.exists("etc/cronlock/cronlock.yaml") || !m.exists("var/lib/cronlock/node-id") {
		t.Error("postrm remove deleted the config or the state; only purge may")
	}
	calls := m.run(t, "postrm", "purge")
	if m.exists("etc/cronlock") || m.exists("var/lib/cronlock") {
		t.Error("postrm purge left /etc/cronlock or /var/lib/cronlock")
	}
	if !strings.Contains(calls, "deb-systemd-helper purge cronlock.service") {
		t.Errorf("postrm purge did not purge the unit's enable state; calls:\n%s", calls)
	}
}
