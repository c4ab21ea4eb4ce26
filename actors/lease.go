package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"go.uber.org/zap"
)

// ReleaseTimeout bounds the release (with the history record) after a
// run (engine.shutdownSlack counts it). It runs on a context detached from the (possibly cancelled) run
// context: releasing a lease must not use a dead context.
const ReleaseTimeout = 2 * time.Second

// safetyMargin is how long before the server-side expiry a lease whose
// renewals have failed is declared lost: TTL/5, at least 500 ms, at most
// TTL/2. The run is killed within half of it, so its processes are dead
// before another node can acquire the lease (docs/protocol.md, "The lease").
func safetyMargin(ttl time.Duration) time.Duration {
	return min(max(ttl/5, 500*time.Millisecond), ttl/2)
}

// Lease is the one owner of a claimed run's lease, like etcd's
// concurrency.Session: Acquire returns it renewing, Lost reports its loss,
// End releases it. A Lease of a claim that took no lease (overlap: allow)
// only records history on End.
//
// Renewal is compare-and-PEXPIRE every TTL/3 on a goroutine the Lease owns,
// started when the first renewal (or the local deadline) is due.
// The local deadline is the send time of the last successful renewal (or
// of the claim) plus TTL minus the safety margin, measured on the monotonic
// clock, so wall-clock steps cannot stretch it.
type Lease struct {
	log      *zap.Logger
	locker   ledger.Locker
	job      string
	owner    string // "" when no lease is held
	ttl      time.Duration
	acquired time.Time // send time of the successful claim
	lost     chan LeaseLost
	stop     context.CancelFunc
	done     chan struct{}
	// replace (overlap replace): a renewal that finds a pending slot
	// reports it once on replaced, and renewals come at least every
	// replaceRenewEvery so that the run learns it soon.
	replace  bool
	replaced chan int64
	maxRuns  int64         // the job's max_runs, sent with the finish (0 = none)
	maxSkew  time.Duration // node.max_clock_skew (every)
	// liveFor is how long after acquired the lease is live: the local
	// deadline of its last successful renewal (or of the claim), less
	// acquired, in nanoseconds; written by keepAlive, read by Live.
	liveFor atomic.Int64
}

// Live reports whether the lease is live now, on the monotonic clock:
// before the local deadline of its last successful renewal (or of the
// claim), which lies the safety margin before the server-side expiry. A
// Lease that holds no lease (overlap: allow) is always live. Safe from any
// goroutine.
func (l *Lease) Live() bool {
	return l.owner == "" || time.Since(l.acquired) < time.Duration(l.liveFor.Load())
}

// halt stops the renewals and waits for them to end; the lease itself is
// left as it is (the caller releases it).
func (l *Lease) halt() {
	l.stop()
	<-l.done
}

// leaseOpts are a job's settings that a Lease applies: replace (overlap
// replace: report pending slots on Replaced, renew at least every
// replaceRenewEvery) and maxRuns (max_runs, sent with the finish).
type leaseOpts struct {
	replace bool
	maxRuns int64
	maxSkew time.Duration // node.max_clock_skew: bounds the renewal interval (every)
}

// replaceRenewEvery bounds the renewal interval of an overlap: replace
// lease: the holder learns of a slot waiting to replace its run within it
// (docs/protocol.md, "Queue and replace").
const replaceRenewEvery = 500 * time.Millisecond

// Acquire sends req (one round trip, bounded by ctx) and, when the claim
// succeeds, returns a Lease that already renews itself; otherwise the
// Lease is nil and Claim says why. The renewals run until End, whatever
// happens to ctx (a run outlives the start of a shutdown). log should carry
// the job's name.
func Acquire(ctx context.Context, log *zap.Logger, locker ledger.Locker, req ledger.ClaimRequest) (ledger.Claim, *Lease, error) {
	return acquire(ctx, fixedLog{log}, locker, req, leaseOpts{})
}

// logSource gives the logger of a lease, asked for only when a claim is
// won: a run builds its logger at its first use (run.logger), and most
// claims of a cluster find their slot claimed elsewhere and log nothing.
type logSource interface{ logger() *zap.Logger }

