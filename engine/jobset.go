package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
)

// jobSet is the actor that owns the job actors: it starts one per job,
// applies reloads (add, remove, change without disturbing running runs),
// keeps the ticker's entries in step, and forwards catch-up requests.
type jobSet struct {
	log    *zap.Logger
	deps   actors.JobDeps
	shared *actors.SharedDeps // deps with defaults, shared by every job actor
	ticker *actors.Ticker
	audit  *actors.Auditor // the missed-occurrence audit; nil = none (tests)
	inbox  chan jobSetMsg

	jobs  map[string]*jobHandle
	done  chan jobExit
	live  int          // job actor goroutines not yet reported on done
	count atomic.Int64 // configured jobs, readable from any goroutine

	applied bool // a first Apply happened: later ones are reloads and logged
	// auditNext is the earliest Auditor.Due of the jobs as the last
	// complete audit pass left them (zero: unknown, look at every job).
	auditNext time.Time
}

type jobHandle struct {
	// cfg is the job as last applied: an element of the applied slice
	// (not a copy per job), or a copy made at a reload.
	cfg    *config.Job
	actor  *actors.Job
	cancel context.CancelFunc
	exited bool
}

type jobExit struct {
	name  string
	actor *actors.Job
	err   error
}

type jobSetMsg interface{ jobSetMsg() }

type applyJobs struct {
	jobs  []config.Job
	reply chan struct{}
}
type catchupAll struct{}
type lookupJob struct {
	name  string
	reply chan *actors.Job // 1-buffered; nil when the job is not in the set
}

func (applyJobs) jobSetMsg()  {}
func (catchupAll) jobSetMsg() {}
func (lookupJob) jobSetMsg()  {}

// errNoJob is returned by RunNow for a job not in the set.
var errNoJob = errors.New("engine: job not configured on this node")

