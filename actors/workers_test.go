package actors

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// waitParked waits until n workers are parked.
func waitParked(t *testing.T, w *Workers, n int32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for w.parked.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("parked workers: %d, want %d", w.parked.Load(), n)
		}
		runtime.Gosched()
	}
}

// A function given after a run ended runs on the parked worker, not on a
// new goroutine; no more than maxParked wait; Stop ends them.
func TestWorkers_ReuseBoundAndStop(t *testing.T) {
	w := NewWorkers(2)
	base := runtime.NumGoroutine()
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 3 { // three at once: three goroutines
		wg.Add(1)
		w.Go(func() { defer wg.Done(); <-release })
	}
	close(release)
	wg.Wait()
	waitParked(t, w, 2) // the third ended: maxParked is 2
	for range 50 {
		if runtime.NumGoroutine() == base+2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got != base+2 {
		t.Fatalf("goroutines: %d, want %d (2 parked workers)", got, base+2)
	}

	ran := make(chan struct{})
	w.Go(func() { close(ran) })
	<-ran
	waitParked(t, w, 2)
	if got := runtime.NumGoroutine(); got != base+2 {
		t.Errorf("goroutines after a reused run: %d, want %d", got, base+2)
	}

	w.Stop()
	w.Stop()
	waitParked(t, w, 0)
	done := make(chan struct{})
	w.Go(func() { close(done) }) // after Stop: still runs
	<-done
}

func TestWorkers_Nil(t *testing.T) {
	var w *Workers
	done := make(chan struct{})
	w.Go(func() { close(done) })
	<-done
	w.Stop()
}
