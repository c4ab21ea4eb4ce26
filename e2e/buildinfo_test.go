package e2e

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestBuildInfo_OnMetrics checks that the daemon's /metrics carries
// cronlock_build_info with the binary's Go version (the e2e binary is built
// by the same toolchain as this test) and value 1.
func TestBuildInfo_OnMetrics(t *testing.T) {
	t.Parallel()
	listen := freeAddr(t)
	cfg := writeConfig(t, map[string]any{
		"lock": map[string]any{"backend": "memory"},
		"http": map[string]any{"listen": listen},
		"jobs": []map[string]any{{"name": "idle", "schedule": "@yearly", "command": "true"}},
	})
	n := startNode(t, cfg, withNodeID("build-info"))
	waitEngineRunning(n)
	var line string
	waitFor(t, 10*time.Second, "cronlock_build_info on /metrics", func() bool {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get("http://" + listen + "/metrics")
		if err != nil {
			return false // not listening yet
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "cronlock_build_info{") {
				line = l
				return true
			}
		}
		return false
	})
	if !strings.Contains(line, `go_version="`+runtime.Version()+`"`) || !strings.HasSuffix(line, "} 1") ||
		!strings.Contains(line, `commit="`) || !strings.Contains(line, `version="`) {
		t.Errorf("got %q; want labels version, commit, go_version=%q and value 1", line, runtime.Version())
	}
	stopAll(t, 15*time.Second, n)
}
