package packaging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dpkgRoot is an empty dpkg database under a scratch root, with stubs for
// the commands the maintainer scripts call on the host (dpkg runs them
// "chrootless", with DPKG_ROOT set to the root) and a running systemd
// ($DPKG_ROOT/run/systemd/system).
type dpkgRoot struct {
	t                  *testing.T
	root, stubs, calls string
}

func newDpkgRoot(t *testing.T) *dpkgRoot {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("dpkg --root installs need root (CI runs as root)")
	}
	lookTool(t, "dpkg", "dpkg")
	d := &dpkgRoot{t: t, root: t.TempDir(), stubs: t.TempDir()}
	d.calls = filepath.Join(d.stubs, "calls.log")
	for _, dir := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "run/systemd/system"} {
		if err := os.MkdirAll(filepath.Join(d.root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d.root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"adduser", "deb-systemd-helper", "deb-systemd-invoke", "systemctl"} {
		script := "#!/bin/sh\necho \"" + name + " $*\" >> " + d.calls + "\n"
		if err := os.WriteFile(filepath.Join(d.stubs, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// dpkg runs dpkg on the root with args and returns the stub calls made.
func (d *dpkgRoot) dpkg(args ...string) string {
	d.t.Helper()
	_ = os.Remove(d.calls)
	args = append([]string{"--root=" + d.root, "--force-script-chrootless", "--force-depends", "--log=/dev/null"}, args...)
	code, out := runCmd(d.t, "", []string{"PATH=" + d.stubs + ":" + os.Getenv("PATH")}, nil, "dpkg", args...)
	if code != 0 {
		d.t.Fatalf("dpkg %v: exit %d\n%s", args, code, out)
	}
	b, _ := os.ReadFile(d.calls)
	return string(b)
}

func (d *dpkgRoot) path(p string) string { return filepath.Join(d.root, p) }

func (d *dpkgRoot) exists(p string) bool {
	_, err := os.Stat(d.path(p))
	return err == nil
}

// TestDeb_DpkgLifecycle installs the amd64 .deb with dpkg into a scratch
// root, reinstalls it over an edited config, removes and purges it: dpkg's
// conffile handling and the maintainer scripts together.
func TestDeb_DpkgLifecycle(t *testing.T) {
	deb := debs(t)["amd64"]
	d := newDpkgRoot(t)

	calls := d.dpkg("-i", deb)
	if !strings.Contains(calls, "adduser --system") || !strings.Contains(calls, "deb-systemd-helper enable cronlock.service") {
		t.Errorf("first install: want the user created and the unit enabled; calls:\n%s", calls)
	}
	if strings.Contains(calls, "deb-systemd-invoke") {
		t.Errorf("first install started or restarted the service; calls:\n%s", calls)
	}
	for _, f := range packageFiles(t) {
		if !d.exists(f) {
			t.Errorf("after dpkg -i: %s missing", f)
		}
	}

	conf := d.path("etc/cronlock/cronlock.yaml")
	edited := "# edited\njobs: []\n"
	if err := os.WriteFile(conf, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(d.path("var/lib/cronlock"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.path("var/lib/cronlock/node-id"), []byte("n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls = d.dpkg("--force-confold", "-i", deb)
	if b, _ := os.ReadFile(conf); string(b) != edited {
		t.Errorf("reinstall overwrote the edited conffile:\n%s", b)
	}
	if !strings.Contains(calls, "deb-systemd-invoke try-restart cronlock.service") {
		t.Errorf("reinstall (configure with the old version) did not restart a running daemon; calls:\n%s", calls)
	}

	calls = d.dpkg("-r", "cronlock")
	if !strings.Contains(calls, "deb-systemd-invoke stop cronlock.service") {
		t.Errorf("remove did not stop the service; calls:\n%s", calls)
	}
	if d.exists("usr/bin/cronlock") || d.exists("lib/systemd/system/cronlock.service") {
		t.Error("remove left the binary or the unit")
	}
	for _, f := range []string{"etc/cronlock/cronlock.yaml", "etc/default/cronlock", "var/lib/cronlock/node-id"} {
		if !d.exists(f) {
			t.Errorf("remove deleted %s; only purge may", f)
		}
	}

	d.dpkg("-P", "cronlock")
	for _, f := range []string{"etc/cronlock", "etc/default/cronlock", "var/lib/cronlock"} {
		if d.exists(f) {
			t.Errorf("purge left %s", f)
		}
	}
}
