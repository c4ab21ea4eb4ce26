package engine

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/cronlock/cronlock/process"
)

// get serves one request to the engine's HTTP handler (no socket: the
// bubble tests keep real network I/O out) and returns its status code.
func (te *testEngine) get(path string) int {
	rec := httptest.NewRecorder()
	te.e.handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code
}

func (te *testEngine) hookFails(t *testing.T, job, hook, reason string) float64 {
	return promtest.Value(t, te.e.metrics, "cronlock_hook_failures_total", "job", job, "hook", hook, "reason", reason)
}

// While the shutdown waits for a run, /healthz still answers (the ticker
// loop runs on, without entries), the watchdog still pings, and /readyz
// says not ready from the first signal on; once the run has ended the
// engine stops and the pings stop.
func TestEngine_DrainKeepsHealthAndWatchdogNotReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, `
node: {shutdown_timeout: 1h}
jobs:
  - name: a
    schedule: "* * * * * *"
    command: "sleep 10s"
`)
		// WATCHDOG_USEC=1.2s: a probe every 600ms, never at a whole second.
		te := startInBubble(t, context.Background(), cfg, Options{Environ: []string{"WATCHDOG_USEC=1200000"}})
		advance(1250 * time.Millisecond) // the slot at 1s started a run that lasts until 11s
		if got := te.get("/readyz"); got != http.StatusOK {
			t.Fatalf("/readyz before the shutdown: got %d, want 200", got)
		}
		te.signals <- syscall.SIGTERM
		synctest.Wait()
		pings := te.notes.count("WATCHDOG=1")
		if got := te.get("/readyz"); got != http.StatusServiceUnavailable {
			t.Errorf("/readyz once the shutdown began: got %d, want 503", got)
		}
		advance(9500 * time.Millisecond) // 10.75s: the run still going
		if te.returned() {
			t.Fatal("Run returned before the run ended")
		}
		if got := te.get("/healthz"); got != http.StatusOK {
			t.Errorf("/healthz during the drain: got %d, want 200", got)
		}
		if got := te.get("/readyz"); got != http.StatusServiceUnavailable {
			t.Errorf("/readyz during the drain: got %d, want 503", got)
		}
		if got := te.notes.count("WATCHDOG=1") - pings; got != 15 {
			t.Errorf("WATCHDOG=1 during the 9.5s drain: got %d, want 15 (every 600ms, 1.8s to 10.2s)", got)
		}
		if got := te.logged("slot skipped"); got != 0 {
			t.Errorf("slot skipped lines during the drain: got %d, want 0 (the ticker has no entries)", got)
		}
		advance(500 * time.Millisecond) // 11.25s: the run ended at 11s
		if !te.returned() || te.err != nil {
			t.Fatalf("0.25s after the run ended: returned %v (err %v), want Run to return nil", te.returned(), te.err)
		}
		pings = te.notes.count("WATCHDOG=1")
		advance(2 * time.Second)
		if got := te.notes.count("WATCHDOG=1"); got != pings {
			t.Errorf("WATCHDOG=1 after Run returned: got %d more, want none", got-pings)
		}
	})
}

// hangingHook is a config whose job f fails every second and whose
// on_failure hook hangs for an hour (hook_timeout 2h).
const hangingHook = `
node: {shutdown_timeout: %s}
jobs:
  - name: f
    schedule: "* * * * * *"
    command: "exit 1"
    on_failure: "sleep 1h"
    hook_timeout: 2h
`

