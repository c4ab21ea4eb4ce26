package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
)

// safetyMargin is how long before the server-side expiry a lease whose
// renewals have failed is declared lost: TTL/5, at least 500 ms, at most
// TTL/2. The run is killed within half of it, so its processes are dead
// before another node can acquire the lease (SPEC.md §4).
func safetyMargin(ttl time.Duration) time.Duration {
	return min(max(ttl/5, 500*time.Millisecond), ttl/2)
}

// Lease is the actor that keeps one run's lease alive: it renews every
// TTL/3 with compare-and-PEXPIRE and reports loss once on Lost (SPEC.md §4,
// STYLE.md 10: the adapter is a plain call, the lease actor owns time).
//
// The local deadline is the send time of the last successful renewal (or of
// the claim) plus TTL minus the safety margin; it is measured on the
// monotonic clock, so wall-clock steps cannot stretch it.
type Lease struct {
	log      *zap.Logger
	locker   Locker
	job      string
	owner    string
	ttl      time.Duration
	acquired time.Time // send time of the successful claim
	lost     chan LeaseLost
}

// NewLease returns a lease actor for a lease claimed at acquired (the
// instant the claim request was sent). log should carry the job's name.
func NewLease(log *zap.Logger, locker Locker, job, owner string, ttl time.Duration, acquired time.Time) *Lease {
	return &Lease{log: log, locker: locker, job: job, owner: owner, ttl: ttl, acquired: acquired,
		lost: make(chan LeaseLost, 1)}
}

// Lost delivers at most one LeaseLost, then nothing. It is never closed.
func (l *Lease) Lost() <-chan LeaseLost { return l.lost }

// Run renews until ctx ends (the run is over: the caller then releases the
// lease) or the lease is lost. It returns nil in both cases; renewal errors
// are handled here (logged, and decided by the local deadline).
func (l *Lease) Run(ctx context.Context) error {
	margin := safetyMargin(l.ttl)
	deadline := l.acquired.Add(l.ttl - margin)
	expiry := time.NewTimer(time.Until(deadline))
	defer expiry.Stop()
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-expiry.C:
			l.report(fmt.Errorf("lease %q: no renewal succeeded for %v", l.job, l.ttl-margin), margin/2)
			return nil
		case <-tick.C:
			sent := time.Now()
			switch err := l.renew(ctx, deadline); {
			case err == nil:
				deadline = sent.Add(l.ttl - margin)
				expiry.Reset(time.Until(deadline))
			case errors.Is(err, redislock.ErrNotHeld):
				l.report(err, margin/2)
				return nil
			case ctx.Err() != nil:
				return nil
			default:
				l.log.Warn("lease renewal failed; retrying until the local deadline",
					zap.Time("deadline", deadline), zap.Error(err))
			}
		}
	}
}

// renew makes one compare-and-PEXPIRE call, bounded by TTL/3 and by the
// local deadline so that the deadline timer is never starved.
func (l *Lease) renew(ctx context.Context, deadline time.Time) error {
	d := min(l.ttl/3, time.Until(deadline))
	if d <= 0 {
		return context.DeadlineExceeded
	}
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return l.locker.Renew(rctx, l.job, l.owner, l.ttl)
}

func (l *Lease) report(err error, grace time.Duration) {
	l.log.Error("lease lost", zap.String("owner", l.owner), zap.Error(err))
	select {
	case l.lost <- LeaseLost{Err: err, Grace: grace}:
	default:
	}
}
