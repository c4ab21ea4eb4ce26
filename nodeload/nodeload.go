// Package nodeload counts the runs in progress on this node, enforces
// node.max_parallel, and orders the nodes' claims by load without
// coordination: a node delays each claim by an amount that grows with its
// runs in progress (at most MaxDelay), so that the claims of idle nodes
// reach Redis first and win. The claims of one burst (many jobs due at the
// same instant) also get a random place in up to MaxDelay, so that a node
// that is a little faster than the others does not win whole bursts:
// Redis runs the commands one connection has sent together before it
// turns to the next connection.
package nodeload

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxDelay bounds the claim delay.
const MaxDelay = 20 * time.Millisecond

// PerRun is the claim delay per run in progress when node.max_parallel is
// unlimited: MaxDelay is reached at 20 runs.
const PerRun = time.Millisecond

// PerQueued is the claim delay per claim of this node already queued when
// a claim enters: the claims of one burst (many jobs due at one instant)
// leave spread over up to MaxDelay in the order they entered, which is
// each node's own, so that no node wins a whole burst by being a little
// faster.
const PerQueued = 333 * time.Microsecond

// Load is the node's run count. It is a small leaf type shared by every
// job actor's run goroutines: its methods are safe for concurrent use and
// never block.
type Load struct {
	max     int  // node.max_parallel; 0 = unlimited
	ordered bool // claims race other nodes' (Redis backend): delay them
	mu      sync.Mutex
	held    int           // reservations: claims in flight plus runs in progress
	running int           // of them, claims won: runs in progress
	queued  int           // claims between Enter and Leave (waiting out their delay, or in flight)
	freed   chan struct{} // closed (and replaced) by the next Release
	gauge   prometheus.Gauge
}

// New returns the load of a node that may have at most maxParallel runs in
// progress (0 = unlimited). ordered turns the claim delay on: claims race
// other nodes' (the Redis backend); a lone node (memory backend) has no
// race to order and never waits. reg receives
// cronlock_node_runs_in_progress (nil = not registered).
func New(maxParallel int, ordered bool, reg prometheus.Registerer) *Load {
	l := &Load{max: max(maxParallel, 0), ordered: ordered, freed: make(chan struct{}), gauge: prometheus.NewGauge(prometheus.GaugeOpts{
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

// Hold takes a place that is a run in progress at once, even at
// max_parallel: for a run whose slot is claimed already and must run (a
// pending slot handed on by a run that held no place). It is followed by
// one Release(true).
func (l *Load) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held++
	l.running++
	l.gauge.Set(float64(l.running))
}

// Freed returns a channel that is closed by the next Release: a caller
// that Reserve refused waits on it, then tries again.
func (l *Load) Freed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.freed
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
// It wakes every Freed waiter.
func (l *Load) Release(won bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held--
	close(l.freed)
	l.freed = make(chan struct{})
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

// Enter queues a claim and returns how long to wait before sending it: 0
// on an idle node, growing with the runs in progress (PerRun each, or
// MaxDelay/max_parallel each with a limit) and with the claims already
// queued (PerQueued each), at most MaxDelay. Each Enter must be followed
// by one Leave once the claim has its answer (or is not sent). Without
// ordering (New) it is always 0.
func (l *Load) Enter() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queued++
	if !l.ordered {
		return 0
	}
	per := PerRun
	if l.max > 0 {
		per = MaxDelay / time.Duration(l.max)
	}
	d := per * time.Duration(l.running)
	if l.queued > 1 { // a random place among the claims queued before it
		d += rand.N(PerQueued*time.Duration(l.queued-1) + 1)
	}
	return min(MaxDelay, d)
}

// Leave ends what Enter began.
func (l *Load) Leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queued--
}
