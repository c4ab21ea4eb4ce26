package actors

import (
	"sync"
	"sync/atomic"
)

// Workers runs the job actors' runs on goroutines kept from earlier runs.
//
// A run's goroutine goes deep (the claim through rueidis, the fork, zap's
// encoders) while a daemon's goroutines are mostly job actors parked in a
// select, and the runtime starts each new goroutine with the average
// stack size it saw at the last GC: a fresh run goroutine grew its stack
// two or three times (each growth copies the stack), 8% of the daemon's
// CPU in a profile under 3 nodes × 200 runs/s (README.md "Performance").
// A worker that has run one run keeps its grown stack for the next (until
// a GC shrinks the stack of a parked goroutine). At most maxParked workers
// wait; beyond that a worker ends with its run.
type Workers struct {
	idle      chan func()
	stop      chan struct{}
	stopOnce  sync.Once
	parked    atomic.Int32
	maxParked int32
}

// NewWorkers returns Workers that keep up to maxParked idle goroutines.
func NewWorkers(maxParked int) *Workers {
	return &Workers{idle: make(chan func()), stop: make(chan struct{}), maxParked: int32(maxParked)}
}

// Go runs f on a parked worker, or on a new goroutine when none is
// waiting. It never blocks. A nil *Workers runs f on a new goroutine, as
// after Stop.
func (w *Workers) Go(f func()) {
	if w == nil {
		go f()
		return
	}
	select {
	case w.idle <- f:
	default:
		go w.work(f)
	}
}

// work runs f, then waits for the next function until Stop, or ends at
// once when maxParked workers are already waiting.
func (w *Workers) work(f func()) {
	for {
		f()
		if w.parked.Add(1) > w.maxParked {
			w.parked.Add(-1)
			return
		}
		select {
		case f = <-w.idle:
			w.parked.Add(-1)
		case <-w.stop:
			w.parked.Add(-1)
			return
		}
	}
}

// Stop ends the parked workers (a worker running a function ends after
// it). Go still runs what it is given afterwards. Idempotent.
func (w *Workers) Stop() {
	if w != nil {
		w.stopOnce.Do(func() { close(w.stop) })
	}
}
