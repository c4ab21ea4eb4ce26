package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (proc(5)); 100 on every Linux architecture cronlock builds for.
const clockTicks = 100

// cpuOf returns the CPU time (user + system) pid has used so far.
func cpuOf(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// BenchmarkDaemonCPUPerRun is the daemon's own CPU time per run (its
// utime+stime, not its children's), with 5 per-second jobs on the memory
// backend for 20 s (CRONLOCK_BENCH_SECONDS), for a command that leaves
// nothing behind and for one whose background sleep outlives the shell
// and is then terminated with the group.
func BenchmarkDaemonCPUPerRun(b *testing.B) {
	for _, bc := range []struct{ name, cmd string }{
		{"exit", "exit 0"},
		{"background", "sleep 0.2 & exit 0"},
		{"background-ignoring-TERM", "trap '' TERM; sleep 0.2 & exit 0"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var jobs []map[string]any
			for i := range 5 {
				jobs = append(jobs, map[string]any{"name": fmt.Sprintf("j%d", i), "schedule": "* * * * * *", "command": bc.cmd})
			}
			d := startBenchDaemon(b, map[string]any{"log": map[string]any{"level": "info"}, "jobs": jobs},
				"CRONLOCK_NODE_STATE_DIR="+b.TempDir())
			cpu0 := cpuOf(b, d.cmd.Process.Pid)
			n0 := strings.Count(d.read(b), `"run finished"`)
			time.Sleep(benchSeconds(20))
			cpu := cpuOf(b, d.cmd.Process.Pid) - cpu0
			runs := strings.Count(d.read(b), `"run finished"`) - n0
			d.stop(b)
			if runs == 0 {
				b.Fatal("no run finished")
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(runs), "cpu-us/run")
			b.ReportMetric(float64(runs), "runs")
		})
	}
}
