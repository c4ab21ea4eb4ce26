package engine

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
)

// Health-monitor pace: a check every second while the backend is ready;
// while it is not, a backoff from 250 ms up to 500 ms, so that Redis's
// return is noticed (and catch-up runs) within a second even when the
// probe itself takes a few hundred milliseconds (the probe's own timeout
// is redislock's).
const (
	pingUp      = time.Second
	pingDown    = 250 * time.Millisecond
	pingDownMax = 500 * time.Millisecond
)

// health is the actor that asks the backend whether a claim would succeed
// now (ledger.ReadinessChecker: redislock.Backend probes Redis and reads
// its settings; the memory backend answers ready) and publishes the
// answer: Ready (/readyz), state (/readyz, STATUS=), cronlock_redis_up and
// cronlock_clock_skew_seconds. When the node becomes ready again after a
// check that was not the first, it calls onBack (janitor sweep, catch-up).
type health struct {
	log     *zap.Logger
	b       backend
	metrics *actors.Metrics
	onBack  func(context.Context)
	notify  func(string)
	status  func() string // the STATUS= text; sent when it changes

	jobs atomic.Pointer[[]string] // names of the configured jobs (setJobs)

	lastStatus string // owned by the Run goroutine

	up        atomic.Bool
	stateText atomic.Pointer[string]
}

// newHealth returns the health monitor of b; it does no I/O.
func newHealth(log *zap.Logger, b backend, m *actors.Metrics, cfg *config.Config,
	onBack func(context.Context), notify func(string), status func() string) *health {
	h := &health{log: log, b: b, metrics: m, onBack: onBack, notify: notify, status: status}
	h.setJobs(cfg.Jobs)
	h.setState("connecting") // until the first check has answered or failed
	if b.redis == nil {      // the memory backend: ready from the start
		h.up.Store(true)
		h.setState("up")
		m.SetRedisUp(true)
	}
	return h
}

// setJobs sets the jobs whose keys the probe covers (at start and after a
// reload). Safe for concurrent use.
func (h *health) setJobs(jobs []config.Job) {
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name
	}
	slices.Sort(names)
	h.jobs.Store(&names)
}

// Ready reports whether a claim would succeed now (the last check).
func (h *health) Ready() bool { return h.up.Load() }

// state is the backend state for /readyz and STATUS=: "connecting" until
// the first check has answered or failed (so the STATUS= sent with READY=1
// never says "unreachable" untested), then the last check's
// (ledger.Readiness.State).
func (h *health) state() string { return *h.stateText.Load() }

func (h *health) setState(s string) { h.stateText.Store(&s) }

// Run checks until ctx ends, then returns nil; after each check it sends
// systemd STATUS= when the text changed (backend state, running jobs).
// When it returns, claims no longer wait for a first check
// (redislock.Backend.StopChecks).
func (h *health) Run(ctx context.Context) error {
	if h.b.redis != nil {
		defer h.b.redis.StopChecks()
	}
	first := true
	down := pingDown
	for {
		h.check(ctx, first)
		first = false
		if s := h.status(); s != "" && s != h.lastStatus {
			h.lastStatus = s
			h.notify("STATUS=" + s)
		}
		d := pingUp
		if h.up.Load() {
			down = pingDown
		} else {
			d, down = down, min(2*down, pingDownMax) // reconnect backoff: 250 ms doubling to 500 ms
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
}

// check asks the backend and publishes its answer.
func (h *health) check(ctx context.Context, first bool) {
	wasReady := h.up.Load()
	r := h.b.CheckReady(ctx, *h.jobs.Load())
	if r.SkewMeasured {
		h.metrics.SetClockSkew(r.Skew)
	}
	h.up.Store(r.Ready)
	h.metrics.SetRedisUp(r.Ready)
	h.setState(r.State)
	if r.Ready && !wasReady && !first {
		h.onBack(ctx)
	}
}
