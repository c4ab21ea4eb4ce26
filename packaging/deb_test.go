package packaging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// debDirEnv names the directory with the .debs of `make package`; `make
// package-test` sets it. Unset (plain `make test`), the TestDeb tests skip.
const debDirEnv = "CRONLOCK_DEB_DIR"

// debs returns arch → the .deb for amd64 and arm64, or skips without
// CRONLOCK_DEB_DIR.
func debs(t *testing.T) map[string]string {
	t.Helper()
	dir := os.Getenv(debDirEnv)
	if dir == "" {
		t.Skipf("%s is not set: these tests check the .debs of `make package` and run under `make package-test` (.ci/run runs it)", debDirEnv)
	}
	out := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		m, _ := filepath.Glob(filepath.Join(dir, "cronlock_*_"+arch+".deb"))
		if len(m) != 1 {
			t.Fatalf("%s: %d cronlock_*_%s.deb files; want 1 (run make package in a clean dist/)", dir, len(m), arch)
		}
		out[arch] = m[0]
	}
	return out
}

// debField returns a control field of deb (dpkg-deb -f).
func debField(t *testing.T, deb, field string) string {
	t.Helper()
	code, out := runCmd(t, "", nil, nil, "dpkg-deb", "-f", deb, field)
	if code != 0 {
		t.Fatalf("dpkg-deb -f %s %s: exit %d\n%s", deb, field, code, out)
	}
	return strings.TrimSpace(out)
}

func TestDeb_ContentsAndMetadata(t *testing.T) {
	lookTool(t, "dpkg-deb", "dpkg")
	for arch, deb := range debs(t) {
		// dpkg-deb -c: the files of packaging/nfpm.yaml with their modes.
		code, out := runCmd(t, "", nil, nil, "dpkg-deb", "-c", deb)
		if code != 0 {
			t.Fatalf("dpkg-deb -c: exit %d\n%s", code, out)
		}
		modes := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) >= 6 && !strings.HasPrefix(f[0], "d") {
				modes[strings.TrimPrefix(f[5], ".")] = f[0] + " " + f[1]
			}
		}
		var got []string
		for p := range modes {
			got = append(got, p)
		}
		want := packageFiles(t)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: files\n  %s\nwant\n  %s", arch, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		for path, mode := range map[string]string{"/usr/bin/cronlock": "-rwxr-xr-x root/root",
			"/etc/default/cronlock": "-rw------- root/root", "/etc/cronlock/cronlock.yaml": "-rw-r--r-- root/root",
			"/lib/systemd/system/cronlock.service": "-rw-r--r-- root/root"} {
			if modes[path] != mode {
				t.Errorf("%s: %s is %q; want %q", arch, path, modes[path], mode)
			}
		}
		// dpkg-deb -I: metadata, conffiles and maintainer scripts.
		code, info := runCmd(t, "", nil, nil, "dpkg-deb", "-I", deb)
		if code != 0 {
			t.Fatalf("dpkg-deb -I: exit %d\n%s", code, info)
		}
		t.Logf("dpkg-deb -I %s:\n%s", filepath.Base(deb), info)
		for _, s := range []string{"conffiles", "postinst", "prerm", "postrm", "Package: cronlock", "Architecture: " + arch,
			"Depends: adduser", "Section: admin", "Maintainer: ", "Description: "} {
			if !strings.Contains(info, s) {
				t.Errorf("%s: dpkg-deb -I lacks %q", arch, s)
			}
		}
		version := debField(t, deb, "Version")
		if !strings.Contains(filepath.Base(deb), "_"+version+"_") {
			t.Errorf("%s: file name %s does not carry Version %s", arch, filepath.Base(deb), version)
		}
		if code, out := runCmd(t, "", nil, nil, "dpkg", "--validate-version", version); code != 0 {
			t.Errorf("dpkg rejects Version %q: %s", version, out)
		}
		if !regexp.MustCompile(`^(\d+\.\d+\.\d+.*|0\.0\.0~git\d{14}\.[0-9a-f]+)$`).MatchString(version) {
			t.Errorf("Version %q: want a tag's version or 0.0.0~git<YYYYMMDDhhmmss>.<commit>", version)
		}
		dir := t.TempDir()
		if code, out := runCmd(t, "", nil, nil, "dpkg-deb", "-e", deb, dir); code != 0 {
			t.Fatalf("dpkg-deb -e: %s", out)
		}
		conffiles, _ := os.ReadFile(filepath.Join(dir, "conffiles"))
		if got := strings.Fields(string(conffiles)); !slices.Equal(got, []string{"/etc/cronlock/cronlock.yaml", "/etc/default/cronlock"}) {
			t.Errorf("%s: conffiles %q", arch, got)
		}
		for _, s := range []string{"postinst", "prerm", "postrm"} {
			shipped, _ := os.ReadFile(repoFile("packaging/deb/" + s))
			if b, err := os.ReadFile(filepath.Join(dir, s)); err != nil || string(b) != string(shipped) {
				t.Errorf("%s: %s differs from packaging/deb/%s (%v)", arch, s, s, err)
			}
		}
	}
}

