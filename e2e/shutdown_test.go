package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests of the bounded, visible shutdown (issue 9, "What it must show" 6).

// deafHook is a hook command that ignores SIGTERM (the ignored disposition
// is inherited by its sleep) and writes its shell's pid, which is also its
// process group, to pidFile.
func deafHook(pidFile string) string {
	return fmt.Sprintf(`trap '' TERM; echo $$ > %s; sleep 600`, shellQuote(pidFile))
}

// A second SIGTERM exits at once while a hook drains: the hook hangs for
// 10 minutes and ignores SIGTERM (kill_grace 30s), so the drain outlasts
// shutdown_timeout (2s); the second SIGTERM 3s after the first ends the
// daemon within 2s, exit 1, with the hook's process group killed.
func TestShutdown_SecondSignalEndsHookDrain(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "hook.pid")
	_, sched := nextSecondWithin(2 * time.Second)
	cfg := memoryConfig(map[string]any{"name": "f", "schedule": sched, "command": "exit 1",
		"on_failure": deafHook(pidFile), "hook_timeout": "1h", "kill_grace": "30s"})
	cfg["node"] = map[string]any{"id": "solo", "shutdown_timeout": "2s"}
	n := startNode(t, writeConfig(t, cfg))
	waitFor(t, 10*time.Second, "the hook's pid", func() bool { return lineWritten(pidFile) })
	pgid := readPID(t, pidFile)

	n.Signal(syscall.SIGTERM)
	time.Sleep(3 * time.Second) // the drain outlasts shutdown_timeout: that is the test
	if nodeExited(n) {
		t.Fatalf("daemon exited (code %d) within 3s of SIGTERM; want it still draining the hook", n.exit)
	}
	second := time.Now()
	n.Signal(syscall.SIGTERM)
	code := n.Wait(10 * time.Second)
	took := time.Since(second)
	if code != 1 || took > 2*time.Second {
		t.Errorf("after the second SIGTERM: got exit %d after %v, want exit 1 within 2s", code, took)
	}
	if live := liveGroupMembers(t, pgid); len(live) != 0 {
		t.Errorf("hook's process group %d after the exit: got live members %v, want none", pgid, live)
	}
	if got := len(logsOf(n, "shutdown timeout passed; terminating the run", "")); got != 0 {
		t.Errorf("'shutdown timeout passed; terminating the run' logged %d times, want 0", got)
	}
}

// With one SIGTERM the shutdown is bounded and visible: a run and a hook
// that ignore SIGTERM are SIGKILLed kill_grace (3s) after shutdown_timeout
// (2s), and the daemon exits 0 within shutdown_timeout + kill_grace + 5s.
// Polled every 100ms from the signal on, /healthz answers 200 until the
// last run has ended and /readyz answers 503 from the first signal.
func TestShutdown_BoundedHealthUntilLastRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runPID, hookPID := filepath.Join(dir, "run.pid"), filepath.Join(dir, "hook.pid")
	_, sched := nextSecondWithin(2 * time.Second)
	listen := freeAddr(t)
	cfg := memoryConfig(
		map[string]any{"name": "long", "schedule": sched, "kill_grace": "3s",
			"command": fmt.Sprintf(`trap '' TERM; echo $$ > %s; sleep 600`, shellQuote(runPID))},
		map[string]any{"name": "hooked", "schedule": sched, "command": "exit 1", "kill_grace": "3s",
			"on_failure": deafHook(hookPID), "hook_timeout": "1h"})
	cfg["node"] = map[string]any{"id": "solo", "shutdown_timeout": "2s"}
	cfg["http"] = map[string]any{"listen": listen}
	n := startNode(t, writeConfig(t, cfg))
	waitFor(t, 10*time.Second, "the run's and the hook's pids", func() bool { return lineWritten(runPID) && lineWritten(hookPID) })

	signalled := time.Now()
	n.Signal(syscall.SIGTERM)
	type poll struct {
		at              time.Time
		healthz, readyz int // status codes; 0 = no answer
	}
	var polls []poll
	for !nodeExited(n) && time.Since(signalled) < 15*time.Second {
		polls = append(polls, poll{at: time.Now(), healthz: status("http://" + listen + "/healthz"),
			readyz: status("http://" + listen + "/readyz")})
		time.Sleep(100 * time.Millisecond) // the polling period
	}
	code := n.Wait(time.Second)
	took := time.Since(signalled)
	if code != 0 || took > 10*time.Second || took < 5*time.Second {
		t.Errorf("after SIGTERM: got exit %d after %v, want exit 0 after shutdown_timeout + kill_grace (5s), within 10s",
			code, took)
	}
	finished := n.WaitLog(time.Second, `"run finished" of long`, func(e logEntry) bool { return e.is("run finished", "long") })
	ended := finished.Time()
	// The signal is handled asynchronously: a poll sent before the daemon
	// logged the start of its shutdown (which it does just after it marks
	// itself not ready) may still see 200. Log times have millisecond
	// precision.
	began := n.WaitLog(time.Second, "shutting down", func(e logEntry) bool {
		return strings.HasPrefix(e.Msg(), "shutting down")
	}).Time().Add(time.Millisecond)
	before, after := 0, 0
	for _, p := range polls {
		if !p.at.Before(began) {
			after++
			if p.readyz == http.StatusOK {
				t.Errorf("/readyz %v after SIGTERM (after the shutdown began): got 200, want 503 from the first signal", p.at.Sub(signalled))
			}
		}
		if p.at.Before(ended.Add(-10 * time.Millisecond)) { // log times have millisecond precision
			before++
			if p.healthz != http.StatusOK {
				t.Errorf("/healthz %v after SIGTERM, before the last run ended: got %d, want 200",
					p.at.Sub(signalled), p.healthz)
			}
		}
	}
	if after < len(polls)-2 {
		t.Errorf("of %d polls, %d came after the shutdown began (%v after SIGTERM), want all but the first two", len(polls), after, began.Sub(signalled))
	}
	if want := int(ended.Sub(signalled) / (200 * time.Millisecond)); before < want {
		t.Errorf("polls before the last run ended (%v after SIGTERM): got %d, want ≥ %d", ended.Sub(signalled), before, want)
	}
	for _, pidFile := range []string{runPID, hookPID} {
		if live := liveGroupMembers(t, readPID(t, pidFile)); len(live) != 0 {
			t.Errorf("process group of %s after the exit: got live members %v, want none", filepath.Base(pidFile), live)
		}
	}
}

// status returns the status code of GET url (1s timeout), 0 when there is
// no answer.
func status(url string) int {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
