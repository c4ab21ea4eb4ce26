// Package engine wires cronlock's actors from a config and supervises them
// (docs/architecture.md): signals (received on a channel from main),
// reload, ordered shutdown, systemd notify and watchdog, the health
// monitor (the pace of the backend's readiness checks), and the HTTP
// endpoints. It holds no run logic and no Redis logic of its own.
package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/ledger/memory"
	"github.com/cronlock/cronlock/process"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/notify"
	"github.com/cronlock/cronlock/statedir"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Options are the engine's inputs besides the config. Log and Reload are
// required.
type Options struct {
	Log     *zap.Logger
	Environ []string // the daemon's environment: passed to runs, read for WATCHDOG_USEC
	// Notify sends one sd_notify state ("READY=1", …); nil = not under systemd.
	Notify func(state string)
	// Signals delivers SIGTERM/SIGINT (shutdown) and SIGHUP (reload). It is
	// the engine's only source of signals: main subscribes once and passes
	// the channel in.
	Signals <-chan os.Signal
	// Reload loads the config file again for SIGHUP.
	Reload func() (*config.Config, error)
	// ExitNow is called on a second shutdown signal (os.Exit in main).
	ExitNow func()
	// Registry receives the metrics; nil = a fresh registry.
	Registry *prometheus.Registry
	// Now reads the wall clock for slots and skew checks; nil = time.Now.
	// Tests pass a skewed clock.
	Now func() time.Time
	// WrapRecords, a test seam, wraps the run records' store (nil = none):
	// e2e tests block its writes to show that a hung state directory delays
	// no timeout (docs/protocol.md, R3).
	WrapRecords func(actors.RunRecords) actors.RunRecords
	// Start starts the processes of runs and hooks; nil = process.Start.
	// Tests in testing/synctest bubbles pass a fake driven by the bubble's
	// clock.
	Start actors.Starter
	// State is the node's open state directory (node.state_dir); the
	// daemon always passes one. nil (tests of the engine alone) = nothing
	// is kept across restarts.
	State *statedir.Dir
	// Version goes into the node's heartbeat record (package cluster).
	Version string
}

// Engine is a configured daemon. Create it with New, then call Run once.
type Engine struct {
	opts    Options
	cfg     *config.Config
	log     *zap.Logger
	backend backend
	metrics *actors.Metrics
	reg     *prometheus.Registry
	ticker  *actors.Ticker
	hooks   *actors.HookRunner
	janitor *actors.Janitor
	alerts  *notify.Notifier   // webhook alerts (docs/alerts.md)
	node    *cluster.Heartbeat // nil for the memory backend
	load    *cluster.Load      // runs in progress, max_parallel, the claim order
	targets *cluster.Watcher   // reports jobs no live node may run
	taker   *cluster.Taker     // nil for the memory backend
	jobs    *jobSet
	health  *health
	ready   atomic.Bool   // READY=1 sent; STATUS= updates may follow
	kill    chan struct{} // closed after shutdown_timeout: terminate runs and hooks
	killNow chan struct{} // closed on a second signal: SIGKILL runs and hooks now
	failed  chan error    // 1-buffered: the first actor that stopped unexpectedly

	stopping atomic.Bool // the shutdown has begun: /readyz says not ready

	// jobsNow is the running job configuration for the HTTP API's
	// goroutines; reload stores the new one.
	jobsNow atomic.Pointer[[]config.Job]
	// apiToken is the HTTP API's bearer token (nil inside: none); reload
	// stores a rotated one.
	apiToken atomic.Pointer[[]byte]

	records *statedir.RunRecords // run records in the state directory; nil without one
	// seen keeps the ledger counts (seq, runs) this node saw across its
	// restarts (docs/protocol.md, R5, R6); nil without a state directory or
	// on the memory backend (whose ledger the state directory keeps whole).
	seen *statedir.SeenCounts
	// wrapRecords is Options.WrapRecords.
	wrapRecords func(actors.RunRecords) actors.RunRecords

	// mem is the memory backend's control state (pause records, events,
	// the node's own record) for the API and the control socket; nil on
	// the Redis backend.
	mem *memControl
	// out keeps and carries the runs' output (output.go).
	out ledger.OutputStore
	// apiH is the HTTP API, built once (apiHandler); hashCache the job
	// hashes of the running configuration (runningHashes).
	apiH      http.Handler
	webH      http.Handler // the dashboard (package web), built with apiH
	hashCache atomic.Pointer[jobHashCache]
	// instance identifies this process (a random UUID) in the memory
	// backend's node record; started is when New ran.
	instance string
	started  time.Time

	// Supervisor state, owned by the Run goroutine.
	shutdownCause string           // "" until the shutdown begins
	killAfter     <-chan time.Time // fires shutdown_timeout after it began
	giveUpAfter   <-chan time.Time // fires when the shutdown's bound has passed
	signals       int              // SIGTERM/SIGINT received
	actorErr      error            // the first actor failure
	hooksClosed   bool             // the hook runner's inbox is closed
	maxKillGrace  time.Duration    // the largest kill_grace of any job since the start
}