// fixedLog is a logSource of a logger built already.
type fixedLog struct{ l *zap.Logger }

func (f fixedLog) logger() *zap.Logger { return f.l }

// acquire is Acquire with the job's lease options; log is asked for the
// lease's logger once the claim is won.
func acquire(ctx context.Context, log logSource, locker ledger.Locker, req ledger.ClaimRequest, o leaseOpts) (ledger.Claim, *Lease, error) {
	sent := time.Now()
	c, err := locker.Claim(ctx, req)
	if err != nil || c.Outcome != ledger.Claimed {
		return c, nil, err
	}
	if !req.Lease {
		l := newLease(log.logger(), locker, req.Job, "", req.TTL, sent, o)
		close(l.done)
		return c, l, nil
	}
	return c, adoptLease(ctx, log.logger(), locker, req.Job, req.Owner(), req.TTL, sent, o), nil
}

func newLease(log *zap.Logger, locker ledger.Locker, job, owner string, ttl time.Duration, sent time.Time, o leaseOpts) *Lease {
	l := &Lease{log: log, locker: locker, job: job, owner: owner, ttl: ttl, acquired: sent,
		lost: make(chan LeaseLost, 1), stop: func() {}, done: make(chan struct{}),
		replace: o.replace, replaced: make(chan int64, 1), maxRuns: o.maxRuns, maxSkew: o.maxSkew}
	l.liveFor.Store(int64(l.localDeadline(sent).Sub(sent)))
	return l
}

// adoptLease returns a renewing Lease for a lease that owner holds since
// the call sent at sent (a claim, or a Finish that handed the lease on).
// The renewals run until End, whatever happens to ctx.
func adoptLease(ctx context.Context, log *zap.Logger, locker ledger.Locker, job, owner string, ttl time.Duration, sent time.Time, o leaseOpts) *Lease {
	l := newLease(log, locker, job, owner, ttl, sent, o)
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	// The renewal loop's goroutine starts when its first event is due (the
	// first renewal, or the local deadline when that comes first), so that
	// a run shorter than that (most runs: the first renewal is TTL/3 away)
	// never starts one.
	every, untilDeadline := l.every(), time.Until(l.localDeadline(sent))
	renewFirst := every <= untilDeadline
	first := time.AfterFunc(min(every, untilDeadline), func() {
		defer close(l.done)
		l.keepAlive(kctx, renewFirst)
	})
	l.stop = func() {
		stop()
		if first.Stop() { // the loop never started: nothing else closes done
			close(l.done)
		}
	}
	return l
}

// every is the renewal interval: TTL/3, at most half of max_clock_skew
// (E) when that is set, and for overlap replace at most
// replaceRenewEvery. E/2 is what R3 and R5 need of it together: a lease
// Redis lost with its state is taken again at the holder's next renewal
// (renewScript), within E/2 of the loss, while the slots up to E after
// the loss is detected are refused (R5), so no claim after them finds the
// lease of a run still going free.
func (l *Lease) every() time.Duration {
	d := l.ttl / 3
	if l.maxSkew > 0 {
		d = min(d, l.maxSkew/2)
	}
	if l.replace {
		d = min(d, replaceRenewEvery)
	}
	return d
}

// localDeadline is when a lease last renewed (or claimed) by a call sent
// at sent is declared lost: sent + TTL − the safety margin.
func (l *Lease) localDeadline(sent time.Time) time.Time {
	return sent.Add(l.ttl - safetyMargin(l.ttl))
}

// Lost delivers at most one LeaseLost, then nothing. It is never closed.
func (l *Lease) Lost() <-chan LeaseLost { return l.lost }

// End stops the renewals (waiting for them), then releases the lease with
// compare-and-DEL and appends rec to the job's history, in one round trip
// on a fresh context bounded by ReleaseTimeout. next, when not "", is the
// lease value that takes the job's pending slot (overlap queue, replace):
// the answer then says which slot it was handed and its fence, and the
// returned *Lease (non-nil only then, logging to nextLog) already renews
// it with this lease's ttl (endHanding: with the job's current settings). It returns the backend's error; the lease (and next's) may then
// still be held and should be handed to the janitor. Call it once.
func (l *Lease) End(ctx context.Context, rec ledger.RunRecord, next string, nextLog *zap.Logger) (ledger.Finished, *Lease, error) {
	return l.endHanding(ctx, rec, next, nextLog, l.ttl, leaseOpts{replace: l.replace, maxRuns: l.maxRuns, maxSkew: l.maxSkew})
}

