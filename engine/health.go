package engine

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/actors"
	"go.uber.org/zap"
)

// Health-monitor timing: while Redis is down, ping with a backoff from
// 250 ms up to 1 s, so that its return is noticed (and catch-up runs)
// within a second; compare clocks every minute.
const (
	pingUp        = time.Second
	pingDown      = 250 * time.Millisecond
	pingTimeout   = time.Second
	skewEvery     = time.Minute
	healthTimeout = 2 * time.Second
)

// health is the actor that watches the backend: up/down (cronlock_redis_up,
// /readyz, STATUS=), and the clock skew against Redis TIME at connect and
// every minute (node.max_clock_skew). On a down→up transition
// it calls onBack (catch-up).
type health struct {
	log     *zap.Logger
	b       backend
	metrics *actors.Metrics
	maxSkew time.Duration
	now     func() time.Time // the wall clock slots are computed on
	onBack  func(context.Context)
	notify  func(string)
	status  func() string // the STATUS= text; sent when it changes

	lastStatus string

	up       atomic.Bool
	checked  atomic.Bool // the first ping has been answered or has failed
	lastSkew time.Time
}

func newHealth(log *zap.Logger, b backend, m *actors.Metrics, maxSkew time.Duration, now func() time.Time,
	onBack func(context.Context), notify func(string), status func() string) *health {
	h := &health{log: log, b: b, metrics: m, maxSkew: maxSkew, now: now, onBack: onBack,
		notify: notify, status: status}
	if b.kind == "memory" {
		h.up.Store(true)
		m.SetRedisUp(true)
	}
	return h
}

// Ready reports whether the backend answered its last ping.
func (h *health) Ready() bool { return h.up.Load() }

// state is the backend state in STATUS= and /readyz: "up", "unreachable",
// or "connecting" until the first ping has been answered or has failed
// (so the STATUS= sent with READY=1 never says "unreachable" untested).
func (h *health) state() string {
	switch {
	case h.up.Load():
		return "up"
	case !h.checked.Load():
		return "connecting"
	}
	return "unreachable"
}

// Run pings until ctx ends, then returns nil; after each ping it sends
// systemd STATUS= when the text changed (Redis state, running jobs). The
// memory backend is not pinged.
func (h *health) Run(ctx context.Context) error {
	first := true
	down := pingDown
	for {
		if h.b.kind != "memory" {
			h.check(ctx, first)
		}
		first = false
		if s := h.status(); s != "" && s != h.lastStatus {
			h.lastStatus = s
			h.notify("STATUS=" + s)
		}
		d := pingUp
		if h.up.Load() {
			down = pingDown
		} else {
			d, down = down, min(2*down, pingUp) // reconnect backoff: 250 ms doubling to 1 s
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
}

func (h *health) check(ctx context.Context, first bool) {
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	err := h.b.Ping(pctx)
	cancel()
	defer h.checked.Store(true) // once up is set
	was := h.up.Load()
	switch {
	case err != nil && (was || first):
		h.up.Store(false)
		h.metrics.SetRedisUp(false)
		h.log.Error("redis unreachable: slots are skipped (redis_error) until it answers; retrying", zap.Error(err))
	case err == nil && !was:
		h.up.Store(true)
		h.metrics.SetRedisUp(true)
		h.log.Info("redis reachable")
		h.checkSkew(ctx)
		if !first {
			h.onBack(ctx)
		}
	case err == nil && time.Since(h.lastSkew) >= skewEvery:
		h.checkSkew(ctx)
	}
}

// checkSkew compares the local wall clock (h.now) with Redis TIME,
// correcting for half the round trip.
func (h *health) checkSkew(ctx context.Context) {
	h.lastSkew = time.Now()
	tctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	sent, wall := time.Now(), h.now()
	rt, err := h.b.Time(tctx)
	if err != nil {
		h.log.Warn("clock skew check failed", zap.Error(err))
		return
	}
	rtt := time.Since(sent)
	local := wall.Add(rtt / 2)
	skew := local.Sub(rt)
	h.metrics.SetClockSkew(skew)
	if math.Abs(float64(skew)) > float64(h.maxSkew) {
		h.log.Warn("clock skew against redis exceeds node.max_clock_skew; slot claims keep runs exactly-once, "+
			"but this node fires late or early: fix NTP", zap.Duration("skew", skew), zap.Duration("max_clock_skew", h.maxSkew))
		return
	}
	h.log.Debug("clock skew", zap.Duration("skew", skew))
}
