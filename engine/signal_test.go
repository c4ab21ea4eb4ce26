package engine

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// One SIGTERM both ends the caller's ctx (main cancels its ctx on SIGTERM)
// and arrives on Signals. Whichever the engine sees first, it is one
// signal: the shutdown waits for the running run, Run returns nil and
// ExitNow is not called. (Before the fix, a ctx seen first made the
// signal count as a second one: exit 1 at once, run not waited for, lease
// not released.)
func TestEngine_CtxEndAndSignalAreOneSignal(t *testing.T) {
	cfg := parseConfig(t, `
node: {shutdown_timeout: 10s}
jobs:
  - name: a
    schedule: "* * * * * *"
    command: "sleep 1"
`)
	notes, signals, done := newNotifyLog(), make(chan os.Signal, 4), make(chan error, 1)
	e, err := New(cfg, Options{Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		Notify: notes.notify, Signals: signals, ExitNow: func() { t.Error("ExitNow called: one SIGTERM counted as two") }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- e.Run(ctx) }()
	notes.waitPrefix(t, "READY=1")
	for deadline := time.Now().Add(10 * time.Second); e.metrics.Value("a", "running", "") < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("job a not running within 10s")
		}
	}

	cancel() // ctx first: the order that used to be taken for two signals
	notes.waitPrefix(t, "STATUS=shutting down")
	signals <- syscall.SIGTERM
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: got %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s")
	}
	if got := e.metrics.Value("a", "runs", "success"); got != 1 {
		t.Errorf("successful runs of a: got %v, want 1 (the shutdown waits for the run)", got)
	}
}