// endHanding is End whose finish and handed lease take ttl and o (the
// job's configuration at the finish, which a reload may have changed
// since this lease was taken) instead of this lease's own settings.
func (l *Lease) endHanding(ctx context.Context, rec ledger.RunRecord, next string, nextLog *zap.Logger, ttl time.Duration, o leaseOpts) (ledger.Finished, *Lease, error) {
	l.stop()
	<-l.done
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	if l.owner == "" {
		next = ""
	}
	sent := time.Now()
	f, err := l.locker.Finish(rctx, ledger.FinishRequest{Job: l.job, Owner: l.owner, Record: rec, Next: next, TTL: ttl,
		MaxRuns: o.maxRuns})
	if err != nil || f.Token == 0 || f.NotReplicated { // not replicated: the caller releases next
		return f, nil, err
	}
	return f, adoptLease(ctx, nextLog, l.locker, l.job, next, ttl, sent, o), nil
}

// Replaced delivers, at most once, the pending slot (Unix seconds) that a
// renewal of an overlap: replace lease found: the run is to stop so that
// the slot can run. Never closed; nothing comes for other policies.
func (l *Lease) Replaced() <-chan int64 { return l.replaced }

// Owner is the lease value "nodeID:uuid", or "" when no lease is held.
func (l *Lease) Owner() string { return l.owner }

// keepAlive renews until ctx ends (End was called) or the lease is lost.
// adoptLease starts it when its first event is due: with renewFirst the
// first renewal, made at once, else the local deadline (the expiry timer,
// due at once).
func (l *Lease) keepAlive(ctx context.Context, renewFirst bool) {
	margin := safetyMargin(l.ttl)
	deadline := l.localDeadline(l.acquired)
	expiry := time.NewTimer(time.Until(deadline))
	defer expiry.Stop()
	renewNow := renewFirst
	tick := time.NewTicker(l.every())
	defer tick.Stop()
	asked := false // the replace request was reported
	for {
		if !renewNow {
			select {
			case <-ctx.Done():
				return
			case <-expiry.C:
				l.liveFor.Store(0)
				l.report(fmt.Errorf("lease %q: no renewal succeeded for %v", l.job, l.ttl-margin), margin/2)
				return
			case <-tick.C:
			}
		}
		if renewNow && ctx.Err() != nil {
			return // End came as the loop started
		}
		renewNow = false
		sent := time.Now()
		pending, err := l.renew(ctx, deadline)
		if errors.Is(err, ledger.ErrRetaken) {
			l.log.Warn("lease taken again: redis had lost it (a restart without persistence, eviction or a failover) "+
				"while this run went on; holding it again keeps the slots claimed since from starting beside this run "+
				"(docs/protocol.md, R3)", zap.String("owner", l.owner))
			err = nil
		}
		switch {
		case err == nil:
			deadline = l.localDeadline(sent)
			l.liveFor.Store(int64(deadline.Sub(l.acquired)))
			expiry.Reset(time.Until(deadline))
			if l.replace && pending > 0 && !asked {
				asked = true
				l.replaced <- pending // 1-buffered, sent once
			}
		case errors.Is(err, ledger.ErrNotHeld):
			l.liveFor.Store(0)
			l.report(err, margin/2)
			return
		case ctx.Err() != nil:
			return
		default:
			l.log.Warn("lease renewal failed; retrying until the local deadline",
				zap.Time("deadline", deadline), zap.Error(err))
		}
	}
}

// renew makes one compare-and-PEXPIRE call, bounded by TTL/3 and by the
// local deadline so that the deadline timer is never starved.
func (l *Lease) renew(ctx context.Context, deadline time.Time) (int64, error) {
	d := min(l.ttl/3, time.Until(deadline))
	if d <= 0 {
		return 0, context.DeadlineExceeded
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
