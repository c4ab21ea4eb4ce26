//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/redistest"
)

// runIdle starts one node with 10,000 jobs, none due in the run (minute m,
// hour h on January 1st), and measures its start-up (exec to "engine
// running"), then its CPU over CRONLOCK_BENCH_SECONDS (10 s) and its RSS.
func runIdle(t *testing.T, s settings, wl *Workload) {
	a := take(t)
	srv := redistest.Start(t)
	jobs := make([]map[string]any, 10000)
	for i := range jobs {
		jobs[i] = map[string]any{"name": fmt.Sprintf("job%05d", i), "schedule": fmt.Sprintf("%d %d 1 1 *", i%60, i/60%24), "command": "true"}
	}
	if now := time.Now(); now.Month() == time.January && now.Day() == 1 {
		t.Skip("on January 1st the idle jobs are due")
	}
	cfg := writeConfig(t, map[string]any{"redis": map[string]any{"address": srv.Addr()}, "jobs": jobs})
	nd := startNodes(t, cronlockBin, cfg, 1)[0]
	running := nd.lines(t, "engine running")
	ts, err := time.Parse(zapTime, running[0].TS)
	if err != nil {
		t.Fatalf("engine running ts: %v", err)
	}
	time.Sleep(2 * time.Second) // the start-up catch-up and the first health checks
	t0, c0 := time.Now(), nd.cpu(t)
	time.Sleep(time.Duration(s.seconds(10)) * time.Second)
	cpu, wall := CPUBetween(c0, nd.cpu(t)), time.Since(t0)
	rss := nd.rssMiB(t)
	stopNodes(t, []*node{nd})
	srv.Stop()
	wl.Runs = append(wl.Runs, Run{Kind: KindDaemon, Load: Between(a, take(t))})
	add(wl, "start-up (exec to engine running)", "ms", &Target{Of: OfDaemon, Max: 300}, float64(ts.Sub(nd.started).Milliseconds()))
	add(wl, "CPU while idle", "% of a core", &Target{Of: OfDaemon, Max: 0.5}, 100*cpu.Seconds()/wall.Seconds())
	add(wl, "RSS", "MiB", &Target{Of: OfDaemon, Max: 60}, rss)
}

// runLoad loads and validates a 10,000-job YAML file with config.Load, as
// the daemon does at start and at reload, 5 times; the value is the median.
func runLoad(t *testing.T, s settings, wl *Workload) {
	var b strings.Builder
	fmt.Fprintf(&b, "node: {id: bench, state_dir: %q}\nredis: {address: '127.0.0.1:6379'}\ndefaults: {timeout: 5m, env: {A: b}}\njobs:\n", t.TempDir())
	scheds := []string{"%d %d * * *", "%d %d * * 1-5", "30 %d %d * * *", "CRON_TZ=Europe/Berlin %d %d 1,15 * *", "%d */%d * * *"}
	for i := range 10000 {
		fmt.Fprintf(&b, "  - name: job-%d\n    schedule: %q\n    command: echo ${HOME:-/} %d\n    timezone: UTC\n",
			i, fmt.Sprintf(scheds[i%len(scheds)], i%60, i/60%23+1), i)
	}
	yamlPath := filepath.Join(t.TempDir(), "cronlock.yaml")
	if err := os.WriteFile(yamlPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same jobs as one line of JSON (a generated file): every token's
	// line number must not cost a scan from the start.
	jobs := make([]map[string]any, 10000)
	for i := range jobs {
		jobs[i] = map[string]any{"name": fmt.Sprintf("job-%d", i), "schedule": fmt.Sprintf("%d %d * * *", i%60, i/60%24), "command": "true"}
	}
	data, err := json.Marshal(map[string]any{"node": map[string]any{"id": "bench", "state_dir": t.TempDir()}, "jobs": jobs})
	if err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(t.TempDir(), "cronlock.json")
	if err := os.WriteFile(jsonPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	a := take(t)
	for _, f := range []struct{ name, path string }{{"YAML", yamlPath}, {"JSON on one line", jsonPath}} {
		var ms []float64
		for range 5 {
			t0 := time.Now()
			cfg, err := config.Load(f.path, config.Options{Environ: os.Environ(), Euid: os.Geteuid(), Hostname: "bench"})
			if err != nil {
				t.Fatalf("load %s: %v", f.name, err)
			}
			ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
			if len(cfg.Jobs) != 10000 {
				t.Fatalf("load %s: %d jobs, want 10000", f.name, len(cfg.Jobs))
			}
		}
		add(wl, "config.Load of 10,000 jobs, "+f.name+" (median of 5)", "ms", &Target{Of: OfDaemon, Max: 200}, Median(ms))
	}
	wl.Runs = append(wl.Runs, Run{Kind: KindDaemon, Load: Between(a, take(t))})
}
