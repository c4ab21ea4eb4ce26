package main

import (
	"runtime"
	"testing"
)

// The daemon's own process runs with a quarter of the default GOMAXPROCS
// (at least 1); GOMAXPROCS in the environment, or a daemon inside another
// program (a test), keeps what the runtime has.
func TestSetProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	if n, from := setProcs([]string{"GOMAXPROCS=3"}, true); n != prev || from != "environment" || runtime.GOMAXPROCS(0) != prev {
		t.Fatalf("with GOMAXPROCS set: %d from %q, runtime %d; want the runtime's %d unchanged", n, from, runtime.GOMAXPROCS(0), prev)
	}
	runtime.GOMAXPROCS(8)
	if n, from := setProcs([]string{"GOMAXPROCS=abc", "GOMAXPROCS=0"}, true); n != 2 || from == "environment" {
		t.Fatalf("with GOMAXPROCS not a number ≥ 1 (ignored by the runtime): %d from %q, want the default's 2 of 8", n, from)
	}
	runtime.GOMAXPROCS(prev)
	if n, _ := setProcs(nil, false); n != prev || runtime.GOMAXPROCS(0) != prev {
		t.Fatalf("inside another program: %d, runtime %d; want %d unchanged", n, runtime.GOMAXPROCS(0), prev)
	}
	for _, c := range []struct{ cpus, want int }{{1, 1}, {2, 1}, {7, 1}, {8, 2}, {64, 16}} {
		runtime.GOMAXPROCS(c.cpus)
		if n, _ := setProcs([]string{"HOME=/"}, true); n != c.want || runtime.GOMAXPROCS(0) != c.want {
			t.Errorf("default of %d CPUs: %d (runtime %d), want %d", c.cpus, n, runtime.GOMAXPROCS(0), c.want)
		}
	}
}
