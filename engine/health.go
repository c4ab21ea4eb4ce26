package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Health-monitor timing: while Redis is down, probe with a backoff from
// 250 ms up to 500 ms, so that its return is noticed (and catch-up runs)
// within a second even when the probe itself takes a few hundred
// milliseconds; compare clocks and read the server's policy every
// minute (the policy at every check while the guard refuses claims).
const (
	pingUp         = time.Second
	pingDown       = 250 * time.Millisecond
	pingDownMax    = 500 * time.Millisecond
	pingTimeout    = time.Second
	skewEvery      = time.Minute
	infoEvery      = time.Minute
	healthTimeout  = 2 * time.Second
	tlsDiagEvery   = 10 * time.Second       // see explainUnreachable
	tlsDiagTimeout = 500 * time.Millisecond // each of its connections
)

// health is the actor that watches the backend. For Redis, every check
// runs the readiness probe, a read-only script on the shard that owns the
// job keys (it fails wherever a claim would: Redis down, scripting
// disabled, the owning shard killed, a Cluster node that redirects the
// keys); at connect and every minute it reads the server's eviction and
// persistence settings for the policy guard and compares the clock with
// Redis TIME (node.max_clock_skew). Ready (cronlock_redis_up, /readyz,
// STATUS=) means "a claim would succeed now": the probe passed and the
// guard allows claims. When the node becomes ready again after a check
// that was not the first, it calls onBack (janitor sweep, catch-up).
type health struct {
	log     *zap.Logger
	b       backend
	metrics *actors.Metrics
	maxSkew time.Duration
	now     func() time.Time // the wall clock slots are computed on
	onBack  func(context.Context)
	notify  func(string)
	status  func() string // the STATUS= text; sent when it changes

	jobs atomic.Pointer[[]string] // names of the configured jobs (setJobs)

	// Owned by the Run goroutine.
	stalls       *stallMeter // this process's own scheduling waits (stall.go)
	lastStatus   string
	probeKind    string // "" before the first probe, "ok", "unreachable", "failing: …", "cluster node", "misconfigured: …"
	probeErr     error
	tlsProb      *redislock.TLSProblem // the TLS cause of the last unanswered probes, nil if none
	lastTLSDiag  time.Time             // when explainUnreachable last connected to look for it
	lastSkew     time.Time
	lastInfo     time.Time
	lastStall    time.Duration // the longest CPU wait of the last stalled probe (stalledFor)
	stalledSince time.Time     // when the first of the current stalled probes began; zero if the last probe was not stalled
	stallMaxFor  time.Duration // stallMaxFor (a field so that a test can move the bound instead of sleeping to it)

	up        atomic.Bool
	stateText atomic.Pointer[string]
}

