package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Lister reads the node heartbeat records; implemented by
// *redislock.Redis (the node list: the node index P nodes:index, then
// the indexed nodes' records, in two round trips per call).
type Lister interface {
	Nodes(ctx context.Context) ([][]byte, error)
}

// listTimeout bounds one listing of the node records.
const listTimeout = 2 * time.Second

// WatcherOptions configure NewWatcher. Log and Self are required.
type WatcherOptions struct {
	Log *zap.Logger
	// Lister reads the other nodes' records; nil (memory backend: one
	// node) judges by Self alone.
	Lister Lister
	// Self is this node, always live while the watcher runs.
	Self Node
	// Registry receives cronlock_job_unrunnable; nil = not registered.
	Registry prometheus.Registerer
	// Every is the check interval, this node's heartbeat interval
	// (default cluster.DefaultHeartbeatEvery).
	Every time.Duration
}

// Watcher is the actor that reports jobs no live node may run. Create it
// with NewWatcher, call Run once, and send it the job list with SetJobs
// (at start and at every reload).
type Watcher struct {
	log    *zap.Logger
	lister Lister
	self   Node
	every  time.Duration
	gauge  *unrunnableGauge
	inbox  chan []config.Job

	// Written by the Run goroutine only, under gauge.mu (a scrape reads
	// them); the Run goroutine reads them without it.
	jobs []config.Job
	// someTargeted is targeted() of jobs, computed when they are set (the
	// node's own tags do not change): a check of 10,000 untargeted jobs
	// no longer walks them every tick.
	someTargeted bool
	unrunnable   map[string]bool // jobs reported unrunnable
	started      time.Time       // the first SetJobs: nothing is judged before a beat has passed
	lastErr      string          // the last listing error, "" after a success
}

// NewWatcher returns the actor; it does no I/O.
func NewWatcher(o WatcherOptions) *Watcher {
	if o.Every <= 0 {
		o.Every = DefaultHeartbeatEvery
	}
	w := &Watcher{log: o.Log, lister: o.Lister, self: o.Self, every: o.Every, inbox: make(chan []config.Job),
		unrunnable: map[string]bool{}}
	w.gauge = &unrunnableGauge{w: w, desc: prometheus.NewDesc("cronlock_job_unrunnable",
		"1 while no live node's node.tags match the job's nodes: (its slots are not run), else 0.", []string{"job"}, nil)}
	if o.Registry != nil {
		o.Registry.MustRegister(w.gauge)
	}
	return w
}

// SetJobs replaces the jobs the watcher judges (all of the config's jobs,
// also those this node does not run). Blocks until the watcher took them
// or ctx ends (then it returns ctx's error).
func (w *Watcher) SetJobs(ctx context.Context, jobs []config.Job) error {
	select {
	case w.inbox <- jobs:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run checks every Every until ctx ends, then returns nil. The first
// judgement comes one interval after the first SetJobs, so that nodes
// started together have written their records. A failed listing is logged
// at debug (the health monitor reports Redis outages) and keeps the last
// judgement.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case jobs := <-w.inbox:
			w.setJobs(jobs)
		case <-t.C:
			w.check(ctx)
		}
	}
}

// setJobs takes a new job list: series of removed jobs are dropped, new
// ones start at 0.
func (w *Watcher) setJobs(jobs []config.Job) {
	if w.started.IsZero() {
		w.started = time.Now()
	}
	keep := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		keep[j.Name] = true
	}
	w.gauge.mu.Lock()
	defer w.gauge.mu.Unlock()
	for name := range w.unrunnable {
		if !keep[name] {
			delete(w.unrunnable, name)
		}
	}
	w.jobs = jobs
	w.someTargeted = w.targeted()
}

// unrunnableGauge exports cronlock_job_unrunnable{job} from the watcher's
// job list and unrunnable set at each scrape: one series per job, with no
// stored child per job (10,000 jobs would keep 4 MB of gauge children).
type unrunnableGauge struct {
	w    *Watcher
	desc *prometheus.Desc
	mu   sync.Mutex // guards w.jobs and w.unrunnable against Collect
}

func (g *unrunnableGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *unrunnableGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, j := range g.w.jobs {
		v := 0.0
		if g.w.unrunnable[j.Name] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, j.Name)
	}
}

// check lists the live nodes (only when some job has a nodes: this node
// does not match) and judges every job; when none has, and no job was
// unrunnable, there is nothing to judge (10,000 untargeted jobs cost one
// pass of Matches every interval).
func (w *Watcher) check(ctx context.Context) {
	if w.started.IsZero() || time.Since(w.started) < w.every/2 {
		return
	}
	targeted := w.someTargeted
	if !targeted && len(w.unrunnable) == 0 {
		return // this node (live) matches every job, and none was unrunnable: nothing to judge
	}
	nodes := []Node{w.self}
	if w.lister != nil && targeted {
		lctx, cancel := context.WithTimeout(ctx, listTimeout)
		values, err := w.lister.Nodes(lctx)
		cancel()
		if err != nil {
			w.listFailed(err)
			return
		}
		if w.lastErr != "" {
			w.lastErr = ""
			w.log.Info("node records read again")
		}
		nodes = append(nodes, LiveNodes(values, time.Now())...)
	}
	for _, j := range w.jobs {
		w.judge(j, nodes)
	}
}

// listFailed logs a failed listing: a warning when the error is new (a
// refused read, e.g. NOPERM, would otherwise hide unrunnable jobs), debug
// while it repeats (an outage is the health monitor's to report).
func (w *Watcher) listFailed(err error) {
	if err.Error() == w.lastErr {
		w.log.Debug("node records not read; keeping the last judgement of unrunnable jobs", zap.Error(err))
		return
	}
	w.lastErr = err.Error()
	w.log.Warn("node records not read, so jobs no live node may run cannot be told; keeping the last judgement",
		zap.Error(err))
}

// targeted reports whether some job has a nodes: that this node does not
// match: only then can a job be unrunnable (this node is live), and only
// then are the records read.
func (w *Watcher) targeted() bool {
	for _, j := range w.jobs {
		if !Matches(j.Nodes, w.self.Tags) {
			return true
		}
	}
	return false
}

// judge sets job j's gauge and logs a change of its runnability.
func (w *Watcher) judge(j config.Job, nodes []Node) {
	runners := Runners(j.Nodes, nodes)
	switch {
	case len(runners) == 0 && !w.unrunnable[j.Name]:
		w.gauge.mu.Lock()
		w.unrunnable[j.Name] = true
		w.gauge.mu.Unlock()
		w.log.Error("job unrunnable: no live node's node.tags match its nodes:, so its slots are not run; "+
			"start a node with these tags or change the job's nodes:", zap.String("job", j.Name),
			zap.Strings("nodes", j.Nodes), zap.Int("live_nodes", len(nodes)))
	case len(runners) > 0 && w.unrunnable[j.Name]:
		w.gauge.mu.Lock()
		delete(w.unrunnable, j.Name)
		w.gauge.mu.Unlock()
		w.log.Info("job runnable again: a live node matches its nodes:", zap.String("job", j.Name),
			zap.Strings("nodes", j.Nodes), zap.Strings("runners", runners))
	}
}
