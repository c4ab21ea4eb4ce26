package redislock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// errNotVerified is the cause of claims refused before the Redis
// configuration has been read (skip reason redis_error).
var errNotVerified = errors.New("redislock: the redis configuration has not been read yet")

// guard is the Redis policy guard (docs/protocol.md, "Redis policy
// guard"). The readiness check (readiness.go) hands it what it reads from the server that
// owns the job keys (observe, observePersistence); claims ask it first
// (guardedLocker, in Backend). It refuses claims — skip reason redis_unsafe, not ready
// — when Redis may evict cronlock's keys (maxmemory > 0 with a policy other
// than noeviction, or a policy it cannot read) unless redis.allow_eviction
// is set, and when a single address turns out to be a Redis Cluster node.
// Until the configuration has first been read it refuses with redis_error.
// Each decision is logged once per change, not at every check. With
// redis.min_replicas_acked it also tells the readiness check when fewer
// replicas are connected than a won claim must wait for (observeReplicas):
// claims still go out (each is skipped not_replicated, the true cause),
// but the node is not ready.
//
// refusal, allows and refusedState are safe for concurrent use; the other
// methods belong to the goroutine that runs the readiness checks.
type guard struct {
	log           *zap.Logger
	allowEviction bool

	verdict atomic.Pointer[verdict] // nil until the first decision
	// writeRefused is the health state after a claim the server refused
	// as a write (noteClaim); nil after a claim that succeeded.
	writeRefused atomic.Pointer[string]
	// answered is when a claim or finish was last answered (Unix ns;
	// noteClaim, guardedLocker.Finish), so that a probe that timed out
	// meanwhile is known to be late, not lost.
	answered  atomic.Int64
	checked   chan struct{} // closed after the first readiness check
	checkOnce sync.Once

	// Owned by the goroutine of the readiness checks.
	policyKey  string // the last policy decision logged
	persistKey string // the last persistence verdict logged
	save       string // CONFIG GET save, when saveErr is nil
	saveErr    error
	saveRead   bool
	// minReplicas is redis.min_replicas_acked; replicaShort the health
	// state while a shard has fewer replicas connected ("" = enough).
	minReplicas  int
	replicaShort string

	unsafe, evictionAllowed, persistent prometheus.Gauge
}

// verdict is one policy decision as claims see it.
type verdict struct {
	refused *ledger.ClaimRefusedError // nil: claims may go to Redis
	state   string                    // health state while refused ("unsafe: …")
}

func newGuard(log *zap.Logger, allowEviction bool) *guard {
	g := &guard{log: log, allowEviction: allowEviction, checked: make(chan struct{}),
		unsafe: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cronlock_redis_unsafe",
			Help: "1 while the Redis policy guard refuses claims (skip reason redis_unsafe): an evicting " +
				"or unreadable maxmemory-policy, or a Cluster node used as a standalone server; else 0."}),
		evictionAllowed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cronlock_redis_eviction_allowed",
			Help: "1 while Redis may evict cronlock's keys (maxmemory set and maxmemory-policy not noeviction, " +
				"or the policy cannot be read) and redis.allow_eviction lets this node claim anyway; else 0."}),
		persistent: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cronlock_redis_persistent",
			Help: "1 when the Redis server owning the job keys persists them (AOF, or RDB snapshots), " +
				"0 when it persists nothing, NaN while unknown."}),
	}
	g.persistent.Set(math.NaN())
	return g
}

// register adds the guard's gauges to reg.
func (g *guard) register(reg prometheus.Registerer) {
	reg.MustRegister(g.unsafe, g.evictionAllowed, g.persistent)
}

// guardedLocker is the Locker the job actors get for a Redis backend: a
// claim first asks the guard, and a refused claim is never sent (its
// error is an *ledger.ClaimRefusedError). Renew, Release and Finish pass
// through: runs already going keep and release their leases (an answered
// Finish is noted for the readiness probe, answeredSince).
type guardedLocker struct {
	claimer
	g *guard
}

// claimer is the Locker the guard stands in front of.
type claimer interface{ ledger.Locker }

func (l guardedLocker) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	if err := l.g.refusal(ctx); err != nil {
		return ledger.Claim{}, err
	}
	c, err := l.claimer.Claim(ctx, req)
	l.g.noteClaim(err)
	return c, err
}

