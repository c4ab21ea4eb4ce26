package actors

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// Phantom is a lease this node may hold without knowing it: a claim or a
// release whose request failed may still have been applied by Redis
// (docs/protocol.md, "Phantom leases and the janitor"). Until is when the lease would expire by itself.
type Phantom struct {
	Job, Owner string
	Until      time.Time
}

// Janitor releases phantom leases once Redis answers again, so that a
// phantom never blocks a job for lock_ttl. It retries every
// retryEvery until the release succeeds or the lease would have expired.
type Janitor struct {
	log     *zap.Logger
	locker  Locker
	inbox   chan Phantom
	sweeps  chan chan struct{}
	pending map[Phantom]struct{}
}

const janitorRetry = 250 * time.Millisecond

// NewJanitor returns a janitor with an inbox of size n.
func NewJanitor(log *zap.Logger, locker Locker, n int) *Janitor {
	return &Janitor{log: log, locker: locker, inbox: make(chan Phantom, n), sweeps: make(chan chan struct{}),
		pending: map[Phantom]struct{}{}}
}

// Sweep asks the janitor to try every pending release now and blocks until
// it has (or ctx ends). The engine calls it when Redis answers again, before
// catch-up claims: claims queued while Redis hung may have been applied
// after their callers gave up, and their leases would make the catch-up
// claims fail with overlap.
func (j *Janitor) Sweep(ctx context.Context) {
	done := make(chan struct{})
	select {
	case j.sweeps <- done:
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Inbox is where runs send phantoms (non-blocking sends).
func (j *Janitor) Inbox() chan<- Phantom { return j.inbox }

// Run retries releases until ctx ends; then it makes one last attempt for
// each pending phantom (bounded) and returns nil.
func (j *Janitor) Run(ctx context.Context) error {
	t := time.NewTicker(janitorRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			j.sweep(context.WithoutCancel(ctx))
			return nil
		case p := <-j.inbox:
			j.pending[p] = struct{}{}
		case done := <-j.sweeps:
			j.drainInbox()
			j.sweep(ctx)
			close(done)
		case <-t.C:
			j.sweep(ctx)
		}
	}
}

func (j *Janitor) sweep(ctx context.Context) {
	for p := range j.pending {
		if time.Now().After(p.Until) {
			delete(j.pending, p)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		released, err := j.locker.Release(rctx, p.Job, p.Owner)
		cancel()
		if err != nil {
			return // Redis still unreachable; try again later
		}
		delete(j.pending, p)
		if released {
			j.log.Info("phantom lease released", zap.String("job", p.Job), zap.String("owner", p.Owner))
		}
	}
}

// drainInbox moves queued phantoms to pending without blocking.
func (j *Janitor) drainInbox() {
	for {
		select {
		case p := <-j.inbox:
			j.pending[p] = struct{}{}
		default:
			return
		}
	}
}
