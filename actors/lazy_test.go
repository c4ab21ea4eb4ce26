package actors_test

import (
	"context"
	"github.com/cronlock/cronlock/ledger/memory"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/cronlock/cronlock/process"
	"go.uber.org/zap"
)

// goroutinesAtMost waits up to 5s for the process to have at most n
// goroutines and returns the last count.
func goroutinesAtMost(n int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := runtime.NumGoroutine()
		if got <= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A job actor started with Start holds no goroutine while idle: a fire
// (TryFire, as the ticker delivers it) starts one that runs the slot (a
// real shell on the memory backend) and ends once the run has ended; the
// end of its context, noticed through Wake, calls onExit once, and a fire
// after that is skipped shutting_down without a second onExit.
func TestJob_StartHoldsNoGoroutineWhileIdle(t *testing.T) {
	metrics := NewMetrics(nil)
	metrics.InitJob("lazy")
	results := make(chan RunFinished, 4)
	job := NewJob(testJob(t, "lazy", "exit 0"), JobDeps{MaxSkew: testMaxSkew, Log: zap.NewNop(), Metrics: metrics,
		Locker: memory.NewMemory(), NodeID: "n1", Results: results, Phantoms: make(chan Phantom, 10),
		Kill: make(chan struct{})})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var exits atomic.Int32
	exited := make(chan struct{}, 2)
	// A first process starts the process package's reaper (and os/signal's
	// loop), which stay for the life of the test binary.
	p, err := process.Start(process.Spec{Shell: "/bin/sh", Command: "exit 0"})
	if err != nil {
		t.Fatal(err)
	}
	p.Wait()
	before := runtime.NumGoroutine()
	job.Start(ctx, func() { exits.Add(1); exited <- struct{}{} })
	if got := goroutinesAtMost(before); got > before {
		t.Fatalf("after Start: %d goroutines, want at most %d (none for the idle actor)", got, before)
	}

	if !job.TryFire(Fire{Job: "lazy", Slot: time.Now().Truncate(time.Second)}) {
		t.Fatal("TryFire on an empty inbox: got false, want true")
	}
	select {
	case r := <-results:
		if r.Result != ledger.ResultSuccess {
			t.Fatalf("run result: got %q, want %q", r.Result, ledger.ResultSuccess)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no run result within 10s of the fire: the fire did not wake the actor")
	}
	if got := goroutinesAtMost(before); got > before {
		t.Fatalf("after the run: %d goroutines, want at most %d (the actor idle again)", got, before)
	}

	cancel()
	job.Wake()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("onExit not called within 5s of the end of the context and a Wake")
	}
	job.TryFire(Fire{Job: "lazy", Slot: time.Now().Truncate(time.Second).Add(time.Second)})
	deadline := time.Now().Add(5 * time.Second)
	for promtest.Value(t, metrics, "cronlock_skips_total", "job", "lazy", "reason", ledger.SkipShuttingDown) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("a fire after the end: not skipped shutting_down within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := goroutinesAtMost(before); got > before || exits.Load() != 1 {
		t.Fatalf("after the late fire: %d goroutines (want at most %d), onExit called %d times (want 1)", got, before, exits.Load())
	}
}
