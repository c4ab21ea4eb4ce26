// Package nodeload counts the runs in progress on this node, enforces
// node.max_parallel, and orders the nodes' claims by load without
// coordination: a node delays each claim by an amount that grows with its
// runs in progress (at most MaxDelay), so that the claims of idle nodes
// reach Redis first and win.
package nodeload

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxDelay bounds the claim delay.
const MaxDelay = 20 * time.Millisecond

// PerRun is the claim delay per run in progress when node.max_parallel is
// unlimited: MaxDelay is reached at 80 runs.
const PerRun = 250 * time.Microsecond

// Load is the node's run count. It is a small leaf type shared by every
// job actor's run goroutines: its methods are safe for concurrent use and
// never block.
type Load struct {
	max     int // node.max_parallel; 0 = unlimited
	mu      sync.Mutex
	held    int // reservations: claims in flight plus runs in progress
	running int // of them, claims won: runs in progress
	gauge   prometheus.Gauge
}

// New returns the load of a node that may have at most maxParallel runs in
// progress (0 = unlimited). reg receives cronlock_node_runs_in_progress
// (nil = not registered).
func New(maxParallel int, reg prometheus.Registerer) *Load {
	l := &Load{max: max(maxParallel, 0), gauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cronlock_node_runs_in_progress",
		Help: "Runs in progress on this node (claims won, not yet released), all jobs together."})}
	if reg != nil {
		reg.MustRegister(l.gauge)
	}
	return l
}

// Max is node.max_parallel (0 = unlimited).
func (l *Load) Max() int { return l.max }

// Reserve takes one place for a claim about to be sent and reports whether
// there was one: false when the node holds max_parallel reservations
// already (its runs in progress and the claims in flight), so that a node
// at its limit does not claim. Each true must be followed by one Release.
func (l *Load) Reserve() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.held >= l.max {
		return false
	}
	l.held++
	return true
}

// Won marks a reservation whose claim was won: a run in progress until its
// Release.
func (l *Load) Won() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running++
	l.gauge.Set(float64(l.running))
}

// Release gives back a reservation; won says whether Won was called for it.
func (l *Load) Release(won bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held--
	if won {
		l.running--
		l.gauge.Set(float64(l.running))
	}
}

// InProgress is the number of runs in progress (claims won, not released).
func (l *Load) InProgress() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running
}

// ClaimDelay is how long to wait before sending a claim: 0 on an idle
// node, growing with the runs in progress to MaxDelay, which it reaches at
// max_parallel runs (or at MaxDelay/PerRun = 80 runs when unlimited). Claims
// in flight do not count: every node has the same ones for a slot.
func (l *Load) ClaimDelay() time.Duration {
	n := l.InProgress()
	if l.max > 0 {
		return min(MaxDelay, MaxDelay*time.Duration(n)/time.Duration(l.max))
	}
	return min(MaxDelay, PerRun*time.Duration(n))
}
