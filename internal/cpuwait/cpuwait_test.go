package cpuwait

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// stallCPU makes this process's goroutines wait for a CPU as a herd's
// forks make the daemon's wait: on one P (GOMAXPROCS 1, the daemon's on
// small machines), after delay, n goroutines become runnable at once and
// each then keeps the P busy for each; the later ones wait n × each. It
// returns a wait function for their end. GOMAXPROCS is restored then.
func stallCPU(t *testing.T, delay time.Duration, n int, each time.Duration) (wait func()) {
	t.Helper()
	prev := runtime.GOMAXPROCS(1)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			for from := time.Now(); time.Since(from) < each; {
			}
		})
	}
	time.AfterFunc(delay, func() { close(start) })
	return func() { wg.Wait(); runtime.GOMAXPROCS(prev) }
}

// A Meter sees goroutines that waited runnable: n goroutines made
// runnable at once on one P that each keep it 5 ms make the later ones
// wait about a second; the meter reports a wait of at least 250 ms (it
// samples one scheduling transition in eight: some of the last hundred
// are sampled). Without such a stall it reports less than 250 ms.
func TestStallMeter_SeesGoroutinesWaitingForACPU(t *testing.T) {
	m := NewMeter()
	before := m.Read()
	if before == nil {
		t.Fatalf("runtime metric %s missing", schedLatencies)
	}
	time.Sleep(100 * time.Millisecond)
	if got := m.LongestSince(before); got >= 250*time.Millisecond {
		t.Fatalf("idle: longest wait at least %v, want < 250ms", got)
	}
	before = m.Read()
	stallCPU(t, 0, 200, 5*time.Millisecond)()
	if got := m.LongestSince(before); got < 250*time.Millisecond {
		t.Fatalf("200 goroutines × 5 ms on one P: longest wait at least %v, want ≥ 250ms", got)
	}
}