// New builds the actors for cfg. It does no I/O beyond creating the Redis
// client (which does not wait for Redis: an unreachable Redis is reported
// by the health monitor, never fatal).
func New(cfg *config.Config, opts Options) (*Engine, error) {
	if opts.Notify == nil {
		opts.Notify = func(string) {}
	}
	if opts.ExitNow == nil {
		opts.ExitNow = func() { os.Exit(1) }
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	e := &Engine{opts: opts, cfg: cfg, log: opts.Log, reg: opts.Registry, kill: make(chan struct{}),
		killNow: make(chan struct{}), failed: make(chan error, 1), instance: uuid.NewString(), started: time.Now().UTC()}
	e.noteKillGrace(cfg.Jobs)
	jobs := cfg.Jobs
	e.jobsNow.Store(&jobs)
	if e.reg == nil {
		e.reg = prometheus.NewRegistry()
	}
	b, err := newBackend(cfg, opts.Log, opts.Now)
	if err == nil {
		b, err = persistMemory(b, opts.State, opts.Log)
	}
	if err != nil {
		return nil, err
	}
	e.backend = b
	e.out = outputStore(b)
	if m, ok := b.Backend.(*memory.Memory); ok {
		if e.mem, err = newMemControl(m, opts.State, opts.Log, opts.Now, e.selfRecord); err != nil {
			return nil, err
		}
	}
	e.metrics = actors.NewMetrics(e.reg)
	e.load = cluster.NewLoad(cfg.Node.MaxParallel, b.kind == "redis", e.reg)
	load := e.load
	if e.node, err = newHeartbeat(cfg, b, opts, e.reg, e.metrics.Running, load); err != nil {
		return nil, err
	}
	e.ticker = actors.NewTicker(opts.Log, e.metrics, opts.Now)
	environ := actors.JobEnviron(opts.Environ, cfg.SecretEnv...) // what runs and hooks inherit
	e.hooks = actors.NewHookRunner(opts.Log, e.metrics, environ, opts.Start, e.kill, e.killNow)
	if hs, ok := e.out.(ledger.HookStore); ok { // both backends' stores are
		e.hooks.KeepResults(hs, retentionOf(cfg), cfg.Output.Patterns)
	}
	locker := b.Backend // redislock.Backend (its guard included) or memory.Memory
	e.alerts = e.newNotifier()
	e.janitor = actors.NewJanitor(opts.Log, locker, 1024)
	var seen actors.SeenKeeper
	if opts.State != nil {
		e.records = statedir.NewRunRecords(opts.State)
		e.wrapRecords = opts.WrapRecords
		if b.kind == "redis" {
			seenCounts, notice, serr := statedir.LoadSeenCounts(opts.State, cfg.Redis.KeyPrefix)
			e.seen = seenCounts
			if serr != nil {
				opts.Log.Warn("ledger counts not restored", zap.Error(serr))
			} else if notice != "" {
				opts.Log.Info(notice)
			}
			names := make([]string, len(cfg.Jobs))
			for i := range cfg.Jobs {
				names[i] = cfg.Jobs[i].Name
			}
			e.seen.Retain(names)
			seen = e.seen
		}
	}
	e.jobs = newJobSet(opts.Log, actors.JobDeps{Log: opts.Log, Metrics: e.metrics, Locker: locker,
		NodeID: cfg.Node.ID, Environ: environ, Results: e.hooks.Inbox(), Phantoms: e.janitor.Inbox(), Finishes: e.janitor.Finishes(),
		Kill: e.kill, KillNow: e.killNow, GracePeriod: cfg.Node.GracePeriod, Now: opts.Now, Start: opts.Start,
		Records: e.runRecords(), ClaimTimeout: claimTimeout(cfg), Load: load,
		MaxSkew: cfg.Node.MaxClockSkew, Retention: retentionOf(cfg), Watch: e.alerts,
		Output: e.out, OutputMaxBytes: cfg.Output.MaxBytes, Redact: cfg.Output.Patterns, Seen: seen},
		e.ticker, &actors.Auditor{Log: opts.Log, Metrics: e.metrics, Locker: locker, NodeID: cfg.Node.ID,
			MaxSkew: cfg.Node.MaxClockSkew, Retention: retentionOf(cfg), Now: nowOr(opts.Now), Started: time.Now(),
			Missed: e.alerts.Missed})
	e.taker = e.newTaker()
	if b.redis != nil {
		b.redis.Register(e.reg)
	}
	e.health = newHealth(opts.Log, b, e.metrics, cfg, e.onRedisBack, opts.Notify, e.status)
	e.targets = newWatcher(cfg, b, opts, e.reg)
	return e, nil
}

// secondSignalWait bounds how long a second signal waits for the killed
// runs to release their leases (and killed hooks to end) before the
// process exits.
const secondSignalWait = 5 * time.Second

// shutdownSlack is what the shutdown may take beyond shutdown_timeout and
// the largest kill_grace: a killed run's output drain and its lease
// release. After that the process exits anyway (exit 1).
const shutdownSlack = process.DefaultDrainTimeout + actors.ReleaseTimeout

// errSecondSignal is returned when a second shutdown signal cut the
// shutdown short.
var errSecondSignal = errors.New("engine: second signal, exiting at once")

// errShutdownBound is returned when the shutdown did not end within
// shutdown_timeout + the largest kill_grace + shutdownSlack.
var errShutdownBound = errors.New("engine: shutdown not finished within its bound, exiting")

// Run runs the daemon until a shutdown signal or ctx ends, then shuts down
// in order (docs/architecture.md, "Shutdown"): stop claiming (STOPPING=1,
// /readyz not ready) → running jobs and hooks finish within
// node.shutdown_timeout → kill what is left → release leases → the last
// hooks end. The ticker (which answers the watchdog's and /healthz's
// probes), HTTP and the watchdog stay up until the last run and hook have
// ended. It returns nil after a clean shutdown, the error of an actor that
// stopped unexpectedly, or (after ExitNow was called) errSecondSignal or
// errShutdownBound.
func (e *Engine) Run(ctx context.Context) error {
	defer e.backend.close()
	if e.mem != nil {
		defer e.mem.close()
	}
	e.logStart()
	srv, err := e.bindHTTP()
	if err != nil {
		return err
	}
	sock, err := e.bindControlSocket()
	if err != nil {
		return err
	}
	// serveCtx ends once the last run and hook have ended; claimCtx when
	// the shutdown begins (or ctx ends).
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	claimCtx, stopClaiming := context.WithCancel(ctx)
	defer stopClaiming()
	servers := e.startServers(serveCtx, srv, sock)
	// Before the job set and catch-up exist: the ticker has no entries yet.
	e.clearLeftovers(ctx)
	defer e.closeRecords()
	runsDone, hooksDone := e.startClaimers(ctx, claimCtx)
	if err := e.applyJobs(claimCtx, e.cfg.Jobs); err == nil {
		e.jobs.Catchup(claimCtx)
		// READY=1 goes out before ready is set: the health monitor sends
		// STATUS= only once ready, so no STATUS= can precede READY=1.
		e.opts.Notify("READY=1\nSTATUS=" + e.statusText())
		e.ready.Store(true)
		e.log.Info("engine running", zap.Int("jobs", len(e.cfg.Jobs)))
		releaseLoadGarbage()
	}
	err = e.supervise(ctx, stopClaiming, runsDone, hooksDone)
	if errors.Is(err, errSecondSignal) || errors.Is(err, errShutdownBound) {
		return err // ExitNow has run
	}
	stopServing()
	_ = servers.Wait()
	e.log.Info("shutdown complete")
	return err
}

// bindHTTP binds http.listen; nil when it is not set.
func (e *Engine) bindHTTP() (*httpServer, error) {
	if e.cfg.HTTP.Listen == "" {
		return nil, nil
	}
	return e.newHTTP()
}

// startServers starts the actors that live until the last run and hook
// have ended: the ticker (the watchdog's and /healthz's probes need it;
// the job set clears its entries when the shutdown begins; a run waiting
// for an early fire's Due needs it), the janitor, HTTP and the watchdog.
func (e *Engine) startServers(ctx context.Context, srv, sock *httpServer) *errgroup.Group {
	g := &errgroup.Group{}
	e.goActor(g, ctx, "ticker", e.ticker.Run)
	// The janitor lives as long as the runs: a run that ends during the
	// shutdown may hand it a phantom or a finish to send again.
	e.goActor(g, ctx, "janitor", e.janitor.Run)
	// The notifier too: the last runs' alerts are sent until then.
	e.goActor(g, ctx, "notifier", e.alerts.Run)
	// And the ledger counts: the last finishes' counts are written.
	if e.seen != nil {
		e.goActor(g, ctx, "ledger count writer", func(ctx context.Context) error {
			failing := false
			return e.seen.Run(ctx, func(err error) {
				switch {
				case err != nil && !failing:
					e.log.Warn("ledger counts not written to the state directory: after a restart this node "+
						"cannot detect or repair what Redis lost (retried)", zap.Error(err))
				case err == nil && failing:
					e.log.Info("ledger counts written to the state directory again")
				}
				failing = err != nil
			})
		})
	}
	if e.node != nil {
		e.goActor(g, ctx, "node registry", e.node.Run)
	}
	if srv != nil {
		e.goActor(g, ctx, "http server", srv.Run)
	}
	if sock != nil {
		e.goActor(g, ctx, "control socket", sock.Run)
	}
	if wd := watchdogInterval(e.opts.Environ); wd > 0 {
		e.goActor(g, ctx, "watchdog", func(ctx context.Context) error { return e.watchdog(ctx, wd) })
	}
	return g
}

// startClaimers starts the actors that stop when the shutdown begins (the
// job set, whose job actors wait for their runs; the health monitor) and
// the hook runner. runsDone is closed once the first have all
// returned, hooksDone once the hook runner has (after closeHooks).
func (e *Engine) startClaimers(ctx, claimCtx context.Context) (runsDone, hooksDone <-chan struct{}) {
	var g errgroup.Group
	e.goActor(&g, claimCtx, "job set", e.jobs.Run)
	e.goActor(&g, claimCtx, "health monitor", e.health.Run)
	e.goActor(&g, claimCtx, "job targeting watcher", e.targets.Run)
	if e.taker != nil {
		e.goActor(&g, claimCtx, "run request taker", e.taker.Run)
	}
	runs, hooks := make(chan struct{}), make(chan struct{})
	go func() { defer close(runs); _ = g.Wait() }()
	go func() { defer close(hooks); _ = e.hooks.Run(context.WithoutCancel(ctx)) }()
	return runs, hooks
}

// goActor runs an actor in g. An actor that returns while its context is
// still live (even with nil) stops the daemon: its error goes to e.failed
// (the supervisor begins the shutdown), systemd restarts the process and
// the lease TTL hands work to another node; job actors are never restarted
// in-process (two copies of a job could run).
func (e *Engine) goActor(g *errgroup.Group, ctx context.Context, name string, run func(context.Context) error) {
	g.Go(func() error {
		err := run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("returned")
		}
		err = fmt.Errorf("%s stopped unexpectedly: %w", name, err)
		select {
		case e.failed <- err:
		default: // another failure is already being handled
		}
		return err
	})
}

