package packaging

import (
	"debug/elf"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRelease_Reproducible runs `make release` twice, into two dist
// directories, and checks what issue 33 asks of the artifacts: the same
// SHA256SUMS (the same bytes) both times; for each architecture a tarball
// with the binary, man pages, completions, example config, LICENSE,
// README.md and THIRD_PARTY_LICENSES, owned by root and dated by the
// commit; a static binary that prints the version of `make version` (the
// tag or 0.0.0-dev+<commit>); and .debs whose binary is the tarball's.
// Under make package-test only (two release builds take a minute).
func TestRelease_Reproducible(t *testing.T) {
	if os.Getenv(debDirEnv) == "" {
		t.Skipf("two make release runs take a minute; make package-test runs this (%s set)", debDirEnv)
	}
	lookTool(t, "make", "make")
	lookTool(t, "dpkg-deb", "dpkg")
	root, err := filepath.Abs(repoFile("."))
	if err != nil {
		t.Fatal(err)
	}
	_, version := runCmd(t, root, nil, nil, "make", "-s", "version")
	version = strings.TrimSpace(version)
	_, commit := runCmd(t, root, nil, nil, "git", "rev-parse", "--short=12", "HEAD")
	commit = strings.TrimSpace(commit)
	want := "0.0.0-dev+" + commit
	if code, tag := runCmd(t, root, nil, nil, "git", "describe", "--tags", "--exact-match"); code == 0 {
		want = strings.TrimSpace(tag)
	}
	if version != want {
		t.Fatalf("make version = %q; want %q (the tag, else 0.0.0-dev+<commit>)", version, want)
	}
	_, epoch := runCmd(t, root, nil, nil, "git", "log", "-1", "--format=%ct")
	commitTime, err := strconv.ParseInt(strings.TrimSpace(epoch), 10, 64)
	if err != nil {
		t.Fatalf("commit time %q: %v", epoch, err)
	}

	release := func() (string, string) {
		dist := t.TempDir()
		code, out := runCmd(t, root, nil, nil, "make", "release", "DIST="+dist)
		if code != 0 {
			t.Fatalf("make release DIST=%s: exit %d\n%s", dist, code, out)
		}
		sums, err := os.ReadFile(filepath.Join(dist, "release", "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dist, "release"), string(sums)
	}
	dir, sums := release()
	_, again := release()
	t.Logf("SHA256SUMS:\n%s", sums)
	if sums != again {
		t.Errorf("a second make release on the same commit gives other artifacts:\nfirst\n%s\nsecond\n%s", sums, again)
	}
	if code, out := runCmd(t, dir, nil, nil, "sha256sum", "-c", "SHA256SUMS"); code != 0 {
		t.Errorf("sha256sum -c: exit %d\n%s", code, out)
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(sums), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			listed = append(listed, f[1])
		}
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "cronlock_*.deb"))
	var artifacts []string
	for _, d := range debs {
		artifacts = append(artifacts, filepath.Base(d))
	}
	for _, arch := range []string{"amd64", "arm64"} {
		artifacts = append(artifacts, "cronlock_"+version+"_linux_"+arch+".tar.gz")
	}
	slices.Sort(listed)
	slices.Sort(artifacts)
	if len(debs) != 2 || !slices.Equal(listed, artifacts) {
		t.Errorf("SHA256SUMS lists %q; want the two tarballs and two .debs %q", listed, artifacts)
	}

	for _, arch := range []string{"amd64", "arm64"} {
		name := "cronlock_" + version + "_linux_" + arch
		tarball := filepath.Join(dir, name+".tar.gz")
		// tar -tv: names, modes, owners and dates.
		code, out := runCmd(t, "", []string{"TZ=UTC"}, nil, "tar", "--numeric-owner", "--full-time", "-tvzf", tarball)
		if code != 0 {
			t.Fatalf("tar -tvzf %s: exit %d\n%s", tarball, code, out)
		}
		var files []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) != 6 {
				t.Fatalf("tar -tv line %q", line)
			}
			if f[1] != "0/0" {
				t.Errorf("%s: %s owned by %s; want 0/0", arch, f[5], f[1])
			}
			if want := timeString(commitTime); f[3]+" "+f[4] != want {
				t.Errorf("%s: %s dated %s %s; want the commit's %s", arch, f[5], f[3], f[4], want)
			}
			if !strings.HasSuffix(f[5], "/") {
				files = append(files, strings.TrimPrefix(f[5], name+"/")+" "+f[0])
			}
		}
		wantFiles := []string{"cronlock -rwxr-xr-x", "LICENSE -rw-r--r--", "README.md -rw-r--r--",
			"THIRD_PARTY_LICENSES -rw-r--r--", "cronlock.yaml -rw-r--r--", "man/cronlock.1.gz -rw-r--r--",
			"man/cronlock.yaml.5.gz -rw-r--r--", "completion/cronlock.bash -rw-r--r--", "completion/_cronlock -rw-r--r--"}
		slices.Sort(files)
		slices.Sort(wantFiles)
		if !slices.Equal(files, wantFiles) {
			t.Errorf("%s: the tarball holds\n  %s\nwant\n  %s", arch, strings.Join(files, "\n  "), strings.Join(wantFiles, "\n  "))
		}
		x := t.TempDir()
		if code, out := runCmd(t, "", nil, nil, "tar", "-xzf", tarball, "-C", x); code != 0 {
			t.Fatalf("tar -xzf: %s", out)
		}
		bin := filepath.Join(x, name, "cronlock")
		checkStatic(t, bin, map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch])
		checkThirdPartyLicenses(t, bin, filepath.Join(x, name, "THIRD_PARTY_LICENSES"))
		for _, f := range []string{"LICENSE", "README.md"} {
			if a, b := readFile(t, filepath.Join(x, name, f)), readFile(t, repoFile(f)); a != b {
				t.Errorf("%s: %s differs from the checkout's", arch, f)
			}
		}
		if readFile(t, filepath.Join(x, name, "cronlock.yaml")) != readFile(t, repoFile("packaging/cronlock.yaml")) {
			t.Errorf("%s: cronlock.yaml is not packaging/cronlock.yaml", arch)
		}
		// The .deb of the release carries the same binary.
		deb, _ := filepath.Glob(filepath.Join(dir, "cronlock_*_"+arch+".deb"))
		if len(deb) == 1 {
			droot := t.TempDir()
			if code, out := runCmd(t, "", nil, nil, "dpkg-deb", "-x", deb[0], droot); code != 0 {
				t.Fatalf("dpkg-deb -x: %s", out)
			}
			if readFile(t, filepath.Join(droot, "usr/bin/cronlock")) != readFile(t, bin) {
				t.Errorf("%s: the .deb's /usr/bin/cronlock is not the tarball's cronlock", arch)
			}
			if readFile(t, filepath.Join(droot, "usr/share/doc/cronlock/THIRD_PARTY_LICENSES")) != readFile(t, filepath.Join(x, name, "THIRD_PARTY_LICENSES")) {
				t.Errorf("%s: the .deb's THIRD_PARTY_LICENSES is not the tarball's", arch)
			}
		}
		if arch != "amd64" {
			continue // not runnable here
		}
		code, out = runCmd(t, "", nil, nil, bin, "-version")
		if code != 0 || strings.TrimSpace(out) != "cronlock "+version+" ("+commit+")" {
			t.Errorf("%s -version: exit %d %q; want %q", name, code, out, "cronlock "+version+" ("+commit+")")
		}
		code, out = runCmd(t, "", nil, nil, bin, "-version", "-json")
		var v struct{ Version, Commit string }
		if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Version != version || v.Commit != commit {
			t.Errorf("%s -version -json: exit %d %q; want version %q, commit %q", name, code, out, version, commit)
		}
	}
}

// checkStatic checks that bin is an ELF executable for machine without an
// interpreter (statically linked).
func checkStatic(t *testing.T, bin string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != machine {
		t.Errorf("%s: machine %v; want %v", bin, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: dynamically linked (has an ELF interpreter)", bin)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// timeString is how tar --full-time shows the Unix time sec in UTC.
func timeString(sec int64) string {
	return time.Unix(sec, 0).UTC().Format("2006-01-02 15:04:05")
}
