package e2e

import "testing"

// forkHeavy is held by the tests that fork hundreds of shells a second
// for many seconds (a Cluster of 300 jobs, the spread scenario's 60 jobs
// of 2 s, short runs at 30 a second): one at a time. Each judges the
// cluster by its slots, and on the 2-core development VM, on a day when
// its fork and exec cost several times their usual (README,
// "Performance", the bench's host row), two of them side by side, with the
// other tests of make test, left the machine unable to start a slot's runs
// before the next slot: skipped overlap and node_busy by the nodes, a
// failure of the machine that each test would report as the daemon's.
var forkHeavy = make(chan struct{}, 1)

// heavy waits until no other fork-heavy test runs and holds forkHeavy
// until t's cleanups run (registered first, it is released last, after
// the test's daemons are stopped). Call it after t.Parallel and before
// anything is started.
func heavy(t *testing.T) {
	t.Helper()
	forkHeavy <- struct{}{}
	t.Cleanup(func() { <-forkHeavy })
}