// Finish passes through; an answered finish is noted like an answered
// claim (answeredSince): after a herd's claims, its finishes are what Redis
// answers while the forks run.
func (l guardedLocker) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	f, err := l.claimer.Finish(ctx, req)
	if err == nil {
		l.g.noteAnswer()
	}
	return f, err
}

// writeRefusals are the first words of the error replies of a server that
// answers reads but refuses writes: min-replicas-to-write unmet, a
// read-only replica, maxmemory reached under noeviction, a failing RDB
// save with stop-writes-on-bgsave-error.
var writeRefusals = []string{"NOREPLICAS", "READONLY", "OOM", "MISCONF"}

// noteClaim records a claim's outcome for readiness: a write refusal
// (writeRefusals) makes the node not ready, with the server's answer as
// its state, until a claim succeeds. The read-only readiness probe cannot
// see these. Safe for concurrent use.
func (g *guard) noteClaim(err error) {
	reply, isReply := ServerReply(err)
	switch {
	case err == nil:
		g.noteAnswer()
		if g.writeRefused.Load() != nil {
			g.writeRefused.Store(nil)
		}
	case isReply:
		word, _, _ := strings.Cut(reply, " ")
		if slices.Contains(writeRefusals, word) {
			state := "failing: " + shortRedisErr(reply)
			g.writeRefused.Store(&state)
		}
	}
}

// noteAnswer records that Redis answered a claim or finish now.
func (g *guard) noteAnswer() { g.answered.Store(time.Now().UnixNano()) }

// answeredSince reports whether a claim or finish was answered at or after t.
func (g *guard) answeredSince(t time.Time) bool { return g.answered.Load() >= t.UnixNano() }

// writeRefusal is the state of the last claim's write refusal, "" when
// the last claim was not refused so.
func (g *guard) writeRefusal() string {
	if s := g.writeRefused.Load(); s != nil {
		return *s
	}
	return ""
}

// Audit forwards the missed-occurrence audit. While the guard refuses
// claims it is refused too: the audit writes to Redis, and a Redis the
// guard refuses is not written to. The slots are audited once claims are
// allowed again (audited_to has not moved).
//
// An audit with slots that is not stale has written (audited_to), so its
// answer tells readiness what a claim's would (noteClaim): a node whose
// slots are all claimed elsewhere (it reads records instead of claiming)
// is ready again once Redis takes writes, not only at its next claim. A
// write refusal it meets makes the node not ready as a claim's does.
func (l guardedLocker) Audit(ctx context.Context, req ledger.AuditRequest) (ledger.Audited, error) {
	if len(req.Slots) == 0 {
		return l.claimer.Audit(ctx, req)
	}
	if err := l.g.refusal(ctx); err != nil {
		return ledger.Audited{}, err
	}
	a, err := l.claimer.Audit(ctx, req)
	if err != nil || !a.Stale {
		l.g.noteClaim(err)
	}
	return a, err
}

// refusal returns nil when a claim may be sent, else the
// *ledger.ClaimRefusedError to return. Before the first readiness
// check has ended it waits for it (at start: milliseconds, bounded by ctx),
// so that no claim reaches a Redis whose policy has not been read.
func (g *guard) refusal(ctx context.Context) error {
	select {
	case <-g.checked:
	case <-ctx.Done():
	}
	v := g.verdict.Load()
	switch {
	case v == nil:
		return &ledger.ClaimRefusedError{Reason: ledger.SkipRedisError, Err: errNotVerified}
	case v.refused != nil:
		return v.refused
	}
	return nil
}

// markChecked ends the start-up wait of refusal (idempotent).
func (g *guard) markChecked() { g.checkOnce.Do(func() { close(g.checked) }) }

// known reports whether a policy decision has been made.
func (g *guard) known() bool { return g.verdict.Load() != nil }

// allows reports whether claims may be sent now.
func (g *guard) allows() bool { v := g.verdict.Load(); return v != nil && v.refused == nil }

// refusedState is the health state text while claims are refused
// ("unsafe: …"), or "" when they are not.
func (g *guard) refusedState() string {
	if v := g.verdict.Load(); v != nil && v.refused != nil {
		return v.state
	}
	return ""
}

// logStart warns at start that redis.allow_eviction is set.
func (g *guard) logStart() {
	if g.allowEviction {
		g.log.Warn("redis.allow_eviction is true: the node claims even if Redis may evict its keys; " +
			"an evicted state:JOB can make a slot run twice, an evicted lease lets runs overlap")
	}
}