func newHealth(log *zap.Logger, b backend, m *actors.Metrics, reg prometheus.Registerer, cfg *config.Config,
	now func() time.Time, onBack func(context.Context), notify func(string), status func() string) *health {
	h := &health{log: log, b: b, metrics: m, maxSkew: cfg.Node.MaxClockSkew, now: now, onBack: onBack,
		notify: notify, status: status, stalls: newStallMeter(), stallMaxFor: stallMaxFor}
	h.setJobs(cfg.Jobs)
	h.setState("connecting") // until the first check has answered or failed
	if b.checks == nil {
		h.up.Store(true)
		h.setState("up")
		m.SetRedisUp(true)
	}
	if b.guard != nil {
		b.guard.register(reg)
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
// never says "unreachable" untested), then "up", "unreachable", "failing:
// <the server's error>", "unsafe: <why>" (the policy guard refuses claims),
// "not replicated: …" (fewer connected replicas than
// redis.min_replicas_acked) or "not verified" (the server's policy not read yet).
func (h *health) state() string { return *h.stateText.Load() }

func (h *health) setState(s string) { h.stateText.Store(&s) }

// Run checks until ctx ends, then returns nil; after each check it sends
// systemd STATUS= when the text changed (Redis state, running jobs). The
// memory backend is not checked.
func (h *health) Run(ctx context.Context) error {
	if h.b.guard != nil {
		h.b.guard.logStart()
		defer h.b.guard.markChecked()
	}
	first := true
	down := pingDown
	for {
		if h.b.checks != nil {
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
			d, down = down, min(2*down, pingDownMax) // reconnect backoff: 250 ms doubling to 500 ms
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
}

// check probes, reads the server's settings when due, and publishes
// readiness.
func (h *health) check(ctx context.Context, first bool) {
	g := h.b.guard
	wasReady := h.up.Load()
	connected := h.probe(ctx)
	// While the guard refuses (or has not decided), re-read at every check,
	// so that a fixed policy is noticed within a second.
	// After an inconclusive probe (stalled) the server is not read: its
	// calls would wait as the probe did and only lengthen the stall.
	settled := h.probeErr == nil && h.probeKind != "stalled"
	if settled && (connected || !g.allows() || g.replicaShort != "" || time.Since(h.lastInfo) >= infoEvery) {
		h.readServer(ctx, connected)
	}
	if settled && (connected || time.Since(h.lastSkew) >= skewEvery) {
		h.checkSkew(ctx)
	}
	ready := h.probeErr == nil && g.allows() && g.replicaShort == "" && g.writeRefusal() == ""
	h.up.Store(ready)
	h.metrics.SetRedisUp(ready)
	h.setState(h.describe())
	g.markChecked()
	if ready && !wasReady && !first {
		h.onBack(ctx)
	}
}

// probe runs the readiness probe and logs a change of its outcome; it
// reports whether the probe passed after not passing (a connect).
func (h *health) probe(ctx context.Context) (connected bool) {
	from := time.Now()
	waits := h.stalls.read()
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	err := h.b.checks.Probe(pctx, *h.jobs.Load())
	cancel()
	if ctx.Err() != nil {
		return false // the daemon stops: a probe it cut short says nothing about Redis
	}
	var base string
	var shardErr *redislock.ShardError
	timedOut := err != nil && errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &shardErr) && ctx.Err() == nil
	switch {
	case timedOut && h.b.guard.answeredSince(from):
		// Claims or finishes were answered while the probe waited: Redis
		// answers, late. (Not in Cluster mode with one shard timing out: the
		// answers may have come from the others.)
		// (it or this node is overloaded, e.g. at a herd of thousands of
		// runs on a small machine). Claims succeed, so the node stays
		// ready and nothing of a return (sweep, catch-up, missed-slot
		// report of every job) runs; the state and one warning say so.
		err, base = nil, "slow"
	case timedOut && h.probeErr == nil && h.probeKind != "" &&
		(h.stalledSince.IsZero() || from.Sub(h.stalledSince) < h.stallMaxFor) && h.stalledFor(waits):
		// This process's own goroutines waited for a CPU for at least
		// half the probe's timeout while it ran (a herd's forks hold the
		// daemon's P, stall.go): the timeout says nothing about Redis.
		// The last verdict (passing) stands and the next probe decides;
		// a Redis that is really down is reported by the first probe
		// without a stall, or by the first one that starts stallMaxFor
		// after the first stalled one began. Each such probe logs a
		// warning.
		err, base = nil, "stalled"
	default:
		base = h.classify(ctx, err)
	}
	switch {
	case base != "stalled":
		h.stalledSince = time.Time{}
	case h.stalledSince.IsZero():
		h.stalledSince = from
	}
	h.probeErr = err
	kind, shard := base, ""
	var se *redislock.ShardError
	if errors.As(err, &se) {
		shard = fmt.Sprintf("shard %s: %d of %d jobs; the others still run", se.Master, se.Jobs, se.Total)
		kind += " (" + shard + ")"
	}
	if kind == h.probeKind {
		if base == "stalled" { // each probe discounted says so
			h.logProbeFailure(base, shard, err)
		}
		return false
	}
	was := h.probeKind
	h.probeKind = kind
	if base == "ok" && (was == "slow" || was == "stalled") {
		h.log.Info("readiness probe answered in time again")
		return false // nothing was lost
	}
	if base == "ok" {
		h.log.Info("redis reachable")
		return true
	}
	h.logProbeFailure(base, shard, err)
	return false
}

// stallThreshold is the least CPU wait of this process's goroutines during
// a timed-out probe that makes the timeout inconclusive: half the probe's
// timeout.
const stallThreshold = pingTimeout / 2

// stallMaxFor bounds a run of stalled probes: a timed-out probe that
// starts stallMaxFor or more after the first stalled one began counts as
// unreachable, stall or not. A timed-out probe takes the 1 s timeout
// plus the stall, and the next starts 1 s after it ends, so a node that
// never stops waiting for a CPU reports a real outage within about 6 s
// (two probes of about 2.3 s, then one that counts). A 3 × 3,000-job herd
// on 2 cores stalls a node for 1–2 probes.
const stallMaxFor = 3 * time.Second

// stalledFor reports whether, since the reading waits (stallMeter.read), a
// goroutine of this process waited runnable for at least stallThreshold;
// the wait (a lower bound) is kept in lastStall for the warning.
func (h *health) stalledFor(waits []uint64) bool {
	h.lastStall = h.stalls.longestSince(waits)
	return h.lastStall >= stallThreshold
}

// classify names a probe's outcome (see probeKind).
func (h *health) classify(ctx context.Context, err error) string {
	reply, isReply := redislock.ServerReply(err)
	var acl *redislock.ScriptACLError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, redislock.ErrClusterNode):
		h.b.guard.observe(nil, err)
		return "cluster node"
	case errors.Is(err, redislock.ErrModeMismatch):
		return "misconfigured: redis.mode does not match the server"
	case errors.As(err, &acl):
		return "failing: the ACL user may not run " + acl.Command + " (grant +" + strings.ToLower(acl.Command) + ")"
	case isReply:
		return "failing: " + shortRedisErr(reply)
	}
	return h.explainUnreachable(ctx, err)
}

// logProbeFailure logs a new kind of probe failure once; shard, when not
// "", names the Cluster shard that failed.
func (h *health) logProbeFailure(base, shard string, err error) {
	fields := []zap.Field{zap.Error(err)}
	if shard != "" {
		fields = append(fields, zap.String("shard", shard))
	}
	switch base {
	case "stalled":
		h.log.Warn("readiness probe inconclusive: no answer within "+pingTimeout.String()+" while this node's own "+
			"goroutines waited for a CPU (this node overloaded, e.g. by a herd of run starts: each fork holds the "+
			"daemon's scheduler until the child has started); not counted as redis unreachable; later probes decide",
			append(fields, zap.Duration("longest_cpu_wait_at_least", h.lastStall))...)
		return
	case "slow":
		h.log.Warn("redis answers slowly: the readiness probe got no answer within "+pingTimeout.String()+
			" while claims or finishes were answered (redis or this node overloaded); treated as answering", fields...)
		return
	case "unreachable":
		msg := "redis unreachable: slots are skipped (redis_error) until it answers; retrying"
		if shard != "" {
			msg = "a redis Cluster shard is unreachable: the slots of the jobs whose keys it owns are skipped " +
				"(redis_error) until it answers or its replica takes over; the other shards' jobs still run"
		}
		h.log.Error(msg, fields...)
	case "cluster node": // the guard has logged it
	case h.tlsProblemKind():
		h.log.Error("redis TLS fails: "+h.tlsProb.Short+"; slots are skipped (redis_error) until it connects. Fix: "+
			h.tlsProb.Fix, fields...)
	case "misconfigured: redis.mode does not match the server":
		h.log.Error("redis.mode does not match the redis server: not claiming, slots are skipped (redis_error) "+
			"until redis.mode is fixed and the daemon restarted", fields...)
	default:
		h.log.Error("redis answers, but the claim scripts fail on a server that owns job keys: "+
			"slots are skipped (redis_error) until they run; retrying", fields...)
	}
}

// explainUnreachable is the kind of a probe that got no answer:
// "unreachable", or "tls: …" when the failure has a TLS cause
// (redislock.ExplainTLS). A certificate error in err is read at every
// check; the explanation that connects once more is made when the probe
// starts failing and again at most every tlsDiagEvery (a server down at
// start may come up with a certificate problem, or speaking TLS to a
// plaintext client), and kept meanwhile.
func (h *health) explainUnreachable(ctx context.Context, err error) string {
	switch p := redislock.ExplainTLS(ctx, err, h.b.seed, h.b.tls, 0); {
	case p != nil: // read from err, no I/O
		h.tlsProb = p
	case (!strings.HasPrefix(h.probeKind, "tls: ") && h.probeKind != "unreachable") ||
		time.Since(h.lastTLSDiag) >= tlsDiagEvery:
		h.lastTLSDiag = time.Now()
		h.tlsProb = redislock.ExplainTLS(ctx, err, h.b.seed, h.b.tls, tlsDiagTimeout)
	}
	if h.tlsProb != nil {
		return h.tlsProblemKind()
	}
	return "unreachable"
}

// tlsProblemKind is the kind of the last TLS problem found ("" if none).
func (h *health) tlsProblemKind() string {
	if h.tlsProb == nil {
		return ""
	}
	return "tls: " + h.tlsProb.Short
}

// readServer reads the eviction and persistence settings of the servers
// that own the job keys and hands them to the guard; CONFIG GET save only
// at connect (or until it was read once).
func (h *health) readServer(ctx context.Context, connected bool) {
	h.lastInfo = time.Now()
	ictx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	g := h.b.guard
	infos, err := h.b.checks.ServerInfo(ictx, *h.jobs.Load())
	g.observe(infos, err)
	if err != nil {
		h.log.Debug("redis server info not read", zap.Error(err))
		return
	}
	if connected || !g.saveRead {
		save, serr := h.b.checks.SavePoints(ictx)
		if _, isReply := redislock.ServerReply(serr); serr == nil || isReply { // the server's answer, not a timeout
			g.setSavePoints(save, serr)
		}
	}
	g.observePersistence(infos)
	g.observeReplicas(infos)
}

// shortRedisErr is the server's error text for a state line: without the
// echoed arguments of "unknown command", at most 100 bytes.
func shortRedisErr(reply string) string {
	s, _, _ := strings.Cut(reply, ", with args beginning with")
	if len(s) > 100 {
		s = s[:100]
	}
	return s
}

// describe is the state text of the last check (see state).
func (h *health) describe() string {
	refused := h.b.guard.refusedState()
	switch {
	case errors.Is(h.probeErr, redislock.ErrClusterNode) && refused != "":
		return refused
	case h.probeErr != nil:
		return h.probeKind
	case refused != "":
		return refused
	case h.b.guard.replicaShort != "":
		return h.b.guard.replicaShort
	case h.b.guard.writeRefusal() != "":
		return h.b.guard.writeRefusal()
	case !h.b.guard.known():
		return "not verified"
	case h.probeKind == "slow":
		return "up, slow: the readiness probe was late while claims or finishes were answered"
	case h.probeKind == "stalled":
		return "up, stalled: the readiness probe was late while this node's goroutines waited for a CPU"
	}
	return "up"
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
		h.log.Warn("clock skew against redis exceeds node.max_clock_skew: this node's scheduled claims fall outside "+
			"their claim window in redis time and it runs nothing (skip reason clock_skew); the other nodes run the slots: fix NTP", zap.Duration("skew", skew), zap.Duration("max_clock_skew", h.maxSkew))
		return
	}
	h.log.Debug("clock skew", zap.Duration("skew", skew))
}
