package actors

import (
	"sync"
	"time"
)

// ClaimGateMax bounds how long a won run waits for the node's other claims
// in flight or waiting their turn (ClaimGate): a herd's later claims wait
// their turn in the burst order up to nodeload.MaxBurstDefer (500 ms after
// the fire time), and must be sent before the winners fork.
const ClaimGateMax = time.Second

// ClaimGate holds a node's process starts while its claims are in flight.
// At a herd (thousands of jobs due at the same instant) the winners of the
// first claims would otherwise start forking at once, and on a small
// machine the hundreds of runnable shells starve Redis and the daemon, so
// that the later claims of the same instant pass their timeout and their
// slots are skipped (redis_error) or missed. With the gate a won run starts
// its process once no claim of the node is in flight, or after
// ClaimGateMax, whichever comes first. A lone claim (the usual case) never
// waits. One ClaimGate is shared by all job actors of a daemon; its methods
// are safe for concurrent use, and a nil *ClaimGate does nothing.
type ClaimGate struct {
	mu   sync.Mutex
	n    int           // claims in flight
	idle chan struct{} // closed when n returns to 0; made by the first wait while n > 0, nil otherwise
}

// NewClaimGate returns a gate with no claim in flight.
func NewClaimGate() *ClaimGate { return &ClaimGate{} }

// begin counts a claim that is about to be sent.
func (g *ClaimGate) begin() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
}

// end counts a claim that has its answer (or its error).
func (g *ClaimGate) end() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// wait blocks until no claim is in flight, max has passed, or kill is
// closed. It returns at once when no claim is in flight.
func (g *ClaimGate) wait(max time.Duration, kill <-chan struct{}) {
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return
	}
	if g.idle == nil { // made only when waited on: a lone claim's winner never waits
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-kill:
	}
}