// Hooks drain within shutdown_timeout: a hook still running then is
// terminated (counted shutdown) and Run returns; STOPPING=1 comes with
// EXTEND_TIMEOUT_USEC = shutdown_timeout + the largest kill_grace (10s by
// default) + shutdownSlack.
func TestEngine_HookDrainBoundedByShutdownTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, strings.Replace(hangingHook, "%s", "3s", 1))
		te := startInBubble(t, context.Background(), cfg, Options{})
		advance(1250 * time.Millisecond) // the run at 1s failed; its hook hangs
		te.signals <- syscall.SIGTERM    // at 1.25s: the drain ends at 4.25s
		advance(2500 * time.Millisecond)
		if te.returned() {
			t.Fatal("Run returned at 3.75s, before shutdown_timeout (3s) passed; want it to wait for the hook")
		}
		advance(time.Second) // 4.75s
		if !te.returned() || te.err != nil {
			t.Fatalf("0.5s after shutdown_timeout passed: returned %v (err %v), want Run to return nil", te.returned(), te.err)
		}
		if got := te.hookFails(t, "f", "on_failure", actors.HookFailShutdown); got != 1 {
			t.Errorf("hooks terminated at shutdown: got %v, want 1", got)
		}
		if got := te.notes.count("EXTEND_TIMEOUT_USEC=17000000"); got != 1 {
			t.Errorf("EXTEND_TIMEOUT_USEC=17000000 (3s + 10s + 4s) sent %d times, want 1; states %q", got, te.notes.snapshot())
		}
	})
}

// A second signal exits at once while hooks drain (shutdown_timeout 1h):
// ExitNow is called and Run returns errSecondSignal with no time passing
// on the bubble's clock, and the log never says shutdown_timeout passed.
func TestEngine_SecondSignalDuringHookDrainExitsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, strings.Replace(hangingHook, "%s", "1h", 1))
		exited := make(chan struct{})
		te := startInBubble(t, context.Background(), cfg, Options{ExitNow: func() { close(exited) }})
		advance(1250 * time.Millisecond)
		te.signals <- syscall.SIGTERM
		advance(time.Minute)
		if te.returned() {
			t.Fatal("Run returned a minute into the hook drain; want it still draining")
		}
		start := time.Now()
		te.signals <- syscall.SIGTERM
		synctest.Wait()
		select {
		case <-exited:
		default:
			t.Fatal("ExitNow not called once the bubble was idle after the second signal")
		}
		if !te.returned() || !errors.Is(te.err, errSecondSignal) {
			t.Fatalf("after the second signal: returned %v, err %v; want errSecondSignal", te.returned(), te.err)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("exit took %v of the bubble's clock, want 0", took)
		}
		for _, msg := range []string{"shutdown_timeout passed; terminating running jobs and hooks",
			"shutdown_timeout passed; terminating the hook", "shutdown timeout passed; terminating the run"} {
			if got := te.logged(msg); got != 0 {
				t.Errorf("%q logged %d times, want 0 (no shutdown_timeout passed)", msg, got)
			}
		}
	})
}

// A run that does not end even when killed (here a fake whose Terminate
// does nothing) cannot hold the shutdown forever: after shutdown_timeout +
// kill_grace + shutdownSlack the engine logs it and exits through ExitNow.
func TestEngine_ShutdownBoundExits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, `
node: {shutdown_timeout: 2s}
jobs:
  - name: stuck
    schedule: "* * * * * *"
    command: "unkillable"
    kill_grace: 1s
`)
		s := &unkillable{release: make(chan struct{})}
		exited := make(chan struct{})
		te := startInBubble(t, context.Background(), cfg, Options{Start: s.start, ExitNow: func() { close(exited) }})
		advance(1250 * time.Millisecond)
		te.signals <- syscall.SIGTERM
		advance(6500 * time.Millisecond) // 7.75s: the bound (2s + 1s + 4s) ends at 8.25s
		if te.returned() {
			t.Fatal("Run returned before the shutdown's bound")
		}
		advance(time.Second) // 8.75s
		select {
		case <-exited:
		default:
			t.Fatal("ExitNow not called 0.5s after the shutdown's bound")
		}
		if !te.returned() || !errors.Is(te.err, errShutdownBound) {
			t.Fatalf("Run: returned %v, err %v; want errShutdownBound", te.returned(), te.err)
		}
		if got := te.logged("shutdown not finished within shutdown_timeout + kill_grace + slack; exiting anyway"); got != 1 {
			t.Errorf("bound exits logged: got %d, want 1", got)
		}
		// ExitNow would have ended the process; here the run is let end
		// and the hook runner closed so that the bubble's goroutines finish.
		s.releaseAll()
		synctest.Wait()
		te.e.closeHooks()
	})
}

