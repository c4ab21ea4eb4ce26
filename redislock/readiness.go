package redislock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/cronlock/cronlock/internal/cpuwait"
	"github.com/cronlock/cronlock/ledger"
	"go.uber.org/zap"
)

// Readiness-check timing: a probe waits at most pingTimeout; compare
// clocks and read the server's policy every minute (the policy at every
// check while the guard refuses claims). The checks' own pace (every
// second, faster while Redis is down) is the caller's (engine, health.go).
const (
	pingTimeout    = time.Second
	skewEvery      = time.Minute
	infoEvery      = time.Minute
	healthTimeout  = 2 * time.Second
	tlsDiagEvery   = 10 * time.Second       // see explainUnreachable
	tlsDiagTimeout = 500 * time.Millisecond // each of its connections
)

// monitor is the Redis half of the daemon's health monitor: each check
// runs the readiness probe, a read-only script on the shard that owns the
// job keys (it fails wherever a claim would: Redis down, scripting
// disabled, the owning shard killed, a Cluster node that redirects the
// keys); at connect and every minute it reads the server's eviction and
// persistence settings for the policy guard and compares the clock with
// Redis TIME (node.max_clock_skew). Ready means "a claim would succeed
// now": the probe passed and the guard allows claims. It owns no goroutine
// or timer: one goroutine calls check (Backend.CheckReady), and its
// fields belong to that goroutine.
type monitor struct {
	log     *zap.Logger
	c       *Lazy
	guard   *guard
	maxSkew time.Duration
	now     func() time.Time // the wall clock slots are computed on
	// seed is the first configured address and tls the client's TLS
	// configuration (nil: off), for the explanation of a failure to
	// connect (ExplainTLS).
	seed string
	tls  *tls.Config

	stalls       *cpuwait.Meter // this process's own scheduling waits
	probeKind    string         // "" before the first probe, "ok", "unreachable", "failing: …", "cluster node", "misconfigured: …"
	probeErr     error
	tlsProb      *TLSProblem // the TLS cause of the last unanswered probes, nil if none
	lastTLSDiag  time.Time   // when explainUnreachable last connected to look for it
	lastSkew     time.Time
	lastInfo     time.Time
	lastStall    time.Duration // the longest CPU wait of the last stalled probe (stalledFor)
	stalledSince time.Time     // when the first of the current stalled probes began; zero if the last probe was not stalled
	stallMaxFor  time.Duration // stallMaxFor (a field so that a test can move the bound instead of sleeping to it)
}

// check probes, reads the server's settings when due, and returns the
// verdict: ready, the state text (see ledger.Readiness) and the clock skew
// when it was measured. jobs are the configured jobs' names, sorted.
func (h *monitor) check(ctx context.Context, jobs []string) ledger.Readiness {
	g := h.guard
	connected := h.probe(ctx, jobs)
	// While the guard refuses (or has not decided), re-read at every check,
	// so that a fixed policy is noticed within a second.
	// After an inconclusive probe (stalled) the server is not read: its
	// calls would wait as the probe did and only lengthen the stall.
	settled := h.probeErr == nil && h.probeKind != "stalled"
	if settled && (connected || !g.allows() || g.replicaShort != "" || time.Since(h.lastInfo) >= infoEvery) {
		h.readServer(ctx, connected, jobs)
	}
	var r ledger.Readiness
	if settled && (connected || time.Since(h.lastSkew) >= skewEvery) {
		r.Skew, r.SkewMeasured = h.checkSkew(ctx)
	}
	r.Ready = h.probeErr == nil && g.allows() && g.replicaShort == "" && g.writeRefusal() == ""
	r.State = h.describe()
	g.markChecked()
	return r
}

