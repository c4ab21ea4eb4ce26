package notify

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Outcomes decides failing and recovered once in the cluster: the
// backend's RecordOutcome (redislock.Redis, memory.Memory).
type Outcomes = ledger.OutcomeRecorder

// Sizes of the notifier's bounded queues.
const (
	inboxSize   = 1024 // facts waiting for the notifier's loop
	queueSize   = 64   // events waiting for one receiver
	outcomeSize = 256  // finished runs waiting for RecordOutcome
)

// outcomeTimeout bounds one RecordOutcome call.
const outcomeTimeout = 3 * time.Second

// Options are a Notifier's inputs. Log, Outcomes and Registry are required.
type Options struct {
	Log      *zap.Logger
	Outcomes Outcomes
	Registry prometheus.Registerer
	// Webhooks are the top-level notify.webhooks; each job's own come
	// with its runs (config.Job.Notify).
	Webhooks []config.Webhook
	Client   *http.Client // nil = NewClient()
	Policy   Policy       // zero = DefaultPolicy
}

// Notifier turns what it is told of runs and audits into alerts and
// delivers them, each receiver through its own bounded queue and goroutine
// (one slow or down receiver delays no other, and nothing it does delays
// a run: RunStarted, RunFinished and Missed never block). Outcomes are
// recorded by a goroutine of their own (outcome.go), so a slow backend
// delays no running_long alert. An alert or fact that does not fit a full
// queue is dropped, logged and counted in cronlock_notify_failures_total;
// a run's finish is never lost for its running_long alert (lostRuns).
type Notifier struct {
	log      *zap.Logger
	recorder Outcomes
	global   []config.Webhook
	client   *http.Client
	policy   Policy
	inbox    chan fact
	outcomes chan actors.RunFinished // to recordOutcomes, in the order the runs finished
	recorded chan transition         // from recordOutcomes
	lost     lostRuns                // finishes the full inbox did not take
	sent     *prometheus.CounterVec
	failures *prometheus.CounterVec

	// Owned by Run.
	queues map[receiverKey]chan<- Event
	long   map[string]longRun // runs with a warn_after, by run id
	gone   map[string]bool    // lost finishes whose start may still be in the inbox (forgetLost)
}

// fact is what the notifier is told: runStarted, runFinished or missed.
type fact interface{ fact() }

type runStarted struct {
	info      actors.RunInfo
	warnAfter time.Duration
	hooks     []config.Webhook
	at        time.Time
}

type runFinished struct{ fin actors.RunFinished }

type missed struct {
	job    string
	hooks  []config.Webhook
	slots  []int64
	reason string
	node   string
}

func (runStarted) fact()  {}
func (runFinished) fact() {}
func (missed) fact()      {}

// longRun is a run that will be running long at due.
type longRun struct {
	started runStarted
	due     time.Time
}

// New returns a notifier; it does no I/O and starts nothing (Run does).
func New(o Options) *Notifier {
	if o.Client == nil {
		o.Client = NewClient()
	}
	if o.Policy == (Policy{}) {
		o.Policy = DefaultPolicy
	}
	n := &Notifier{log: o.Log, recorder: o.Outcomes, global: o.Webhooks, client: o.Client, policy: o.Policy,
		inbox: make(chan fact, inboxSize), outcomes: make(chan actors.RunFinished, outcomeSize), recorded: make(chan transition),
		queues: map[receiverKey]chan<- Event{}, long: map[string]longRun{}, gone: map[string]bool{},
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cronlock_notify_sent_total",
			Help: "Alerts delivered to a webhook, by event (one per receiver)."}, []string{"event"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cronlock_notify_failures_total",
			Help: "Alerts not delivered to a webhook (retries used up, refused, queue full, shutdown), by event."}, []string{"event"}),
	}
	for _, ev := range config.NotifyEvents {
		n.sent.WithLabelValues(ev)
		n.failures.WithLabelValues(ev)
	}
	o.Registry.MustRegister(n.sent, n.failures)
	return n
}

// RunStarted tells the notifier that a run of job began at at: a
// running_long alert goes out if it is still running warn_after later.
// It never blocks.
func (n *Notifier) RunStarted(info actors.RunInfo, job *config.Job, at time.Time) {
	if job.WarnAfter > 0 {
		n.tell(runStarted{info: info, warnAfter: job.WarnAfter, hooks: job.Notify.Webhooks, at: at}, "running_long")
	}
}

// RunFinished tells the notifier a run's final result. It never blocks.
// When the inbox is full the result is dropped (logged, counted as
// "outcome": a failing or recovered alert may be missing), but the run is
// still known to have finished: it gets no running_long alert.
func (n *Notifier) RunFinished(fin actors.RunFinished) {
	select {
	case n.inbox <- runFinished{fin}:
	default:
		n.lost.add(fin.RunID)
		n.failures.WithLabelValues("outcome").Inc()
		n.log.Warn("run finish dropped: the notifier's inbox is full; a failing or recovered alert may be missing",
			zap.String("job", fin.Job), zap.String("run_id", fin.RunID))
	}
}