// observe takes the result of a ServerInfo read (or a probe that found a
// Cluster node): it decides, logs the decision when it differs from the
// last one, and sets the gauges. A transient error (no answer) keeps the
// last decision.
func (g *guard) observe(infos []ServerInfo, err error) {
	d, ok := decidePolicy(infos, err, g.allowEviction)
	if !ok {
		return
	}
	v := &verdict{}
	if d.refuse {
		v.refused = &ledger.ClaimRefusedError{Reason: ledger.SkipRedisUnsafe, Err: errors.New(d.state)}
		v.state = d.state
	}
	g.verdict.Store(v)
	g.unsafe.Set(b2f(d.refuse))
	g.evictionAllowed.Set(b2f(d.evictionAllowed))
	if d.key != g.policyKey {
		g.policyKey = d.key
		g.log.Log(d.level, d.msg, d.fields...)
	}
}

// policyDecision is what decidePolicy concluded.
type policyDecision struct {
	key             string // identifies the decision: logged once per change
	refuse          bool
	evictionAllowed bool   // Redis may evict and allow_eviction lets us claim
	state           string // short health state while refused
	level           zapcore.Level
	msg             string
	fields          []zap.Field
}

// decidePolicy is the guard's rule, a pure function of one ServerInfo read
// (one entry per shard that owns job keys) or its error. ok is false for a
// transient error (the server did not answer): keep the last decision.
func decidePolicy(infos []ServerInfo, err error, allowEviction bool) (d policyDecision, ok bool) {
	_, isReply := ServerReply(err)
	switch {
	case errors.Is(err, ErrClusterNode):
		return policyDecision{key: "cluster_node", refuse: true, state: "unsafe: a Cluster node used as a standalone server",
			level: zapcore.ErrorLevel, fields: []zap.Field{zap.Error(err)},
			msg: "the redis server is a node of a Redis Cluster, used as a standalone server (redis.mode standalone, " +
				"given or inferred from one address): not claiming, every slot is skipped (redis_unsafe); keys on other " +
				"shards are redirected (MOVED). Fix: set redis.mode: cluster (one address is then a seed node), or list " +
				"the cluster's nodes in redis.addresses: [host:port, ...]"}, true
	case isReply && !IsNilReply(err):
		return unreadablePolicy(err, allowEviction), true
	case err != nil:
		return policyDecision{}, false
	}
	for _, i := range infos {
		if !i.Evicts() {
			continue
		}
		policy := i.MaxMemoryPolicy
		if policy == "" {
			policy = "(not reported)"
		}
		fields := []zap.Field{zap.String("maxmemory_policy", policy), zap.Int64("maxmemory", i.MaxMemory), zap.String("key", i.Key)}
		if allowEviction {
			return policyDecision{key: "evicts-allowed " + policy, evictionAllowed: true, level: zapcore.WarnLevel, fields: fields,
				msg: fmt.Sprintf("redis may evict cronlock's keys (maxmemory-policy %s with a maxmemory limit); claiming "+
					"anyway because redis.allow_eviction is true: an evicted state:JOB can make a slot run twice and "+
					"restart the fencing tokens, an evicted lease lets runs overlap", policy)}, true
		}
		return policyDecision{key: "evicts " + policy, refuse: true, state: "unsafe: maxmemory-policy " + policy,
			level: zapcore.ErrorLevel, fields: fields,
			msg: fmt.Sprintf("redis may evict cronlock's keys (maxmemory-policy %s with a maxmemory limit): not claiming, "+
				"every slot is skipped (redis_unsafe). Fix: CONFIG SET maxmemory-policy noeviction (and set it in "+
				"redis.conf), or set redis.allow_eviction: true to claim anyway", policy)}, true
	}
	fields := []zap.Field{zap.Int("shards", len(infos))}
	if len(infos) > 0 {
		fields = append(fields, zap.String("maxmemory_policy", infos[0].MaxMemoryPolicy), zap.Int64("maxmemory", infos[0].MaxMemory))
	}
	return policyDecision{key: "ok", level: zapcore.InfoLevel, fields: fields,
		msg: "redis policy guard: redis evicts none of cronlock's keys; claiming"}, true
}

