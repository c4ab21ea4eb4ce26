package main

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolveBuild(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}}
	info := func(mainVersion string, settings []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/cronlock/cronlock", Version: mainVersion}, Settings: settings}
	}
	for _, tt := range []struct {
		name                  string
		linkVersion, linkComm string
		bi                    *debug.BuildInfo
		version, commit       string
	}{
		{"make, tag", "v1.2.3", "abcdefabcdef", info("(devel)", nil), "v1.2.3", "abcdefabcdef"},
		{"make, untagged", "0.0.0-dev+abcdefabcdef", "abcdefabcdef", info("(devel)", nil), "0.0.0-dev+abcdefabcdef", "abcdefabcdef"},
		{"make, the link-time commit wins", "", "abcdefabcdef", info("(devel)", vcs), "0.0.0-dev+abcdefabcdef", "abcdefabcdef"},
		{"go build in a checkout", "", "", info("(devel)", vcs), "0.0.0-dev+0123456789ab", "0123456789ab"},
		{"go build in a checkout of a tag (Go 1.24+)", "", "", info("v1.2.3", vcs), "v1.2.3", "0123456789ab"},
		{"go build in a modified checkout of a tag", "", "", info("v1.2.3+dirty", vcs), "0.0.0-dev+0123456789ab", "0123456789ab"},
		{"go build of an untagged commit (Go 1.24+)", "", "", info("v0.0.0-20261207120000-0123456789ab+dirty", vcs), "0.0.0-dev+0123456789ab", "0123456789ab"},
		{"go install @v1.2.3", "", "", info("v1.2.3", nil), "v1.2.3", ""},
		{"go install @v2.0.0+incompatible", "", "", info("v2.0.0+incompatible", nil), "v2.0.0+incompatible", ""},
		{"go install @latest, untagged", "", "", info("v0.0.0-20261207120000-fedcba987654", nil), "0.0.0-dev+fedcba987654", "fedcba987654"},
		{"go install @latest, after a tag", "", "", info("v1.2.4-0.20261207120000-fedcba987654", nil), "0.0.0-dev+fedcba987654", "fedcba987654"},
		{"go build -buildvcs=false", "", "", info("(devel)", nil), "0.0.0-dev", ""},
		{"no build info", "", "", nil, "0.0.0-dev", ""},
	} {
		got := resolveBuild(tt.linkVersion, tt.linkComm, tt.bi)
		if got.Version != tt.version || got.Commit != tt.commit || got.GoVersion != runtime.Version() {
			t.Errorf("%s: got %+v; want version %q, commit %q", tt.name, got, tt.version, tt.commit)
		}
	}
}

// TestBuildInfo_VersionEverywhere checks that -version, -version -json and
// cronlock_build_info show one non-empty version for this (test) build,
// which has no link-time version.
func TestBuildInfo_VersionEverywhere(t *testing.T) {
	code, out, _ := runCLI(t, nil, "-version", "-json")
	var v buildInfo
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("-version -json: exit %d, %v: %q", code, err, out)
	}
	if !strings.HasPrefix(v.Version, "v") && !strings.HasPrefix(v.Version, devVersion) {
		t.Errorf("-version -json: version %q; want a tag or %s[+commit]", v.Version, devVersion)
	}
	if _, line, _ := runCLI(t, nil, "-version"); !strings.HasPrefix(line, "cronlock "+v.Version) {
		t.Errorf("-version = %q; want it to start with cronlock %s", line, v.Version)
	}
	mfs, err := newMetricsRegistry(currentBuild()).Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() == "cronlock_build_info" {
			for _, l := range mf.GetMetric()[0].GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
		}
	}
	if labels["version"] != v.Version || labels["commit"] != v.Commit {
		t.Errorf("cronlock_build_info labels %v; want version %q and commit %q as -version -json", labels, v.Version, v.Commit)
	}
}
