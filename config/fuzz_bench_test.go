package config

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// FuzzLoad checks that Parse never panics on any YAML input, and that a
// success always yields fully resolved jobs.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{"../testdata/example.yaml", "../testdata/seed-readme.yaml", "../testdata/invalid/everything.yaml", "../testdata/example-redis.yaml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("jobs: [{name: a, schedule: '@every 1s', command: '${X:-${Y}}'}]"))
	f.Add([]byte("redis: {addresses: [a:1, b:2], db: 99999999999999}\n1: {2: 3}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "yaml", Options{Environ: []string{"X=1"}, Hostname: "h"})
		if err != nil {
			return
		}
		for _, j := range cfg.Jobs {
			if j.Sched == nil || j.Location == nil || j.LockTTL <= 0 {
				t.Fatalf("job %q not resolved: %+v", j.Name, j)
			}
		}
	})
}

// bigConfig returns a YAML config with n jobs; most schedules are distinct
// (minute and hour vary), so the schedule cache does not flatter the result.
func bigConfig(n int) []byte {
	var b strings.Builder
	b.WriteString("redis: {address: 'localhost:6379'}\ndefaults: {timeout: 5m, env: {A: b}}\njobs:\n")
	scheds := []string{"%d %d * * *", "%d %d * * 1-5", "30 %d %d * * *", "CRON_TZ=Europe/Berlin %d %d 1,15 * *", "%d */%d * * *"}
	for i := range n {
		s := fmt.Sprintf(scheds[i%len(scheds)], i%60, i/60%23+1)
		fmt.Fprintf(&b, "  - name: job-%d\n    schedule: %q\n    command: echo ${HOME:-/} %d\n    timezone: UTC\n", i, s, i)
	}
	return []byte(b.String())
}

// BenchmarkLoad10k measures parsing and validating 10,000 jobs (target:
// under 1 s).
func BenchmarkLoad10k(b *testing.B) {
	data := bigConfig(10000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		cfg, err := Parse(data, "yaml", Options{})
		if err != nil || len(cfg.Jobs) != 10000 {
			b.Fatal(err)
		}
	}
}

func TestLoad10k(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	cfg, err := Parse(bigConfig(10000), "yaml", Options{})
	if err != nil || len(cfg.Jobs) != 10000 {
		t.Fatal(err)
	}
}
