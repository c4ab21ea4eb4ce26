package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/redis/rueidis"
)

// The benchmarks below check, with the real binary, the performance targets
// stated with each of them. Each runs once for a fixed wall-clock span
// (CRONLOCK_BENCH_SECONDS overrides the length) and reports its numbers
// with b.ReportMetric. Run them with `make bench` or:
//
//	go test -run '^$' -bench . -benchtime 1x ./e2e

func benchSeconds(def int) time.Duration {
	if n, err := strconv.Atoi(os.Getenv("CRONLOCK_BENCH_SECONDS")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return time.Duration(def) * time.Second
}

// benchDaemon is a daemon started for a benchmark.
type benchDaemon struct {
	cmd *exec.Cmd
	log string
}

func startBenchDaemon(b *testing.B, cfg map[string]any, env ...string) *benchDaemon {
	b.Helper()
	dir := b.TempDir()
	data, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "cronlock.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	d := &benchDaemon{log: filepath.Join(dir, "daemon.log")}
	f, err := os.Create(d.log)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	d.cmd = exec.Command(binary, "-config", path, "-log-format", "json")
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stderr = f
	if err := d.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.cmd.Process.Kill(); _ = d.cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(d.read(b), `"engine running"`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("daemon did not start within 30s")
		}
	}
	return d
}

func (d *benchDaemon) read(b *testing.B) string {
	data, err := os.ReadFile(d.log)
	if err != nil {
		b.Fatal(err)
	}
	return string(data)
}

func (d *benchDaemon) stop(b *testing.B) {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		b.Errorf("daemon exit: %v", err)
	}
}

