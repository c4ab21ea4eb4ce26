package redislock

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/cpuwait"
	"go.uber.org/zap/zapcore"
)

// A probe that times out while this node's own goroutines waited for a
// CPU for half the probe's timeout or more (a herd's forks on the
// daemon's one P) is inconclusive: the node stays ready, the state says
// "stalled", one warning says so, nothing of a return (onBack) runs, and
// the next probe decides. At a 3 × 3,000-job herd on 2 cores every node
// logged "redis unreachable" (an error) and ran a return while an outside
// client's PING was answered within 12 ms. A Redis that is really down is
// reported by the first probe without a stall, and by the first that
// starts stallMaxFor after the first stalled probe began; every
// discounted probe logs a warning.
func TestHealth_StalledProbeIsInconclusive(t *testing.T) {
	srv, hh := newUpHealthHarness(t)

	// Redis frozen: no answer at all; the stall decides the verdict.
	srv.Pause()
	t.Cleanup(srv.Resume) // a no-op when running; before the server's own cleanup stops it
	wait := cpuwait.Stall(50*time.Millisecond, 250, 5*time.Millisecond)
	hh.check(t, false)
	wait()
	hh.expect(t, "probe timed out while goroutines waited ≥ 500 ms for the CPU", true, "up, stalled")
	if n := hh.count(zapcore.WarnLevel, "readiness probe inconclusive"); n != 1 || hh.backs != 0 {
		t.Fatalf("got %d inconclusive warnings and %d returns, want 1 and 0", n, hh.backs)
	}
	if n := hh.count(zapcore.ErrorLevel, "redis unreachable"); n != 0 {
		t.Fatalf("got %d unreachable errors during the stall, want 0", n)
	}

	// Still frozen, no stall made here: the outage is reported at once, by
	// the first probe that this machine's own load (other tests' processes
	// on its 2 CPUs) did not stall either; a probe it stalled is
	// inconclusive, as the product says, and counted.
	loadStalls := 0
	for hh.check(t, false); strings.HasPrefix(hh.state, "up, stalled") && loadStalls < 5; hh.check(t, false) {
		loadStalls++
	}
	if loadStalls > 0 {
		t.Logf("%d probes stalled by the machine's own load before one decided", loadStalls)
	}
	hh.expect(t, "probe timed out without a stall", false, "unreachable")
	srv.Resume()
	hh.check(t, false)
	hh.expect(t, "back", true, "up")
	if hh.backs != 1 {
		t.Fatalf("got %d returns, want 1 (after the real outage only)", hh.backs)
	}

	// Stalled probes in a row: each is discounted, and says so, until one
	// starts stallMaxFor after the first began. A stalled probe takes its
	// timeout plus the stall, longer on a loaded machine: the bound is
	// lifted while the probes run, then set to what has passed, so that
	// the next probe starts after it.
	srv.Pause()
	hh.b.mon.stallMaxFor = time.Minute
	for i := range 2 {
		wait = cpuwait.Stall(50*time.Millisecond, 250, 5*time.Millisecond)
		hh.check(t, false)
		wait()
		hh.expect(t, fmt.Sprintf("stalled probe %d of a run", i+1), true, "up, stalled")
	}
	if n := hh.count(zapcore.WarnLevel, "readiness probe inconclusive"); n != 3+loadStalls {
		t.Fatalf("got %d inconclusive warnings, want %d (one per discounted probe)", n, 3+loadStalls)
	}
	hh.b.mon.stallMaxFor = time.Since(hh.b.mon.stalledSince)
	wait = cpuwait.Stall(50*time.Millisecond, 250, 5*time.Millisecond)
	hh.check(t, false)
	wait()
	hh.expect(t, "a stalled probe stallMaxFor after the first stalled one began", false, "unreachable")
	srv.Resume()
}
