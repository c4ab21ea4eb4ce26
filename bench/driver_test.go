//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// settings are the driver's environment variables (README.md, "Performance").
type settings struct {
	only    map[string]bool // CRONLOCK_BENCH_WORKLOADS: comma-separated names; empty = all
	secs    int             // CRONLOCK_BENCH_SECONDS: length of each run; 0 = the workload's default
	pairs   int             // CRONLOCK_BENCH_PAIRS: floor/daemon pairs, default 3
	results string          // CRONLOCK_BENCH_RESULTS: results file, default results.json
	// baseline is CRONLOCK_BENCH_BASELINE: a cronlock binary built from an
	// older commit; the rate workloads then add a run of it to each pair
	// (floor, daemon, baseline), so that CPU per run is compared
	// interleaved. "" = none.
	baseline string
}

func (s settings) seconds(def int) int {
	if s.secs > 0 {
		return s.secs
	}
	return def
}

func readSettings(t *testing.T) settings {
	s := settings{only: map[string]bool{}, pairs: 3, results: "results.json"}
	for _, w := range strings.Split(os.Getenv("CRONLOCK_BENCH_WORKLOADS"), ",") {
		if w = strings.TrimSpace(w); w != "" {
			if !known(w) {
				t.Fatalf("CRONLOCK_BENCH_WORKLOADS: unknown workload %q; the workloads are %s", w, names())
			}
			s.only[w] = true
		}
	}
	for env, p := range map[string]*int{"CRONLOCK_BENCH_SECONDS": &s.secs, "CRONLOCK_BENCH_PAIRS": &s.pairs} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a whole number ≥ 1", env, v)
			}
			*p = n
		}
	}
	if v := os.Getenv("CRONLOCK_BENCH_RESULTS"); v != "" {
		s.results = v
	}
	if v := os.Getenv("CRONLOCK_BENCH_BASELINE"); v != "" {
		if _, err := exec.LookPath(v); err != nil {
			t.Fatalf("CRONLOCK_BENCH_BASELINE=%q: %v; give the path of a cronlock binary", v, err)
		}
		s.baseline = v
	}
	return s
}

// workload is one entry of the bench. An optional one runs only when
// CRONLOCK_BENCH_WORKLOADS names it.
type workload struct {
	name, desc string
	run        func(t *testing.T, s settings, wl *Workload)
	optional   bool
}

var workloads = []workload{
	{"host", "this machine's speed: /bin/sh -c true started 200 times in a row (no target; compare tables of different days)", runHost, false},
	{"1x1", "1 node × 1 job/s (Redis)", func(t *testing.T, s settings, wl *Workload) {
		runRate(t, s, wl, rateSpec{nodes: 1, jobs: 1, seconds: 10, fireTargets: true})
	}, false},
	{"3x50", "3 nodes × 50 jobs/s (one Redis)", func(t *testing.T, s settings, wl *Workload) {
		runRate(t, s, wl, rateSpec{nodes: 3, jobs: 50, seconds: 6})
	}, false},
	{"3x200", "3 nodes × 200 jobs/s (one Redis)", func(t *testing.T, s settings, wl *Workload) {
		runRate(t, s, wl, rateSpec{nodes: 3, jobs: 200, seconds: 6})
	}, false},
	{"herd", "3 nodes × 3,000 jobs on * * * * *: one minute boundary, between two floors", runHerd, false},
	{"idle10k", "1 node, 10,000 jobs none due (Redis)", runIdle, false},
	{"load10k", "config load and validation of 10,000 jobs (config.Load, in process)", runLoad, false},
	{"redis", "top-level Redis commands per slot (MONITOR, lua lines dropped), 3 nodes × 50 jobs/s", runRedisCalls, false},
	{"side-by-side", "3 nodes × 50 jobs/s of this build and of CRONLOCK_BENCH_BASELINE at the same time, each on its own Redis (optional)",
		runSideBySide, true},
}

func known(name string) bool {
	for _, w := range workloads {
		if w.name == name {
			return true
		}
	}
	return false
}

func names() string {
	var n []string
	for _, w := range workloads {
		n = append(n, w.name)
	}
	return strings.Join(n, ", ")
}

// TestBench is the bench driver: it runs the selected workloads in order,
// prints the table, writes the results file and fails if a target was
// missed or a workload could not be measured.
func TestBench(t *testing.T) {
	s := readSettings(t)
	res := &Results{Started: time.Now().UTC(), CPUs: runtime.NumCPU(), Commit: commit()}
	for _, w := range workloads {
		if len(s.only) > 0 && !s.only[w.name] || len(s.only) == 0 && w.optional {
			continue
		}
		wl := &Workload{Name: w.name, Desc: w.desc}
		res.Workloads = append(res.Workloads, wl)
		if !t.Run(w.name, func(t *testing.T) { w.run(t, s, wl) }) {
			wl.Err = "the workload failed: see the test log"
		}
	}
	res.Seconds = time.Since(res.Started).Seconds()
	failed := res.Evaluate()
	fmt.Printf("\n%s, %d CPUs, %.0f s, commit %s\n\n", res.Started.Format(time.RFC3339), res.CPUs, res.Seconds, res.Commit)
	for _, wl := range res.Workloads {
		fmt.Printf("- %s: %s\n", wl.Name, wl.Desc)
	}
	fmt.Println()
	if err := res.WriteTable(os.Stdout); err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.results, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if failed > 0 {
		t.Errorf("%d targets missed or workloads not measured (FAIL in the table)", failed)
	}
}

// commit is the checkout's short commit, "+dirty" with uncommitted changes.
func commit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty=+dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
