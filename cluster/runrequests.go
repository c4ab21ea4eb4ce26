package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/internal/subscription"
	"go.uber.org/zap"
)

// RunRequestStore is the Redis side; implemented by *redislock.Redis (one round trip
// per call).
type RunRequestStore interface {
	PendingRunJobs(ctx context.Context, since time.Time) ([]string, error)
	WatchRunRequests(ctx context.Context, subscribed, notified func()) error
	TakeRun(ctx context.Context, job, node string, at time.Time) (*ledger.RunRequest, error)
	SetRunStatus(ctx context.Context, job string, st ledger.RunStatus) error
	// Refused reports whether an error of WatchRunRequests is the server's
	// refusal (an ACL's NOPERM, say) rather than a lost connection.
	Refused(err error) bool
}

// SkipNotHeld is the refusal of a request whose job this node no longer
// has (a reload removed it between the poll and the hand-over). It is a
// request status, not a slot skip reason.
const SkipNotHeld = "not_held"

// DefaultTakerEvery is the default poll interval while no subscription to the
// announcements is in force; DefaultIdleEvery the poll interval while one
// is (a request whose announcement was lost, e.g. one written by a
// cronlock whose Redis user may not PUBLISH, waits at most that long).
// DefaultIdleEvery bounds how late a request whose announcement was lost
// is taken (docs/decisions/0002-run-request-announcements.md).
const (
	DefaultTakerEvery = 250 * time.Millisecond
	DefaultIdleEvery  = 5 * time.Second
)

// callTimeout bounds each Redis call; handTimeout the hand-over of a
// request to its job actor.
const (
	callTimeout = 2 * time.Second
	handTimeout = 2 * time.Second
	// maxPerPoll bounds the requests of one job taken in one poll.
	maxPerPoll = 64
)

// TakerOptions configure NewTaker. Log, Store, Node, Held and Start are required.
type TakerOptions struct {
	Log   *zap.Logger
	Store RunRequestStore
	Node  string // this node's id, written into the request's status
	// Held reports whether this node takes requests of job (configured and
	// enabled here). Called from the Run goroutine.
	Held func(job string) bool
	// Start hands a manual run (force, requester) to job's actor; it
	// blocks until the actor took it or ctx ends (then, or when the job
	// is gone, it returns an error). wait blocks until the run's outcome:
	// the actor answers every run it took.
	Start     func(ctx context.Context, job string, force bool, requester string) (wait func() RunOutcome, err error)
	Every     time.Duration // poll interval without a subscription; default DefaultEvery
	IdleEvery time.Duration // poll interval with a subscription; default DefaultIdleEvery
	Now       func() time.Time
}

// Taker is the actor that takes run requests. Create it with New, then
// call Run once.
type Taker struct {
	o  TakerOptions
	wg sync.WaitGroup // the watcher, and one per request taken and not yet reported
}

// NewTaker returns the actor; it does no I/O.
func NewTaker(o TakerOptions) *Taker {
	if o.Every <= 0 {
		o.Every = DefaultTakerEvery
	}
	if o.IdleEvery <= 0 {
		o.IdleEvery = DefaultIdleEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Log = o.Log.With(zap.String("node_id", o.Node))
	return &Taker{o: o}
}

// Run takes requests until ctx ends (the shutdown begins: no request is
// taken after that), then waits until every request it took has been
// reported (their runs end with the shutdown's drain) and returns nil. It
// reads the pending set when a request is announced (at most once per
// minGap), when the subscription to the announcements is (re)confirmed,
// and on a poll: every IdleEvery while subscribed, every Every while not
// (Redis refused it) and after a read that failed or left requests. A
// failed poll is logged at debug: the health monitor reports Redis
// outages.
func (t *Taker) Run(ctx context.Context) error {
	defer t.wg.Wait() // the requests taken, and the watcher
	var subscribed atomic.Bool
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default: // a read is already due
		}
	}
	t.wg.Go(func() { t.watch(ctx, &subscribed, poke) })
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
			// A storm of announcements: at most one read per minGap.
			if d := time.Until(last.Add(minGap)); d > 0 {
				timer.Reset(d)
				continue
			}
		case <-timer.C:
		}
		last = time.Now()
		again := t.poll(ctx)
		every := t.o.Every
		if subscribed.Load() && !again {
			every = t.o.IdleEvery
		}
		timer.Reset(every)
	}
}

// minGap is the least time between two reads of the pending set that
// announcements trigger.
const minGap = 100 * time.Millisecond

