package nodeload

import (
	"context"
	"sync"
	"time"
)

// MaxBurstDefer bounds how long after its fire time a deferred claim
// waits for the node's first claims of the same instant (Burst.Defer).
const MaxBurstDefer = 500 * time.Millisecond

// Burst orders a node's claims of one instant at a herd (docs/protocol.md,
// "Who sends first"): the claims of which this node is rank 0 (first
// claims, Load.Enter) go out before the node's deferred ones (ranks
// ≥ 1). Load.Enter's delay alone does not do this
// when thousands of jobs are due at once: each node then needs hundreds
// of milliseconds to send its first claims, and a node's rank-1 claims,
// 20 ms later, would win the slots of every node that sends its first
// claims more slowly. So a deferred claim also waits until the node's own
// first claims of its instant have their answers, and then as long again
// as those took from the fire time: the other nodes, busy with the same
// herd on similar machines, have sent theirs by then. For the usual
// instant (a few jobs) that is a few milliseconds; at most MaxBurstDefer
// after the fire time in all. Only scheduled claims at their fire time
// use it (package actors): a catch-up claim does not wait for claims of
// its slot still in flight to a Redis that was down. Its methods are safe for concurrent use; a
// nil *Burst orders nothing.
type Burst struct {
	mu    sync.Mutex
	slots map[int64]*burstSlot
}

// burstSlot is one instant's first claims.
type burstSlot struct {
	inFlight int           // first claims sent, not yet answered
	idle     chan struct{} // closed when inFlight returns to 0
	doneAt   time.Time     // when it last did
	began    time.Time     // when the first of them was counted (First)
}

// NewBurst returns a Burst with no claims.
func NewBurst() *Burst { return &Burst{slots: map[int64]*burstSlot{}} }

// First counts a first claim of slot (Unix seconds) about to be sent; the
// returned func, called once when its answer (or error) is back, ends it.
// It never blocks.
func (b *Burst) First(slot int64) (done func()) {
	if b == nil {
		return func() {}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.slots[slot]
	if s == nil {
		b.gcLocked(slot)
		s = &burstSlot{began: time.Now()}
		b.slots[slot] = s
	}
	if s.inFlight == 0 {
		s.idle = make(chan struct{})
	}
	s.inFlight++
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if s.inFlight--; s.inFlight == 0 {
				s.doneAt = time.Now()
				close(s.idle)
			}
		})
	}
}

// Defer blocks a deferred claim of slot, fired at fire, until the node's
// first claims of slot have their answers and as long again as they took
// from fire (or from the first of them, when it came before fire: claims
// sent in the claim lead, package actors), at most until fire +
// MaxBurstDefer, or until ctx ends. It returns at once when the node sent
// no first claim of slot.
func (b *Burst) Defer(ctx context.Context, slot int64, fire time.Time) {
	if b == nil {
		return
	}
	limit := time.NewTimer(time.Until(fire.Add(MaxBurstDefer)))
	defer limit.Stop()
	for {
		b.mu.Lock()
		s := b.slots[slot]
		if s == nil {
			b.mu.Unlock()
			return
		}
		idle, inFlight, doneAt, from := s.idle, s.inFlight, s.doneAt, s.began
		b.mu.Unlock()
		if fire.Before(from) {
			from = fire
		}
		if inFlight == 0 {
			wait := time.Until(doneAt.Add(doneAt.Sub(from)))
			if wait <= 0 {
				return
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
				continue // more first claims may have been sent meanwhile
			case <-limit.C:
			case <-ctx.Done():
			}
			t.Stop()
			return
		}
		select {
		case <-idle: // the first claims may be done, or new ones came: look again
		case <-limit.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// gcLocked forgets the instants more than a minute before slot (their
// deferred claims are past MaxBurstDefer). b.mu must be held.
func (b *Burst) gcLocked(slot int64) {
	for s, st := range b.slots {
		if s < slot-60 && st.inFlight == 0 {
			delete(b.slots, s)
		}
	}
}
