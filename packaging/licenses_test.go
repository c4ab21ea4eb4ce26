package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// linkedModules returns the modules linked into bin (`go version -m`:
// path → version; a replaced module's replacement) and its Go version.
func linkedModules(t *testing.T, bin string) (map[string]string, string) {
	t.Helper()
	code, out := runCmd(t, "", nil, nil, "go", "version", "-m", bin)
	if code != 0 {
		t.Fatalf("go version -m %s: exit %d\n%s", bin, code, out)
	}
	mods := map[string]string{}
	goVersion := ""
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case i == 0 && len(f) == 2:
			goVersion = f[1]
		case len(f) == 4 && f[0] == "dep", len(f) == 4 && f[0] == "=>":
			mods[f[1]] = f[2]
		}
	}
	if len(mods) < 10 || goVersion == "" {
		t.Fatalf("go version -m %s: %d modules, Go %q; want the daemon's dependencies\n%s", bin, len(mods), goVersion, out)
	}
	return mods, goVersion
}

// checkThirdPartyLicenses checks a THIRD_PARTY_LICENSES file against the
// binary it was made for: the Go standard library and every linked module
// at its linked version, each with a recognised license and its text.
func checkThirdPartyLicenses(t *testing.T, bin, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("THIRD_PARTY_LICENSES: %v", err)
	}
	text := string(b)
	mods, goVersion := linkedModules(t, bin)
	mods["Go standard library"] = goVersion
	for path, version := range mods {
		// A section header: NAME VERSION (LICENSE), NAME the module or one
		// of its directories with a license of its own.
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(path) + `(/\S+)? ` + regexp.QuoteMeta(version) + ` \(([^)]+)\)$`)
		m := re.FindStringSubmatch(text)
		switch {
		case m == nil:
			t.Errorf("%s: no section for %s %s", file, path, version)
		case m[2] == "Unknown":
			t.Errorf("%s: %s %s has no recognised license", file, path, version)
		}
	}
	if n := strings.Count(text, "Permission is hereby granted") + strings.Count(text, "Apache License") +
		strings.Count(text, "Redistribution and use in source and binary forms"); n < len(mods) {
		t.Errorf("%s: %d license texts for %d modules and the standard library", file, n, len(mods))
	}
}

// TestThirdPartyLicenses_Generated runs scripts/third-party-licenses.sh on
// the built binary (what `make licenses` does for each architecture) and
// checks its output: generated, complete, and the same on a second run.
// Under make package-test only: go-licenses loads every package.
func TestThirdPartyLicenses_Generated(t *testing.T) {
	if os.Getenv(debDirEnv) == "" {
		t.Skipf("go-licenses loads every package of the daemon; make package-test runs this (%s set)", debDirEnv)
	}
	bin := buildDir(t) + "/cronlock"
	dir := t.TempDir()
	gen := func(name string) string {
		file := filepath.Join(dir, name)
		code, log := runCmd(t, repoFile("."), nil, nil, "bash", "-c", `bash scripts/third-party-licenses.sh "$0" > "$1"`, bin, file)
		if code != 0 {
			t.Fatalf("scripts/third-party-licenses.sh: exit %d\n%s", code, log)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	first := gen("first")
	checkThirdPartyLicenses(t, bin, filepath.Join(dir, "first"))
	if gen("second") != first {
		t.Error("a second run gives another text; the release would not be reproducible")
	}
}

// TestCopyright_ListsEveryLinkedModule checks packaging/copyright's claim:
// every module linked into the binary is listed in its Comment.
func TestCopyright_ListsEveryLinkedModule(t *testing.T) {
	b, err := os.ReadFile(repoFile("packaging/copyright"))
	if err != nil {
		t.Fatal(err)
	}
	mods, _ := linkedModules(t, buildDir(t)+"/cronlock")
	for path := range mods {
		if !regexp.MustCompile(`(?m)^ ` + regexp.QuoteMeta(path) + `: `).Match(b) {
			t.Errorf("packaging/copyright does not list %s (linked into the binary): add ` %s: LICENSE, Copyright …`", path, path)
		}
	}
}