func TestDeb_Lintian(t *testing.T) {
	lintian := lookTool(t, "lintian", "lintian")
	all := debs(t)
	args := []string{"--allow-root"}
	for _, deb := range all {
		args = append(args, deb)
	}
	code, out := runCmd(t, "", nil, nil, lintian, args...)
	t.Logf("lintian: exit %d\n%s", code, out)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "E: ") {
			t.Errorf("lintian error: %s", line)
		}
	}
	if code != 0 {
		t.Errorf("lintian exit %d", code)
	}
}

// TestDeb_InstallIntoScratchRoot unpacks the amd64 .deb into a scratch
// root (as dpkg does, without running the maintainer scripts, which
// TestMaintScripts covers) and runs the installed binary on the installed
// config, man pages and completion.
func TestDeb_InstallIntoScratchRoot(t *testing.T) {
	lookTool(t, "dpkg-deb", "dpkg")
	deb := debs(t)["amd64"]
	root := t.TempDir()
	if code, out := runCmd(t, "", nil, nil, "dpkg-deb", "-x", deb, root); code != 0 {
		t.Fatalf("dpkg-deb -x: %s", out)
	}
	bin := filepath.Join(root, "usr/bin/cronlock")
	// As the unit runs it: $STATE_DIRECTORY from StateDirectory=.
	env := []string{"STATE_DIRECTORY=" + filepath.Join(root, "var/lib/cronlock")}
	code, out := runCmd(t, "", env, nil, bin, "-validate", "-config", filepath.Join(root, "etc/cronlock/cronlock.yaml"))
	if code != 0 || !strings.Contains(out, "Configuration valid") {
		t.Errorf("installed cronlock -validate on the installed config: exit %d\n%s", code, out)
	}
	code, out = runCmd(t, "", nil, nil, bin, "-version", "-json")
	var v struct{ Version, Commit, GoVersion string }
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("-version -json: exit %d, %v\n%s", code, err, out)
	}
	if want := binaryVersionOf(debField(t, deb, "Version")); !slices.Contains(want, v.Version) || v.Commit == "" {
		t.Errorf("-version -json = %+v; want version %q (of the package's version) and a commit", v, want)
	}
	// The third-party licenses, generated for this binary, and the drop-ins.
	checkThirdPartyLicenses(t, bin, filepath.Join(root, "usr/share/doc/cronlock/THIRD_PARTY_LICENSES"))
	for _, d := range shippedDropins(t) {
		shipped, _ := os.ReadFile(repoFile("packaging/dropins/" + d))
		if b, err := os.ReadFile(filepath.Join(root, "usr/share/cronlock/dropins", d)); err != nil || string(b) != string(shipped) {
			t.Errorf("/usr/share/cronlock/dropins/%s differs from packaging/dropins/%s (%v)", d, d, err)
		}
	}
	if man, err := os.Stat("/usr/bin/man"); err == nil && !man.IsDir() {
		for _, page := range []string{"usr/share/man/man1/cronlock.1.gz", "usr/share/man/man5/cronlock.yaml.5.gz"} {
			code, out := runCmd(t, "", []string{"MANWIDTH=80", "LC_ALL=C.UTF-8"}, nil, "sh", "-c",
				`man --warnings -E UTF-8 -l -Tutf8 -Z "$0" 2>&1 >/dev/null`, filepath.Join(root, page))
			if code != 0 || strings.TrimSpace(out) != "" {
				t.Errorf("man -l %s: exit %d\n%s", page, code, out)
			}
		}
	}
	code, out = runCmd(t, "", nil, nil, "bash", "-c", `set -e; source "$0"; complete -p cronlock`,
		filepath.Join(root, "usr/share/bash-completion/completions/cronlock"))
	if code != 0 || !strings.Contains(out, "_cronlock") {
		t.Errorf("the installed bash completion: exit %d\n%s", code, out)
	}
}

// binaryVersionOf returns the versions the binary of a package with Debian
// version debVersion may print (Makefile): 0.0.0~git<time>.<commit> is
// 0.0.0-dev+<commit>; a release's is its tag, with or without the "v".
func binaryVersionOf(debVersion string) []string {
	if m := regexp.MustCompile(`^0\.0\.0~git\d{14}\.([0-9a-f]+)$`).FindStringSubmatch(debVersion); m != nil {
		return []string{"0.0.0-dev+" + m[1]}
	}
	return []string{debVersion, "v" + debVersion}
}
