package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/cronlock/cronlock/redislock"
)

// A shutdown begun by the caller's ctx, then one SIGTERM: that is the
// first signal, not a second one. The shutdown waits for the running run,
// Run returns nil and ExitNow is not called.
func TestEngine_CtxEndAndSignalAreOneSignal(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	cfg := parseConfig(t, `
node: {shutdown_timeout: 10s}
jobs:
  - name: a
    schedule: "* * * * * *"
    command: "echo $$ > `+pidFile+`; sleep 1"
`)
	ctx, cancel := context.WithCancel(context.Background())
	te := launchEngine(t, ctx, cfg, Options{ExitNow: func() { t.Error("ExitNow called: one SIGTERM counted as two") }})
	e, notes, signals, done := te.e, te.notes, te.signals, te.done
	waitPIDFile(t, pidFile) // the run's process has started
	cancel()                // the shutdown begins without a signal
	notes.waitPrefix(t, "STOPPING=1")
	signals <- syscall.SIGTERM
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: got %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s")
	}
	if got := promtest.Value(t, e.metrics, "cronlock_runs_total", "job", "a", "result", "success"); got != 1 {
		t.Errorf("successful runs of a: got %v, want 1 (the shutdown waits for the run)", got)
	}
}

// A second SIGTERM kills the running job at once (SIGKILL, even if it
// ignores SIGTERM), releases its lease, and exits through ExitNow — it does
// not wait for shutdown_timeout and leaves nothing behind.
func TestEngine_SecondSignalKillsRunsAndReleasesLeases(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	cfg := parseConfig(t, `
node: {shutdown_timeout: 1h}
jobs:
  - name: stubborn
    schedule: "* * * * * *"
    command: "trap '' TERM; echo $$ > `+pidFile+`; sleep 1000"
`)
	exited := make(chan struct{})
	te := launchEngine(t, context.Background(), cfg, Options{ExitNow: func() { close(exited) }})
	e, notes, signals, done := te.e, te.notes, te.signals, te.done
	pid := waitPIDFile(t, pidFile)
	signals <- syscall.SIGTERM
	notes.waitPrefix(t, "STOPPING=1")
	start := time.Now()
	signals <- syscall.SIGTERM
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("ExitNow not called within 10s of the second signal")
	}
	if err := <-done; !errors.Is(err, errSecondSignal) {
		t.Errorf("Run: got %v, want errSecondSignal", err)
	}
	if took := time.Since(start); took > secondSignalWait {
		t.Errorf("exit took %v after the second signal, want < %v", took, secondSignalWait)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(st), ") Z ") {
			t.Errorf("job process %d still alive after the second signal", pid)
		}
	}
	st, err := e.backend.Backend.(*redislock.Memory).State(context.Background(), "stubborn")
	if err != nil || st.LeaseHolder != "" {
		t.Errorf("lease after the second signal: holder %q (err %v), want released", st.LeaseHolder, err)
	}
}

// waitPIDFile waits (bounded) until a job wrote its shell's pid to path.
func waitPIDFile(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		data, _ := os.ReadFile(path)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s within 10s: the job did not start", path)
		}
	}
}
