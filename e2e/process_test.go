package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// memoryConfig is a single-node config on the memory backend.
func memoryConfig(jobs ...map[string]any) map[string]any {
	return map[string]any{
		"node": map[string]any{"id": "solo", "shutdown_timeout": "10s"},
		"log":  map[string]any{"level": "debug"},
		"jobs": jobs,
	}
}

// lineWritten reports whether path holds a whole line. A job's
// `echo … > f` creates f before it writes: the file alone is not enough.
func lineWritten(path string) bool {
	data, err := os.ReadFile(path)
	return err == nil && strings.HasSuffix(string(data), "\n")
}

// readPID reads a pid written by a job; the test fails if it is missing.
func readPID(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

func TestTimeout_KillsGrandchildren(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain, deaf := filepath.Join(dir, "plain.pid"), filepath.Join(dir, "deaf.pid")
	_, sched := nextSecondWithin(2 * time.Second)
	// Two grandchildren in the run's process group: a plain sleep, and one
	// that ignores SIGTERM so that only the SIGKILL after kill_grace ends it.
	// Each is killed once when the test fails, lest it outlive the test.
	cmd := fmt.Sprintf(`sleep 1000 & echo $! > %s; (trap '' TERM; exec sleep 1000) & echo $! > %s; sleep 1000`,
		shellQuote(plain), shellQuote(deaf))
	job := map[string]any{"name": "stuck", "schedule": sched, "command": cmd, "timeout": "2s", "kill_grace": "1s"}
	n := startNode(t, writeConfig(t, memoryConfig(job)))

	started := n.WaitLog(10*time.Second, `"run started"`, func(e logEntry) bool { return e.is("run started", "stuck") })
	pgid := int(started.Int("pid"))
	waitFor(t, 5*time.Second, "pid files", func() bool { return lineWritten(plain) && lineWritten(deaf) })
	pids := map[string]int{"sleep": readPID(t, plain), "sleep ignoring SIGTERM": readPID(t, deaf)}
	t.Cleanup(func() {
		for _, pid := range pids {
			if !processGone(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	finished := n.WaitLog(10*time.Second, `"run finished"`, func(e logEntry) bool { return e.is("run finished", "stuck") })

	if got := finished.Str("result"); got != "timeout" {
		t.Errorf("run result: got %q, want %q", got, "timeout")
	}
	// "run finished" is logged only once the group is gone: no polling.
	for what, pid := range pids {
		if !processGone(pid) {
			st, _ := procState(pid)
			t.Errorf("grandchild %s (pid %d) after run finished: got alive (state %s), want gone", what, pid, st)
		}
	}
	if live := liveGroupMembers(t, pgid); len(live) > 0 {
		t.Errorf("process group %d after run finished: got live members %v, want none", pgid, live)
	}
	if d := finished.Time().Sub(started.Time()); d < 3*time.Second {
		t.Errorf("run duration with a SIGTERM-deaf grandchild: got %v, want ≥ timeout 2s + kill_grace 1s", d)
	}
	stopAll(t, 10*time.Second, n)
}

// vmRSS reads VmRSS of pid in bytes.
func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func TestOutput_200MBBoundedRSS(t *testing.T) {
	t.Parallel()
	const limit = 64 << 20
	marker := filepath.Join(t.TempDir(), "result")
	_, sched := nextSecondWithin(2 * time.Second)
	// 100 MB in 100-byte lines, then 100 MB on one line without a newline
	// (cut into pieces by the daemon): both must stream, not accumulate.
	cmd := `head -c 100000000 /dev/zero | tr '\0' x | fold -w 100; head -c 100000000 /dev/zero | tr '\0' y`
	hook := fmt.Sprintf(`echo "$CRONLOCK_RESULT $CRONLOCK_EXIT_CODE" > %s`, shellQuote(marker))
	job := map[string]any{"name": "loud", "schedule": sched, "command": cmd, "timeout": "80s",
		"on_success": hook, "on_failure": hook}
	cfg := memoryConfig(job)
	cfg["log"] = map[string]any{"level": "info"} // every output line is logged (to /dev/null)
	n := startNode(t, writeConfig(t, cfg), withStderrDiscarded())

	// Sample until the hook, which runs after the whole output was read,
	// has written its marker line.
	var maxRSS int64
	samples := 0
	deadline := time.Now().Add(90 * time.Second)
	for {
		rss, err := vmRSS(n.Pid())
		if err != nil {
			t.Fatalf("daemon RSS: %v (daemon exited?)", err)
		}
		maxRSS, samples = max(maxRSS, rss), samples+1
		if lineWritten(marker) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run of 200 MB output: no hook marker after 90s")
		}
		time.Sleep(100 * time.Millisecond) // the sampling period
	}
	got, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != "success 0" {
		t.Errorf("run of 200 MB output: got hook %q, want %q", strings.TrimSpace(string(got)), "success 0")
	}
	t.Logf("daemon max RSS over %d samples: %.1f MiB", samples, float64(maxRSS)/(1<<20))
	if maxRSS >= limit {
		t.Errorf("daemon max RSS while a job printed 200 MB: got %.1f MiB, want < %d MiB", float64(maxRSS)/(1<<20), limit>>20)
	}
	stopAll(t, 10*time.Second, n)
}