// unreadablePolicy decides when the server refused INFO (renamed away, or
// denied to the ACL user): the policy is unknown.
func unreadablePolicy(err error, allowEviction bool) policyDecision {
	fields := []zap.Field{zap.Error(err)}
	if allowEviction {
		return policyDecision{key: "unreadable-allowed", evictionAllowed: true, level: zapcore.WarnLevel, fields: fields,
			msg: "cannot read maxmemory-policy from redis INFO; claiming anyway because redis.allow_eviction is true: " +
				"if Redis evicts cronlock's keys a slot can run twice and runs can overlap"}
	}
	return policyDecision{key: "unreadable", refuse: true, state: "unsafe: maxmemory-policy unreadable",
		level: zapcore.ErrorLevel, fields: fields,
		msg: "cannot read maxmemory-policy from redis INFO: not claiming, every slot is skipped (redis_unsafe), since " +
			"an evicting policy breaks exactly-once. Fix: allow INFO to cronlock's Redis user (ACL +info), or set " +
			"redis.allow_eviction: true to claim without the check"}
}

// setSavePoints records a CONFIG GET save answer (read at connect).
func (g *guard) setSavePoints(save string, err error) {
	g.save, g.saveErr, g.saveRead = save, err, true
}

// observeReplicas takes a ServerInfo read: with redis.min_replicas_acked
// set, a shard with fewer connected replicas makes replicaShort say so, and
// the change is logged once (error; info when enough are back).
func (g *guard) observeReplicas(infos []ServerInfo) {
	if g.minReplicas <= 0 {
		return
	}
	short, fields := "", []zap.Field{zap.Int("min_replicas_acked", g.minReplicas)}
	for _, i := range infos {
		if i.Replicas < g.minReplicas {
			short = fmt.Sprintf("not replicated: %d of the %d replicas of redis.min_replicas_acked connected", i.Replicas, g.minReplicas)
			fields = append(fields, zap.Int("replicas", i.Replicas), zap.String("key", i.Key))
			break
		}
	}
	switch {
	case short == g.replicaShort:
	case short != "":
		g.log.Error("redis has fewer connected replicas than redis.min_replicas_acked: every won claim is skipped "+
			"(not_replicated) and the node is not ready until enough replicas connect. Fix: attach replicas, or "+
			"lower redis.min_replicas_acked", fields...)
	default:
		g.log.Info("redis has enough connected replicas for redis.min_replicas_acked again", fields...)
	}
	g.replicaShort = short
}

// observePersistence reports whether the servers that own the job keys
// persist them: sets cronlock_redis_persistent and logs the verdict once
// per change (a warning when a Redis restart would lose the claimed-slot
// record).
func (g *guard) observePersistence(infos []ServerInfo) {
	if !g.saveRead || len(infos) == 0 {
		return
	}
	value, level, msg := decidePersistence(infos, g.save, g.saveErr)
	g.persistent.Set(value)
	if key := fmt.Sprint(value, msg); key != g.persistKey {
		g.persistKey = key
		fields := []zap.Field{zap.Bool("aof", allAOF(infos)), zap.String("save", g.save)}
		if g.saveErr != nil {
			fields = append(fields, zap.NamedError("save_error", g.saveErr))
		}
		g.log.Log(level, msg, fields...)
	}
}

// decidePersistence is the persistence verdict, a pure function: 1 when
// every shard keeps its data across a restart (AOF, or RDB save points
// from CONFIG GET save, or, where CONFIG is disabled, an RDB snapshot seen
// in INFO), 0 when one keeps nothing, NaN when that cannot be told (AOF
// off, CONFIG refused, no snapshot seen).
func decidePersistence(infos []ServerInfo, save string, saveErr error) (float64, zapcore.Level, string) {
	unknown := false
	for _, i := range infos {
		switch {
		case i.AOF || i.SnapshotSeen || (saveErr == nil && save != ""):
		case saveErr != nil:
			unknown = true
		default:
			return 0, zapcore.WarnLevel, "redis persists nothing (appendonly no, save \"\"): a Redis restart loses the " +
				"ledger; the nodes that saw it detect the loss and skip the slots around it (state_lost), and no node " +
				"that saw nothing can tell; enable AOF (appendonly yes) for exactly-once across Redis restarts"
		}
	}
	if unknown {
		return math.NaN(), zapcore.WarnLevel, "redis persistence unknown: AOF is off and the RDB save points cannot " +
			"be read (CONFIG GET save failed); unless RDB snapshots are on, a Redis restart loses the ledger"
	}
	return 1, zapcore.InfoLevel, "redis persists the ledger (AOF or RDB snapshots)"
}

func allAOF(infos []ServerInfo) bool {
	for _, i := range infos {
		if !i.AOF {
			return false
		}
	}
	return len(infos) > 0
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
