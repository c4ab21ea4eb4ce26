package packaging

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// installPath maps a file of the .deb to where install.sh --prefix /usr/local
// puts it; "" = Debian-only (not installed by install.sh).
func installPath(pkgPath string) string {
	switch {
	case pkgPath == "/usr/share/doc/cronlock/changelog.gz", strings.HasPrefix(pkgPath, "/usr/share/lintian/"):
		return ""
	case pkgPath == "/lib/systemd/system/cronlock.service":
		return "/etc/systemd/system/cronlock.service"
	case pkgPath == "/usr/share/zsh/vendor-completions/_cronlock":
		return "/usr/local/share/zsh/site-functions/_cronlock"
	case strings.HasPrefix(pkgPath, "/usr/"):
		return "/usr/local/" + strings.TrimPrefix(pkgPath, "/usr/")
	}
	return pkgPath
}

// installScript runs packaging/install.sh with DESTDIR=root and the
// prebuilt files, and returns its exit code and output.
func installScript(t *testing.T, root string, args ...string) (int, string) {
	t.Helper()
	bash := lookTool(t, "bash", "bash")
	args = append([]string{repoFile("packaging/install.sh"), "--prefix", "/usr/local", "--from", buildDir(t)}, args...)
	return runCmd(t, "", []string{"DESTDIR=" + root}, nil, bash, args...)
}

// snapshot returns every file under root as path → "mode size sha256 mtime".
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(path, root)] = fmt.Sprintf("%v %d %x %v", info.Mode(), info.Size(), sha256.Sum256(b), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestInstallScript_SameFilesAsThePackage(t *testing.T) {
	root := t.TempDir()
	if code, out := installScript(t, root); code != 0 {
		t.Fatalf("install.sh: exit %d\n%s", code, out)
	}
	var want []string
	for _, f := range packageFiles(t) {
		if p := installPath(f); p != "" {
			want = append(want, p)
		}
	}
	var got []string
	for f := range snapshot(t, root) {
		got = append(got, f)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("install.sh installed\n  %s\nwant (packaging/nfpm.yaml, mapped to --prefix /usr/local)\n  %s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/cronlock.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart=/usr/local/bin/cronlock -config /etc/cronlock/cronlock.yaml\n") ||
		!strings.Contains(string(unit), "\nExecReload=/usr/local/bin/cronlock -validate -config /etc/cronlock/cronlock.yaml\n") {
		t.Error("the installed unit's ExecStart and ExecReload do not name /usr/local/bin/cronlock")
	}
	if info, err := os.Stat(filepath.Join(root, "etc/default/cronlock")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("/etc/default/cronlock: %v %v; want mode 0600 (it holds secrets)", info.Mode(), err)
	}
}

func TestInstallScript_SecondRunChangesNothing(t *testing.T) {
	root := t.TempDir()
	if code, out := installScript(t, root); code != 0 {
		t.Fatalf("install.sh: exit %d\n%s", code, out)
	}
	before := snapshot(t, root)
	code, out := installScript(t, root)
	if code != 0 {
		t.Fatalf("second install.sh: exit %d\n%s", code, out)
	}
	if after := snapshot(t, root); !mapsEqual(before, after) {
		t.Errorf("the second run changed files:\nbefore %v\nafter  %v\n%s", before, after, out)
	}
	if strings.Contains(out, "+ install ") {
		t.Errorf("the second run installed files again:\n%s", out)
	}
}

func TestInstallScript_EditedConfigSurvives(t *testing.T) {
	root := t.TempDir()
	if code, out := installScript(t, root); code != 0 {
		t.Fatalf("install.sh: exit %d\n%s", code, out)
	}
	conf := filepath.Join(root, "etc/cronlock/cronlock.yaml")
	edited := "# edited by the operator\njobs:\n  - name: mine\n    schedule: \"@daily\"\n    command: \"true\"\n"
	if err := os.WriteFile(conf, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := installScript(t, root)
	if code != 0 {
		t.Fatalf("install.sh over an edited config: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(conf); string(b) != edited {
		t.Errorf("the edited config was overwritten:\n%s", b)
	}
	shipped, _ := os.ReadFile(repoFile("packaging/cronlock.yaml"))
	if b, err := os.ReadFile(conf + ".dist"); err != nil || string(b) != string(shipped) {
		t.Errorf("cronlock.yaml.dist: %v; want the shipped config beside the edited one", err)
	}
	// --uninstall keeps the configuration, as the package's remove does;
	// --purge deletes it.
	if code, out := installScript(t, root, "--uninstall"); code != 0 {
		t.Fatalf("install.sh --uninstall: exit %d\n%s", code, out)
	}
	var left []string
	for f := range snapshot(t, root) {
		left = append(left, f)
	}
	slices.Sort(left)
	if want := []string{"/etc/cronlock/cronlock.yaml", "/etc/cronlock/cronlock.yaml.dist", "/etc/default/cronlock"}; !slices.Equal(left, want) {
		t.Errorf("after --uninstall: %v; want only %v", left, want)
	}
	if code, out := installScript(t, root, "--uninstall", "--purge"); code != 0 {
		t.Fatalf("install.sh --uninstall --purge: exit %d\n%s", code, out)
	}
	if left := snapshot(t, root); len(left) != 0 {
		t.Errorf("after --uninstall --purge: %v left", left)
	}
}

func TestInstallScript_Errors(t *testing.T) {
	bash := lookTool(t, "bash", "bash")
	script := repoFile("packaging/install.sh")
	if code, out := runCmd(t, "", nil, nil, bash, "-n", script); code != 0 {
		t.Fatalf("bash -n install.sh: exit %d\n%s", code, out)
	}
	// A fake `id` makes the script believe it runs as uid 1000.
	fake := t.TempDir()
	if err := os.WriteFile(filepath.Join(fake, "id"), []byte("#!/bin/sh\necho 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{[]string{"PATH=" + fake + ":" + os.Getenv("PATH"), "DESTDIR="}, nil, 1, "must run as root"},
		{nil, []string{"--bogus"}, 2, "unknown argument '--bogus'"},
		{nil, []string{"--prefix", "usr/local"}, 2, "not an absolute path"},
		{nil, []string{"--purge"}, 2, "--purge goes with --uninstall"},
		{[]string{"DESTDIR=" + t.TempDir()}, []string{"--from", t.TempDir()}, 1, "cronlock is missing"},
	}
	for _, tt := range tests {
		code, out := runCmd(t, "", tt.env, nil, bash, append([]string{script}, tt.args...)...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("install.sh %v: exit %d, output %q; want %d and %q", tt.args, code, out, tt.code, tt.want)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