// watch keeps the subscription to the announcements until ctx ends: on
// each confirmation it marks subscribed and pokes (requests written
// while it was not are read at once), on each announcement it pokes.
// When the subscription fails it unmarks subscribed (polls go back to
// Every), says why once per failure streak (a warning when Redis refused
// it, debug for connection errors, which the health monitor reports),
// and subscribes again after a backoff.
func (t *Taker) watch(ctx context.Context, subscribed *atomic.Bool, poke func()) {
	subscription.Keep(ctx, func(confirmed func()) error {
		return t.o.Store.WatchRunRequests(ctx, func() {
			confirmed()
			subscribed.Store(true)
			poke()
		}, poke)
	}, t.o.Store.Refused, func(err error, wasConfirmed, first, refused bool) {
		subscribed.Store(false)
		if wasConfirmed {
			poke() // read now: requests written since the loss (polls go back to Every)
		}
		switch {
		case !first:
		case refused:
			t.o.Log.Warn("run request announcements refused: requests are polled every "+t.o.Every.String()+
				" instead; grant the Redis user the channel (&PREFIX* and +subscribe, +publish: README.md, \"Redis ACL\")",
				zap.Error(err))
		default:
			t.o.Log.Debug("run request announcements lost; polling every "+t.o.Every.String()+" until subscribed again", zap.Error(err))
		}
	})
	subscribed.Store(false)
}

// poll takes the pending requests of the held jobs. It reports whether
// the next read should come soon (every Every, even while subscribed):
// the read or a pop failed, or a job had more than maxPerPoll requests.
func (t *Taker) poll(ctx context.Context) (again bool) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	jobs, err := t.o.Store.PendingRunJobs(cctx, t.o.Now().Add(-ledger.PendingWindow))
	cancel()
	if err != nil {
		t.o.Log.Debug("run requests not polled", zap.Error(err))
		return true
	}
	for _, job := range jobs {
		if !t.o.Held(job) {
			continue
		}
		taken := 0
		for ; taken < maxPerPoll; taken++ {
			took, err := t.takeOne(ctx, job)
			if err != nil {
				again = true
			}
			if ctx.Err() != nil || !took {
				break
			}
		}
		if taken == maxPerPoll {
			again = true
		}
	}
	return again
}

// takeOne pops one request of job and starts handling it; false when
// there was none (or the pop failed: then err).
func (t *Taker) takeOne(ctx context.Context, job string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := t.o.Store.TakeRun(cctx, job, t.o.Node, t.o.Now())
	if err != nil {
		t.o.Log.Warn("run request not taken", zap.String("job", job), zap.Error(err))
		return false, err
	}
	if req == nil {
		return false, nil
	}
	t.o.Log.Info("run request taken", zap.String("job", job), zap.String("request", req.ID),
		zap.String("requester", req.Requester), zap.String("reason", req.Reason), zap.Bool("force", req.Force))
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.handle(ctx, *req)
	}()
	return true, nil
}

// handle hands req to its job actor, waits for the outcome and writes it
// as the request's status.
func (t *Taker) handle(ctx context.Context, req ledger.RunRequest) {
	hctx, cancel := context.WithTimeout(ctx, handTimeout)
	wait, err := t.o.Start(hctx, req.Job, req.Force, req.Requester)
	cancel()
	st := ledger.RunStatus{ID: req.ID, Node: t.o.Node}
	switch {
	case err != nil && ctx.Err() != nil:
		st.State, st.Skip, st.Error = ledger.RunRefused, ledger.SkipShuttingDown, err.Error()
	case err != nil:
		st.State, st.Skip, st.Error = ledger.RunRefused, SkipNotHeld, err.Error()
	default:
		st = status(req.ID, t.o.Node, wait())
	}
	st.At = t.o.Now().UTC()
	t.o.Log.Info("run request done", zap.String("job", req.Job), zap.String("request", req.ID), zap.String("state", st.State),
		zap.String("skip", st.Skip), zap.String("result", st.Result), zap.Int("exit_code", st.ExitCode))
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer wcancel()
	if err := t.o.Store.SetRunStatus(wctx, req.Job, st); err != nil {
		t.o.Log.Warn("run request's outcome not written; the requester waiting for it sees no end", zap.String("job", req.Job),
			zap.String("request", req.ID), zap.Error(err))
	}
}

// RunOutcome is how a taken request's run ended: refused with Skip (and
// Err), or run as RunID with Result and ExitCode.
type RunOutcome struct {
	Skip     string
	Err      error
	RunID    string
	Result   string
	ExitCode int
}

// status is the request status of a run's outcome.
func status(id, node string, ran RunOutcome) ledger.RunStatus {
	st := ledger.RunStatus{ID: id, Node: node}
	if ran.Skip != "" {
		st.State, st.Skip = ledger.RunRefused, ran.Skip
		if ran.Err != nil {
			st.Error = ran.Err.Error()
		}
		return st
	}
	st.State, st.RunID, st.Result, st.ExitCode = ledger.RunFinished, ran.RunID, ran.Result, ran.ExitCode
	return st
}