// fireDelays returns the fire delays (ms) the daemon logged with "run started".
func (d *benchDaemon) fireDelays(b *testing.B) []float64 {
	var out []float64
	sc := bufio.NewScanner(strings.NewReader(d.read(b)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) != nil || e["msg"] != "run started" {
			continue
		}
		if us, ok := e["fire_delay_us"].(float64); ok {
			out = append(out, us/1000)
		}
	}
	return out
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// BenchmarkFireDelay_OneNode: 1 node, 1 job per second (target: p50 ≤ 2 ms,
// p99 ≤ 10 ms), measured by the daemon from the slot instant to the
// successful exec of the child.
func BenchmarkFireDelay_OneNode(b *testing.B) {
	d := startBenchDaemon(b, map[string]any{"jobs": []map[string]any{
		{"name": "tick", "schedule": "* * * * * *", "command": "true"}}})
	time.Sleep(benchSeconds(30))
	d.stop(b)
	delays := d.fireDelays(b)
	b.ReportMetric(float64(len(delays)), "runs")
	b.ReportMetric(percentile(delays, 0.5), "p50-ms")
	b.ReportMetric(percentile(delays, 0.99), "p99-ms")
}

// BenchmarkIdle_10kJobs: 10,000 jobs on one node, none due (target: CPU
// < 1% of a core, RSS < 100 MiB). CPU is the daemon's user+system time over
// 10 s after start-up, as a percentage of one core.
func BenchmarkIdle_10kJobs(b *testing.B) {
	jobs := make([]map[string]any, 10000)
	for i := range jobs {
		jobs[i] = map[string]any{"name": fmt.Sprintf("job-%05d", i),
			"schedule": fmt.Sprintf("%d %d 1 1 *", i%60, (i/60)%24), "command": "true"}
	}
	started := time.Now()
	d := startBenchDaemon(b, map[string]any{"jobs": jobs})
	b.ReportMetric(time.Since(started).Seconds()*1000, "startup-ms")
	time.Sleep(2 * time.Second)
	t0, c0 := time.Now(), cpuTicks(b, d.cmd.Process.Pid)
	time.Sleep(benchSeconds(10))
	c1, t1 := cpuTicks(b, d.cmd.Process.Pid), time.Now()
	b.ReportMetric(float64(c1-c0)/100/t1.Sub(t0).Seconds()*100, "cpu-%")
	b.ReportMetric(float64(rssKiB(b, d.cmd.Process.Pid))/1024, "rss-MiB")
	d.stop(b)
}

// cpuTicks is utime+stime of pid in clock ticks (USER_HZ = 100).
func cpuTicks(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	fs := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	u, _ := strconv.ParseInt(fs[11], 10, 64)
	s, _ := strconv.ParseInt(fs[12], 10, 64)
	return u + s
}

func rssKiB(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// benchLedgerCommand appends `JOB SLOT NODE START_NS` where START_NS is
// measured by the job itself, at its start.
func benchLedgerCommand(ledger string) string {
	return fmt.Sprintf(`echo "$CRONLOCK_JOB $CRONLOCK_SCHEDULED_TIME $CRONLOCK_NODE_ID $(date +%%s%%N)" >> %s`, shellQuote(ledger))
}

type benchRun struct {
	job, node string
	slot      int64
	startNs   int64
}

func readBenchLedger(b *testing.B, path string) []benchRun {
	var out []benchRun
	for _, fs := range ledgerLines(b, path) {
		if len(fs) != 4 {
			continue
		}
		slot, err1 := time.Parse(time.RFC3339, fs[1])
		ns, err2 := strconv.ParseInt(fs[3], 10, 64)
		if err1 != nil || err2 != nil {
			b.Fatalf("ledger line %q", fs)
		}
		out = append(out, benchRun{job: fs[0], slot: slot.Unix(), node: fs[2], startNs: ns})
	}
	return out
}

// jobMeasuredDelays is START_NS − slot in ms for every run.
func jobMeasuredDelays(runs []benchRun) []float64 {
	out := make([]float64, len(runs))
	for i, r := range runs {
		out[i] = float64(r.startNs-r.slot*1e9) / 1e6
	}
	return out
}

// BenchmarkCluster_3Nodes50Jobs: 3 nodes × 50 jobs every second on one Redis
// for 60 s (targets: 0 duplicate and 0 missed slots; fire delay p99
// ≤ 50 ms; job-measured start times within 10% of the floor's; Redis round
// trips per slot = 1 claim per node + 1 release). The floor is a bare Go
// program starting the same 50 commands at the same instants.
func BenchmarkCluster_3Nodes50Jobs(b *testing.B) {
	srv := redistest.Start(b)
	ledger := filepath.Join(b.TempDir(), "ledger")
	jobs := make([]map[string]any, 50)
	for i := range jobs {
		jobs[i] = map[string]any{"name": fmt.Sprintf("job%02d", i), "schedule": "* * * * * *",
			"command": benchLedgerCommand(ledger), "timeout": "30s"}
	}
	cfg := map[string]any{"redis": map[string]any{"address": srv.Addr()}, "jobs": jobs}
	var nodes []*benchDaemon
	for _, id := range []string{"n1", "n2", "n3"} {
		nodes = append(nodes, startBenchDaemon(b, cfg, "CRONLOCK_NODE_ID="+id))
	}
	calls0 := evalshaCalls(b, srv.Addr())
	from := time.Now().Unix() + 1
	time.Sleep(benchSeconds(60))
	to := time.Now().Unix() - 1
	for _, n := range nodes {
		n.stop(b)
	}
	calls := evalshaCalls(b, srv.Addr()) - calls0
	var delays []float64
	for _, n := range nodes {
		delays = append(delays, n.fireDelays(b)...)
	}
	runs := readBenchLedger(b, ledger)
	dups, missed, inWindow := slotStats(runs, len(jobs), from, to)
	b.ReportMetric(float64(dups), "duplicates")
	b.ReportMetric(float64(missed), "missed")
	b.ReportMetric(percentile(delays, 0.5), "fire-p50-ms")
	b.ReportMetric(percentile(delays, 0.99), "fire-p99-ms")
	b.ReportMetric(calls/float64(len(runs)), "redis-calls/run")
	jm := jobMeasuredDelays(inWindow)
	b.ReportMetric(percentile(jm, 0.5), "job-p50-ms")
	b.ReportMetric(percentile(jm, 0.99), "job-p99-ms")

	floor := floorDelays(b, len(jobs), benchSeconds(20))
	b.ReportMetric(percentile(floor, 0.5), "floor-p50-ms")
	b.ReportMetric(percentile(floor, 0.99), "floor-p99-ms")
	if dups != 0 || missed != 0 {
		b.Errorf("got %d duplicate and %d missed slots, want 0 and 0", dups, missed)
	}
}

// slotStats counts duplicate runs over all slots and missed (job, slot)
// pairs over [from, to]; it also returns the runs of slots in [from, to].
func slotStats(runs []benchRun, jobs int, from, to int64) (dups, missed int, in []benchRun) {
	seen := map[string]int{}
	for _, r := range runs {
		k := fmt.Sprintf("%s/%d", r.job, r.slot)
		seen[k]++
		if seen[k] == 2 {
			dups++
		}
		if r.slot >= from && r.slot <= to {
			in = append(in, r)
		}
	}
	for s := from; s <= to; s++ {
		for j := range jobs {
			if seen[fmt.Sprintf("job%02d/%d", j, s)] == 0 {
				missed++
			}
		}
	}
	return dups, missed, in
}

func evalshaCalls(b *testing.B, addr string) float64 {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, "cmdstat_evalsha:") || strings.HasPrefix(l, "cmdstat_eval:") {
			v := l[strings.Index(l, "calls=")+6:]
			n, _ := strconv.ParseFloat(v[:strings.IndexByte(v, ',')], 64)
			total += n
		}
	}
	return total
}

// floorDelays starts n copies of the ledger command at every whole second
// for span, from a bare Go program, and returns their job-measured delays.
func floorDelays(b *testing.B, n int, span time.Duration) []float64 {
	ledger := filepath.Join(b.TempDir(), "floor")
	end := time.Now().Add(span)
	for slot := time.Now().Truncate(time.Second).Add(time.Second); slot.Before(end); slot = slot.Add(time.Second) {
		time.Sleep(time.Until(slot))
		var wg sync.WaitGroup
		for j := range n {
			wg.Go(func() {
				cmd := exec.Command("/bin/sh", "-c", benchLedgerCommand(ledger))
				cmd.Env = append(os.Environ(), fmt.Sprintf("CRONLOCK_JOB=job%02d", j),
					"CRONLOCK_SCHEDULED_TIME="+slot.UTC().Format(time.RFC3339), "CRONLOCK_NODE_ID=floor")
				_ = cmd.Run()
			})
		}
		wg.Wait()
	}
	return jobMeasuredDelays(readBenchLedger(b, ledger))
}