// Missed tells the notifier that this node's audit recorded slots (Unix
// s) of job missed, for reason. It never blocks.
func (n *Notifier) Missed(job *config.Job, node string, slots []int64, reason string) {
	if len(slots) > 0 {
		n.tell(missed{job: job.Name, hooks: job.Notify.Webhooks, slots: slots, reason: reason, node: node}, config.EventMissed)
	}
}

// tell queues f for Run, or drops it (logged, counted) when the inbox is
// full.
func (n *Notifier) tell(f fact, event string) {
	select {
	case n.inbox <- f:
	default:
		n.failures.WithLabelValues(event).Inc()
		n.log.Warn("alert input dropped: the notifier's inbox is full", zap.String("event", event))
	}
}

// Run handles what the notifier is told until ctx ends, then stops every
// receiver's goroutine (an alert being retried is given up, logged and
// counted) and returns nil once they have all returned.
func (n *Notifier) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { n.recordOutcomes(ctx, n.outcomes, n.recorded) }) // returns when ctx ends
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n.forgetLost()
		n.resetTimer(timer)
		select {
		case <-ctx.Done():
			for _, q := range n.queues {
				close(q)
			}
			return nil
		case f := <-n.inbox:
			n.handle(ctx, &wg, f)
		case tr := <-n.recorded:
			n.transitioned(ctx, &wg, tr)
		case now := <-timer.C:
			n.runningLong(ctx, &wg, now)
		}
	}
}

// forgetLost forgets the running_long timers of the runs whose finish the
// full inbox did not take. Such a finish can overtake its own start, still
// in the inbox: its run id stays in gone, where handle finds it, until the
// loop sees the inbox empty (then every start told before the finish has
// been handled), so gone does not grow.
func (n *Notifier) forgetLost() {
	if len(n.inbox) == 0 {
		clear(n.gone)
	}
	for _, id := range n.lost.take() {
		if _, ok := n.long[id]; ok {
			delete(n.long, id)
		} else {
			n.gone[id] = true
		}
	}
}

// resetTimer sets timer to the earliest running_long due (an hour when
// none: it is reset at every message anyway).
func (n *Notifier) resetTimer(timer *time.Timer) {
	next := time.Now().Add(time.Hour)
	for _, l := range n.long {
		if l.due.Before(next) {
			next = l.due
		}
	}
	timer.Reset(time.Until(next))
}

// handle acts on one fact.
func (n *Notifier) handle(ctx context.Context, wg *sync.WaitGroup, f fact) {
	switch f := f.(type) {
	case runStarted:
		if n.gone[f.info.RunID] {
			delete(n.gone, f.info.RunID) // it finished already
			return
		}
		n.long[f.info.RunID] = longRun{started: f, due: f.at.Add(f.warnAfter)}
	case runFinished:
		delete(n.long, f.fin.RunID)
		n.finished(f.fin)
	case missed:
		list := f.slots[:min(len(f.slots), maxMissedListed)]
		reason := fmt.Sprintf("%d occurrence(s) due and not run: %s", len(f.slots), f.reason)
		n.dispatch(ctx, wg, f.hooks, Event{Kind: config.EventMissed, Job: f.job, Slot: time.Unix(f.slots[0], 0),
			Node: f.node, Reason: reason, Missed: list, Count: len(f.slots), At: time.Now()})
	}
}

// finished queues a scheduled run's outcome for recordOutcomes, or drops
// it (logged, counted as "outcome") when that queue is full. Manual runs
// (no slot), results that are not the job's own (lock_lost, replaced) and
// the runs of jobs without a receiver of failing or recovered are not
// recorded.
func (n *Notifier) finished(fin actors.RunFinished) {
	switch fin.Result {
	case ledger.ResultSuccess, ledger.ResultFailure, ledger.ResultTimeout, ledger.ResultError:
	default:
		return
	}
	if fin.Slot.IsZero() || n.recorder == nil || !n.wanted(fin.Cfg.Notify.Webhooks, config.EventFailing, config.EventRecovered) {
		return // no receiver: no round trip
	}
	fin.Tail = nil // not needed: the queue holds no output
	select {
	case n.outcomes <- fin:
	default:
		n.failures.WithLabelValues("outcome").Inc()
		n.log.Warn("run outcome not recorded for alerts: the outcome queue is full (the backend is slow); a failing or recovered alert may be missing",
			zap.String("job", fin.Job), zap.Int64("slot", fin.Slot.Unix()), zap.String("run_id", fin.RunID), zap.Int("queue", outcomeSize))
	}
}

