package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo is what `cronlock -version -json` prints and what the
// cronlock_build_info metric carries as labels.
type buildInfo struct {
	Version   string `json:"version"`    // never empty: see resolveBuild
	Commit    string `json:"commit"`     // main.commit, else the VCS revision the go command stamped (12 hex digits); "" when unknown
	GoVersion string `json:"go_version"` // runtime.Version(), e.g. "go1.26.8"
}

// devVersion is the version of a build that is not of a tag: semver's
// "0.0.0" with the pre-release "dev", so that it sorts before every
// release, and the commit as build metadata (0.0.0-dev+<12 hex>).
const devVersion = "0.0.0-dev"

// currentBuild returns this binary's build info (resolveBuild of the
// link-time main.version and main.commit and of what the go command
// embedded).
func currentBuild() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return resolveBuild(version, commit, bi)
}

// pseudoVersion matches the end of a Go pseudo-version
// (v0.0.0-20260101120000-0123456789ab, v1.2.4-0.20260101120000-…): the
// commit is its last 12 hex digits.
var pseudoVersion = regexp.MustCompile(`[-.]\d{14}-([0-9a-f]{12})$`)

// resolveBuild gives every build one non-empty version, the same that
// -version prints and cronlock_build_info carries:
//
//  1. the link-time main.version (the Makefile's -X main.version: the exact
//     git tag, else 0.0.0-dev+<commit>, the same for make build, make
//     package and make release);
//  2. else the main module's version that the go command stamped when it is
//     a release (`go install …/cmd/cronlock@v1.2.3`, or go build in a
//     checkout of a tag since Go 1.24);
//  3. else 0.0.0-dev+<commit>, the commit being main.commit, the
//     vcs.revision the go command stamped (go build in a git checkout,
//     unless -buildvcs=false) or the one of a pseudo-version (`go install
//     …@latest` of an untagged commit);
//  4. else 0.0.0-dev.
//
// The commit is main.commit, else one of those, cut to 12 hex digits.
// A build from a modified work tree is not marked as such.
func resolveBuild(linkVersion, linkCommit string, bi *debug.BuildInfo) buildInfo {
	b := buildInfo{Version: linkVersion, Commit: linkCommit, GoVersion: runtime.Version()}
	mainVersion := ""
	if bi != nil {
		mainVersion = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 && b.Commit == "" {
				b.Commit = s.Value[:12]
			}
		}
	}
	// "v1.2.3+dirty" (go build in a modified checkout of a tag) is not the
	// tag's code; "+incompatible" is part of a real version.
	clean, dirty := strings.CutSuffix(mainVersion, "+dirty")
	m := pseudoVersion.FindStringSubmatch(strings.TrimSuffix(clean, "+incompatible"))
	if b.Commit == "" && m != nil {
		b.Commit = m[1]
	}
	switch {
	case b.Version != "":
	case strings.HasPrefix(clean, "v") && !dirty && m == nil:
		b.Version = clean
	case b.Commit != "":
		b.Version = devVersion + "+" + b.Commit
	default:
		b.Version = devVersion
	}
	return b
}

// printVersion writes `cronlock -version` (one line) or, with asJSON,
// `cronlock -version -json` (one JSON object) to w. It returns exit code 0.
func printVersion(w io.Writer, asJSON bool) int {
	b := currentBuild()
	if !asJSON {
		fmt.Fprintln(w, versionString(b.Version, b.Commit))
		return 0
	}
	out, _ := json.Marshal(b) // a struct of strings always marshals
	fmt.Fprintf(w, "%s\n", out)
	return 0
}

// newMetricsRegistry returns the daemon's Prometheus registry with
// cronlock_build_info{version, commit, go_version} = 1 registered (the
// "info metric" pattern of the Prometheus naming guide: join it on labels).
// The engine registers its own metrics on the same registry.
func newMetricsRegistry(b buildInfo) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cronlock_build_info",
		Help: "Always 1; the labels say which cronlock build is running (version, commit, Go version).",
	}, []string{"version", "commit", "go_version"})
	info.WithLabelValues(b.Version, b.Commit, b.GoVersion).Set(1)
	reg.MustRegister(info)
	return reg
}