// probe runs the readiness probe and logs a change of its outcome; it
// reports whether the probe passed after not passing (a connect).
func (h *monitor) probe(ctx context.Context, jobs []string) (connected bool) {
	from := time.Now()
	waits := h.stalls.Read()
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	err := h.c.Probe(pctx, jobs)
	cancel()
	if ctx.Err() != nil {
		return false // the daemon stops: a probe it cut short says nothing about Redis
	}
	var base string
	var shardErr *ShardError
	timedOut := err != nil && errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &shardErr) && ctx.Err() == nil
	switch {
	case timedOut && h.guard.answeredSince(from):
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
		// daemon's P, internal/cpuwait): the timeout says nothing about Redis.
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
	var se *ShardError
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

// stalledFor reports whether, since the reading waits (cpuwait.Meter.Read), a
// goroutine of this process waited runnable for at least stallThreshold;
// the wait (a lower bound) is kept in lastStall for the warning.
func (h *monitor) stalledFor(waits []uint64) bool {
	h.lastStall = h.stalls.LongestSince(waits)
	return h.lastStall >= stallThreshold
}

// classify names a probe's outcome (see probeKind).
func (h *monitor) classify(ctx context.Context, err error) string {
	reply, isReply := ServerReply(err)
	var acl *ScriptACLError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrClusterNode):
		h.guard.observe(nil, err)
		return "cluster node"
	case errors.Is(err, ErrModeMismatch):
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
func (h *monitor) logProbeFailure(base, shard string, err error) {
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
// (ExplainTLS). A certificate error in err is read at every
// check; the explanation that connects once more is made when the probe
// starts failing and again at most every tlsDiagEvery (a server down at
// start may come up with a certificate problem, or speaking TLS to a
// plaintext client), and kept meanwhile.
func (h *monitor) explainUnreachable(ctx context.Context, err error) string {
	switch p := ExplainTLS(ctx, err, h.seed, h.tls, 0); {
	case p != nil: // read from err, no I/O
		h.tlsProb = p
	case (!strings.HasPrefix(h.probeKind, "tls: ") && h.probeKind != "unreachable") ||
		time.Since(h.lastTLSDiag) >= tlsDiagEvery:
		h.lastTLSDiag = time.Now()
		h.tlsProb = ExplainTLS(ctx, err, h.seed, h.tls, tlsDiagTimeout)
	}
	if h.tlsProb != nil {
		return h.tlsProblemKind()
	}
	return "unreachable"
}

// tlsProblemKind is the kind of the last TLS problem found ("" if none).
func (h *monitor) tlsProblemKind() string {
	if h.tlsProb == nil {
		return ""
	}
	return "tls: " + h.tlsProb.Short
}

// readServer reads the eviction and persistence settings of the servers
// that own the job keys and hands them to the guard; CONFIG GET save only
// at connect (or until it was read once).
func (h *monitor) readServer(ctx context.Context, connected bool, jobs []string) {
	h.lastInfo = time.Now()
	ictx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	g := h.guard
	infos, err := h.c.ServerInfo(ictx, jobs)
	g.observe(infos, err)
	if err != nil {
		h.log.Debug("redis server info not read", zap.Error(err))
		return
	}
	if connected || !g.saveRead {
		save, serr := h.c.SavePoints(ictx)
		if _, isReply := ServerReply(serr); serr == nil || isReply { // the server's answer, not a timeout
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
func (h *monitor) describe() string {
	refused := h.guard.refusedState()
	switch {
	case errors.Is(h.probeErr, ErrClusterNode) && refused != "":
		return refused
	case h.probeErr != nil:
		return h.probeKind
	case refused != "":
		return refused
	case h.guard.replicaShort != "":
		return h.guard.replicaShort
	case h.guard.writeRefusal() != "":
		return h.guard.writeRefusal()
	case !h.guard.known():
		return "not verified"
	case h.probeKind == "slow":
		return "up, slow: the readiness probe was late while claims or finishes were answered"
	case h.probeKind == "stalled":
		return "up, stalled: the readiness probe was late while this node's goroutines waited for a CPU"
	}
	return "up"
}

// checkSkew compares the local wall clock (h.now) with Redis TIME,
// correcting for half the round trip; ok is false when TIME failed.
func (h *monitor) checkSkew(ctx context.Context) (skew time.Duration, ok bool) {
	h.lastSkew = time.Now()
	tctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	sent, wall := time.Now(), h.now()
	rt, err := h.c.Time(tctx)
	if err != nil {
		h.log.Warn("clock skew check failed", zap.Error(err))
		return 0, false
	}
	rtt := time.Since(sent)
	local := wall.Add(rtt / 2)
	skew = local.Sub(rt)
	if math.Abs(float64(skew)) > float64(h.maxSkew) {
		h.log.Warn("clock skew against redis exceeds node.max_clock_skew: this node's scheduled claims fall outside "+
			"their claim window in redis time and it runs nothing (skip reason clock_skew); the other nodes run the slots: fix NTP", zap.Duration("skew", skew), zap.Duration("max_clock_skew", h.maxSkew))
		return skew, true
	}
	h.log.Debug("clock skew", zap.Duration("skew", skew))
	return skew, true
}