// transitioned sends the failing or recovered alert of a recorded outcome.
func (n *Notifier) transitioned(ctx context.Context, wg *sync.WaitGroup, tr transition) {
	fin := tr.fin
	reason := fmt.Sprintf("run failed: result %s, exit code %d after %d attempt(s)", fin.Result, fin.ExitCode, fin.Attempts)
	if fin.Result == ledger.ResultSuccess {
		reason = "run succeeded after a failure"
	}
	n.dispatch(ctx, wg, fin.Cfg.Notify.Webhooks, Event{Kind: tr.kind, Job: fin.Job, Slot: fin.Slot, Node: fin.Node,
		RunID: fin.RunID, Result: fin.Result, ExitCode: fin.ExitCode, Reason: reason, At: time.Now()})
}

// runningLong sends running_long for the runs whose warn_after has passed
// at now, once each.
func (n *Notifier) runningLong(ctx context.Context, wg *sync.WaitGroup, now time.Time) {
	n.forgetLost() // a finish lost since the loop last looked
	for id, l := range n.long {
		if l.due.After(now) {
			continue
		}
		delete(n.long, id)
		s := l.started
		n.dispatch(ctx, wg, s.hooks, Event{Kind: config.EventRunningLong, Job: s.info.Job, Slot: s.info.Slot,
			Node: s.info.Node, RunID: s.info.RunID, At: now,
			Reason: fmt.Sprintf("still running %s after it started (warn_after %s)", now.Sub(s.at).Round(time.Second), s.warnAfter)})
	}
}

// dispatch queues e for every receiver (top-level webhooks, then the
// job's own) that wants it, starting a receiver's goroutine at its first
// event. A full queue drops e for that receiver (logged, counted).
func (n *Notifier) dispatch(ctx context.Context, wg *sync.WaitGroup, own []config.Webhook, e Event) {
	for _, w := range append(append([]config.Webhook(nil), n.global...), own...) {
		if !(Receiver{Events: w.Events}).Wants(e.Kind) {
			continue
		}
		q := n.queue(ctx, wg, w)
		select {
		case q <- e:
		default:
			n.failures.WithLabelValues(e.Kind).Inc()
			n.log.Warn("alert dropped: the receiver's queue is full (it is slow or down)", zap.String("url", receiverName(w)),
				zap.String("event", e.Kind), zap.String("job", e.Job), zap.Int("queue", queueSize))
		}
	}
}

// wanted reports whether a receiver (top-level, or of own) wants one of
// kinds.
func (n *Notifier) wanted(own []config.Webhook, kinds ...string) bool {
	for _, w := range append(append([]config.Webhook(nil), n.global...), own...) {
		for _, k := range kinds {
			if (Receiver{Events: w.Events}).Wants(k) {
				return true
			}
		}
	}
	return false
}

// receiverName is Receiver.Name of w.
func receiverName(w config.Webhook) string { return Receiver{URL: w.URL, Format: w.Format}.Name() }

// receiverKey names one receiver: webhooks that differ only in their
// events share it (and its queue).
type receiverKey struct{ url, secretFile, format string }

// queue returns w's queue, starting its goroutine (owned by Run: wg)
// when it has none yet.
func (n *Notifier) queue(ctx context.Context, wg *sync.WaitGroup, w config.Webhook) chan<- Event {
	key := receiverKey{w.URL, w.SecretFile, w.Format}
	if q, ok := n.queues[key]; ok {
		return q
	}
	q := make(chan Event, queueSize)
	n.queues[key] = q
	wg.Go(func() { n.deliverAll(ctx, w, q) })
	return q
}

// deliverAll delivers the events of q to w, one at a time, until q is
// closed; after ctx ends, each remaining one is given up (logged once,
// counted). The secret file is read once, at the receiver's first event:
// when it cannot be read, nothing is sent unsigned.
func (n *Notifier) deliverAll(ctx context.Context, w config.Webhook, q <-chan Event) {
	r, err := NewReceiver(w)
	log := n.log.With(zap.String("url", r.Name()))
	for e := range q {
		if err == nil && ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		if err != nil {
			n.failures.WithLabelValues(e.Kind).Inc()
			log.Warn("alert not sent", zap.String("event", e.Kind), zap.String("job", e.Job), zap.Error(err))
			continue
		}
		attempts, derr := r.Deliver(ctx, n.client, e, n.policy)
		if derr != nil {
			n.failures.WithLabelValues(e.Kind).Inc()
			log.Warn("alert not delivered", zap.String("event", e.Kind), zap.String("job", e.Job),
				zap.Int64("slot", unixOrZero(e.Slot)), zap.Int("attempts", attempts), zap.Error(derr))
			continue
		}
		n.sent.WithLabelValues(e.Kind).Inc()
		log.Debug("alert delivered", zap.String("event", e.Kind), zap.String("job", e.Job), zap.Int("attempts", attempts))
	}
}