// RunNow hands m to the actor of job name. It blocks until the actor took
// it or ctx ends, and returns errNoJob when the job is not configured (a
// reload removed it). m.Reply then receives the run's outcome.
func (s *jobSet) RunNow(ctx context.Context, name string, m actors.RunNow) error {
	l := lookupJob{name: name, reply: make(chan *actors.Job, 1)}
	select {
	case s.inbox <- l:
	case <-ctx.Done():
		return ctx.Err()
	}
	var a *actors.Job
	select {
	case a = <-l.reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	if a == nil {
		return errNoJob
	}
	return a.Send(ctx, m)
}

func newJobSet(log *zap.Logger, deps actors.JobDeps, ticker *actors.Ticker, audit *actors.Auditor) *jobSet {
	return &jobSet{log: log, deps: deps, shared: actors.ShareDeps(deps), ticker: ticker, audit: audit, inbox: make(chan jobSetMsg),
		jobs: map[string]*jobHandle{}, done: make(chan jobExit)}
}

// Apply makes the running job actors match jobs. It blocks until applied
// or ctx ends.
func (s *jobSet) Apply(ctx context.Context, jobs []config.Job) error {
	m := applyJobs{jobs: jobs, reply: make(chan struct{}, 1)}
	select {
	case s.inbox <- m:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-m.reply:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Catchup asks every job actor to run its latest missed slot within its
// catch-up window. Non-blocking beyond ctx.
func (s *jobSet) Catchup(ctx context.Context) {
	select {
	case s.inbox <- catchupAll{}:
	case <-ctx.Done():
	}
}

// Run owns the job actors until ctx ends; then it cancels them all, waits
// until each has returned (their runs finished or were killed) and returns
// nil. A job actor returning on its own is an error that stops the daemon.
func (s *jobSet) Run(ctx context.Context) error {
	defer s.stopAll()
	audits := time.NewTicker(auditEvery)
	defer audits.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-audits.C:
			s.auditAll(ctx)
		case m := <-s.inbox:
			s.handle(ctx, m)
		case e := <-s.done:
			s.live--
			h, ok := s.jobs[e.name]
			switch {
			case !ok: // removed by a reload and now finished: drop its series
				s.deps.Metrics.DropJob(e.name)
			case h.actor == e.actor && !h.exited:
				h.exited = true
				return fmt.Errorf("job actor %q stopped unexpectedly: %v", e.name, e.err)
			}
		}
	}
}

func (s *jobSet) handle(ctx context.Context, m jobSetMsg) {
	switch m := m.(type) {
	case applyJobs:
		s.apply(ctx, m.jobs)
		m.reply <- struct{}{}
	case lookupJob:
		if h, ok := s.jobs[m.name]; ok && !h.exited {
			m.reply <- h.actor
		} else {
			m.reply <- nil
		}
	case catchupAll:
		for _, h := range s.jobs {
			if h.cfg.CatchupWindow <= 0 || !h.cfg.Enabled {
				continue // nothing to run (actors.Job.onCatchup): the actor stays idle
			}
			if err := h.actor.Send(ctx, actors.Catchup{}); err != nil {
				return
			}
		}
	}
}

// auditEvery is how often the job set looks for jobs whose next slot
// became certain (docs/protocol.md, R8); a job is audited only then.
const auditEvery = time.Second

// auditPass bounds one pass over the jobs, and so each audit call in it:
// the job set's goroutine also applies reloads and answers run requests,
// which a slow Redis must not hold up for long. Jobs not reached in a pass
// are reached in a later one (map order varies from pass to pass), their
// audit then covering every slot since.
const auditPass = auditEvery / 2

// auditAll audits the jobs whose next slot became certain, for at most
// auditPass. A failed audit is logged at debug and retried at a later
// pass: audited_to has not moved, so no slot is passed over. A pass
// before the earliest due time of every job does nothing, and a job not
// due costs a map lookup (make bench's idle10k: a pass that set up a
// timed context for each of 10,000 jobs every second cost 1.6% of a core).
func (s *jobSet) auditAll(ctx context.Context) {
	if s.audit == nil {
		return
	}
	now := s.audit.Now() // the clock the auditor's due times are in
	if now.Before(s.auditNext) {
		return
	}
	end := time.Now().Add(auditPass)
	actx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	next := endOfTime
	for name, h := range s.jobs {
		if due := s.audit.Due(h.cfg); now.Before(due) {
			next = earlier(next, due)
			continue
		}
		if actx.Err() != nil {
			s.auditNext = time.Time{} // jobs not reached: the next pass looks at every job
			return
		}
		_, err := s.audit.Audit(actx, h.cfg, h.actor)
		if err != nil {
			s.log.Debug("audit of missed occurrences failed; retried", zap.String("job", name), zap.Error(err))
		}
		next = earlier(next, s.audit.Due(h.cfg))
	}
	s.auditNext = next
}

// endOfTime is later than any slot.
var endOfTime = time.Unix(1<<62, 0)

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (s *jobSet) apply(ctx context.Context, jobs []config.Job) {
	want := make(map[string]struct{}, len(jobs))
	var removed []*jobHandle
	for _, j := range jobs {
		want[j.Name] = struct{}{}
	}
	for name, h := range s.jobs {
		if _, ok := want[name]; !ok {
			removed = append(removed, h)
			delete(s.jobs, name)
		}
	}
	entries := make([]actors.TickerEntry, 0, len(jobs))
	var added []string
	for i := range jobs {
		j := jobs[i] // a copy: the caller's slice is not modified
		h, ok := s.jobs[j.Name]
		switch {
		case !ok:
			h = s.startJob(ctx, &jobs[i])
			added = append(added, j.Name)
		case h.cfg.Schedule == j.Schedule && h.cfg.Location.String() == j.Location.String() &&
			h.cfg.ActiveFrom == j.ActiveFrom && h.cfg.ActiveUntil == j.ActiveUntil:
			j.Sched = h.cfg.Sched // same schedule and active window: keep the pending slot
			fallthrough
		default:
			if err := h.actor.Send(ctx, actors.Reconfigure{Job: j}); err != nil {
				return
			}
			h.cfg = &j
		}
		entries = append(entries, actors.TickerEntry{Job: j.Name, Sched: h.cfg.Sched, Jitter: j.Jitter,
			Deliver: h.actor.TryFire})
	}
	if err := s.ticker.SetEntries(ctx, entries); err != nil {
		return
	}
	s.count.Store(int64(len(jobs)))
	s.auditNext = time.Time{} // added or changed jobs: the next pass looks at every job
	names := make([]string, 0, len(removed))
	for _, h := range removed {
		h.exited = true
		h.cancel() // finishes its running runs, then returns
		names = append(names, h.cfg.Name)
		if s.audit != nil {
			s.audit.Forget(h.cfg.Name)
		}
	}
	if s.applied {
		s.log.Info("jobs applied", zap.Strings("added", added), zap.Strings("removed", names),
			zap.Int("kept", len(jobs)-len(added)))
	}
	s.applied = true
}

func (s *jobSet) startJob(ctx context.Context, j *config.Job) *jobHandle {
	s.deps.Metrics.InitJob(j.Name)
	a := actors.NewJobOf(j, s.shared)
	jctx, cancel := context.WithCancel(ctx)
	// The actor is lazy (actors.Job.Start): cancelling wakes it so that
	// an idle one sees the end.
	h := &jobHandle{cfg: j, actor: a, cancel: func() { cancel(); a.Wake() }}
	s.jobs[j.Name] = h
	s.live++
	a.Start(jctx, func() { s.done <- jobExit{name: j.Name, actor: a} })
	return h
}

// stopAll stops the ticker's fires, cancels every job actor (removed ones
// were already cancelled) and waits until all have returned. The ticker
// itself runs on until the daemon exits (it answers the watchdog's and
// /healthz's probes); without entries it fires at no stopping actor. It
// is bounded (1s) in case the ticker loop is stuck.
func (s *jobSet) stopAll() {
	tctx, cancel := context.WithTimeout(context.Background(), time.Second)
	if err := s.ticker.SetEntries(tctx, nil); err != nil {
		s.log.Warn("ticker loop not answering at shutdown: its entries were not cleared", zap.Error(err))
	}
	cancel()
	for _, h := range s.jobs {
		h.cancel()
	}
	for ; s.live > 0; s.live-- {
		<-s.done
	}
}
