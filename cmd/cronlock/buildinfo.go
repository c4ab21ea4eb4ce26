package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo is what `cronlock -version -json` prints and what the
// cronlock_build_info metric carries as labels.
type buildInfo struct {
	Version   string `json:"version"`    // main.version (a tag, or the package version); "" for a development build
	Commit    string `json:"commit"`     // main.commit, else the VCS revision the go command stamped (12 hex digits); "" when unknown
	GoVersion string `json:"go_version"` // runtime.Version(), e.g. "go1.26.8"
}

// currentBuild returns this binary's build info: the link-time version and
// commit (Makefile: -X main.version, -X main.commit), falling back to the
// vcs.revision the go command embeds when it builds in a git checkout.
func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if b.Commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					b.Commit = s.Value[:12]
				}
			}
		}
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

// newRegistry returns the daemon's Prometheus registry with
// cronlock_build_info{version, commit, go_version} = 1 registered (the
// "info metric" pattern of the Prometheus naming guide: join it on labels).
// The engine registers its own metrics on the same registry.
func newRegistry(b buildInfo) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cronlock_build_info",
		Help: "Always 1; the labels say which cronlock build is running (version, commit, Go version).",
	}, []string{"version", "commit", "go_version"})
	info.WithLabelValues(b.Version, b.Commit, b.GoVersion).Set(1)
	reg.MustRegister(info)
	return reg
}