// noteKillGrace raises maxKillGrace to the largest kill_grace of jobs
// (runs started under an earlier config keep theirs).
func (e *Engine) noteKillGrace(jobs []config.Job) {
	for _, j := range jobs {
		e.maxKillGrace = max(e.maxKillGrace, j.KillGrace)
	}
}

// status is the systemd STATUS= text: jobs, runs in progress, backend
// state; "" before READY=1 (nothing to report yet).
func (e *Engine) status() string {
	if !e.ready.Load() {
		return ""
	}
	return e.statusText()
}

// statusText is the STATUS= text, whether or not READY=1 was sent.
func (e *Engine) statusText() string {
	state := e.health.state()
	if state != "up" && state != "connecting" {
		state += ", not claiming"
	}
	return fmt.Sprintf("%d jobs, %d running; %s backend %s", e.jobs.count.Load(), e.metrics.TotalRunning(),
		e.backend.kind, state)
}

// onRedisBack runs when Redis answers again: first release phantom leases
// (claims that timed out may have been applied late), then catch up.
func (e *Engine) onRedisBack(ctx context.Context) {
	e.janitor.Sweep(ctx)
	e.jobs.Catchup(ctx)
}

func (e *Engine) logStart() {
	fields := []zap.Field{zap.String("node_id", e.cfg.Node.ID), zap.String("backend", e.backend.kind),
		zap.Int("jobs", len(e.cfg.Jobs))}
	if e.backend.kind == "memory" {
		e.log.Warn("memory lock backend: coordination is local to this process; "+
			"every instance of a multi-node setup would run every job", fields...)
		return
	}
	e.log.Info("starting", append(fields, zap.String("redis", e.backend.addr))...)
}

// retentionOf is the ledger retention of cfg (docs/protocol.md, R9).
func retentionOf(cfg *config.Config) ledger.Retention {
	return ledger.Retention{Age: cfg.Ledger.Retention, Max: cfg.Ledger.MaxOccurrences}
}

// nowOr is now, or time.Now when nil.
func nowOr(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
