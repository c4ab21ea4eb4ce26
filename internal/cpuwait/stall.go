package cpuwait

import (
	"runtime"
	"sync"
	"time"
)

// Stall is for tests of what reads a Meter: it makes this process's
// goroutines wait for a CPU as a herd's forks make the daemon's wait. On
// one P (GOMAXPROCS 1, the daemon's on small machines), after delay, n
// goroutines become runnable at once and each then keeps the P busy for
// each; the later ones wait n × each. It returns a wait function for
// their end, which restores GOMAXPROCS.
func Stall(delay time.Duration, n int, each time.Duration) (wait func()) {
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