// unkillable starts fake processes that ignore Terminate and end only
// when released.
type unkillable struct {
	mu      sync.Mutex
	release chan struct{}
}

func (u *unkillable) start(spec process.Spec) (actors.Proc, error) {
	if spec.Command != "unkillable" {
		return fakeproc.Start(spec)
	}
	return &stuckProc{started: time.Now(), done: u.release}, nil
}

func (u *unkillable) releaseAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	select {
	case <-u.release:
	default:
		close(u.release)
	}
}

type stuckProc struct {
	started time.Time
	done    chan struct{}
}

func (p *stuckProc) Pid() int                { return 1 }
func (p *stuckProc) Group() process.Group    { return process.Group{} }
func (p *stuckProc) Started() time.Time      { return p.started }
func (p *stuckProc) Terminate(time.Duration) {}
func (p *stuckProc) Done() <-chan struct{}   { return p.done }
func (p *stuckProc) Wait() process.Result {
	<-p.done
	return process.Result{ExitCode: -1, Started: p.started, Finished: time.Now()}
}

// The STATUS= sent with READY=1 is true: before the first health check
// has answered or failed it says "connecting", never "unreachable". The
// Redis address here accepts connections and never answers, so the first
// ping takes its whole timeout (1s) and READY=1 comes before it; then
// STATUS= says unreachable.
func TestEngine_FirstStatusSaysConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go holdConnections(ln)
	cfg := parseConfig(t, `
lock: {backend: redis}
redis: {address: "`+ln.Addr().String()+`", dial_timeout: 1s} # bounds the handshake: the stop is quick
node: {shutdown_timeout: 1s}
jobs:
  - name: a
    schedule: "0 0 1 1 *"
    command: "exit 0"
`)
	te := launchEngine(t, context.Background(), cfg, Options{})
	defer te.stop(t)
	ready := te.notes.snapshot()[0]
	if !strings.HasPrefix(ready, "READY=1\nSTATUS=") || !strings.Contains(ready, "redis backend connecting") ||
		strings.Contains(ready, "unreachable") {
		t.Errorf("first state: got %q, want READY=1 with STATUS= saying the redis backend is connecting", ready)
	}
	te.notes.waitPrefix(t, "STATUS=1 jobs, 0 running; redis backend unreachable, not claiming")
}

// holdConnections accepts connections and never answers them, until ln is
// closed.
func holdConnections(ln net.Listener) {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		conns = append(conns, c)
	}
}

// A second signal while runs go on never logs "shutdown timeout passed":
// Kill and KillNow are both closed then, and each run acts on KillNow.
// Which of two ready channels a select takes is random, so the shutdown
// is repeated 20 times, each with 3 runs going.
func TestEngine_SecondSignalNeverSaysShutdownTimeoutPassed(t *testing.T) {
	for i := range 20 {
		synctest.Test(t, func(t *testing.T) {
			cfg := parseConfig(t, `
node: {shutdown_timeout: 1h}
jobs:
  - {name: a, schedule: "* * * * * *", command: "sleep 1h"}
  - {name: b, schedule: "* * * * * *", command: "sleep 1h"}
  - {name: c, schedule: "* * * * * *", command: "sleep 1h"}
`)
			te := startInBubble(t, context.Background(), cfg, Options{ExitNow: func() {}})
			advance(1250 * time.Millisecond)
			te.signals <- syscall.SIGTERM
			synctest.Wait()
			te.signals <- syscall.SIGTERM
			synctest.Wait()
			if !te.returned() || !errors.Is(te.err, errSecondSignal) {
				t.Fatalf("round %d: returned %v, err %v; want errSecondSignal", i, te.returned(), te.err)
			}
			if got := te.logged("second signal: killing the run at once"); got != 3 {
				t.Errorf("round %d: runs killed at once: got %d lines, want 3", i, got)
			}
			if got := te.logged("shutdown timeout passed; terminating the run"); got != 0 {
				t.Errorf("round %d: 'shutdown timeout passed; terminating the run' logged %d times, want 0", i, got)
			}
		})
	}
}
