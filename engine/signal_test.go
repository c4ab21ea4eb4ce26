package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/cronlock/cronlock/ledger/memory"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// A shutdown begun by the caller's ctx, then one SIGTERM: that is the
// first signal, not a second one. The shutdown waits for the running run,
// Run returns nil and ExitNow is not called.
func TestEngine_CtxEndAndSignalAreOneSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, `
node: {shutdown_timeout: 10s}
jobs:
  - name: a
    schedule: "* * * * * *"
    command: "sleep 1s"
`)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		te := startInBubble(t, ctx, cfg, Options{ExitNow: func() { t.Error("ExitNow called: one SIGTERM counted as two") }})
		advance(1250 * time.Millisecond) // the slot at 1s started a run that lasts until 2s
		if got := te.running(t, "a"); got != 1 {
			t.Fatalf("job_running of a at 1.25s: got %v, want 1", got)
		}
		cancel() // the shutdown begins without a signal
		synctest.Wait()
		if got := te.notes.count("STOPPING=1\nSTATUS=shutting down"); got != 1 {
			t.Fatalf("STOPPING=1 sent %d times once ctx ended, want 1", got)
		}
		te.signals <- syscall.SIGTERM
		synctest.Wait()
		if te.returned() {
			t.Fatal("Run returned on the SIGTERM while the run was going: it was taken as a second signal")
		}
		advance(time.Second) // 2.25s: the run ended at 2s
		if !te.returned() {
			t.Fatal("Run had not returned 0.25s after the run ended")
		}
		if te.err != nil {
			t.Errorf("Run: got %v, want nil", te.err)
		}
		te.wantRuns(t, "a", 1, "the shutdown waits for the run")
		if got := te.notes.count("STOPPING=1\nSTATUS=shutting down"); got != 1 {
			t.Errorf("STOPPING=1 sent %d times in all, want 1", got)
		}
	})
}

// A second SIGTERM kills the running job at once (SIGKILL, even if it
// ignores SIGTERM), releases its lease, and exits through ExitNow — it does
// not wait for shutdown_timeout and leaves nothing behind. This test stays
// on real processes: what it checks is that a real process group that
// ignores SIGTERM is SIGKILLed, which a fake process cannot show.
func TestEngine_SecondSignalKillsRunsAndReleasesLeases(t *testing.T) {
	pipe, waitPID := pidPipe(t)
	cfg := parseConfig(t, `
node: {shutdown_timeout: 1h}
jobs:
  - name: stubborn
    schedule: "* * * * * *"
    command: "trap '' TERM; echo $$ > `+pipe+`; sleep 1000"
`)
	exited := make(chan struct{})
	te := launchEngine(t, context.Background(), cfg, Options{ExitNow: func() { close(exited) }})
	e, notes, signals := te.e, te.notes, te.signals
	pid := waitPID()
	signals <- syscall.SIGTERM
	notes.waitPrefix(t, "STOPPING=1")
	start := time.Now()
	signals <- syscall.SIGTERM
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("ExitNow not called within 10s of the second signal")
	}
	<-te.done
	if !errors.Is(te.err, errSecondSignal) {
		t.Errorf("Run: got %v, want errSecondSignal", te.err)
	}
	if took := time.Since(start); took > secondSignalWait {
		t.Errorf("exit took %v after the second signal, want < %v", took, secondSignalWait)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(st), ") Z ") {
			t.Errorf("job process %d still alive after the second signal", pid)
		}
	}
	st, err := e.backend.Backend.(*memory.Memory).State(context.Background(), "stubborn")
	if err != nil || st.LeaseHolder != "" {
		t.Errorf("lease after the second signal: holder %q (err %v), want released", st.LeaseHolder, err)
	}
}

// The engine side of the second signal on the bubble's clock: the first
// SIGTERM waits for the run (shutdown_timeout is 1h), the second kills it
// and exits through ExitNow at once, with the lease released.
func TestEngine_SecondSignalExitsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, `
node: {shutdown_timeout: 1h}
jobs:
  - name: stubborn
    schedule: "* * * * * *"
    command: "sleep 1000h"
`)
		exited := make(chan struct{})
		te := startInBubble(t, context.Background(), cfg, Options{ExitNow: func() { close(exited) }})
		advance(1250 * time.Millisecond)
		if got := te.running(t, "stubborn"); got != 1 {
			t.Fatalf("job_running at 1.25s: got %v, want 1", got)
		}
		te.signals <- syscall.SIGTERM
		advance(time.Minute)
		if te.returned() || te.running(t, "stubborn") != 1 {
			t.Fatalf("a minute after the first SIGTERM: returned %v, job_running %v; want the run still going",
				te.returned(), te.running(t, "stubborn"))
		}
		start := time.Now()
		te.signals <- syscall.SIGTERM
		synctest.Wait()
		select {
		case <-exited:
		default:
			t.Fatal("ExitNow not called once the bubble was idle after the second signal")
		}
		if !te.returned() {
			t.Fatal("Run had not returned once the bubble was idle after the second signal")
		}
		if !errors.Is(te.err, errSecondSignal) {
			t.Errorf("Run: got %v, want errSecondSignal", te.err)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("exit took %v of the bubble's clock after the second signal, want 0", took)
		}
		st, err := te.e.backend.Backend.(*memory.Memory).State(context.Background(), "stubborn")
		if err != nil || st.LeaseHolder != "" {
			t.Errorf("lease after the second signal: holder %q (err %v), want released", st.LeaseHolder, err)
		}
	})
}

// pidPipe makes a FIFO that a job writes its shell's pid to, and returns
// its path and a function that waits (bounded) for the pid. The test holds
// the FIFO open for reading and writing: the job's open never blocks, and
// the read waits for the line (it never sees end of file) instead of
// polling a file.
func pidPipe(t *testing.T) (string, func() int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pid")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path, func() int {
		t.Helper()
		if err := f.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(f).ReadString('\n')
		if err != nil {
			t.Fatalf("no pid from the job within 10s (%v): the job did not start", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("pid from the job: %v", err)
		}
		return pid
	}
}
