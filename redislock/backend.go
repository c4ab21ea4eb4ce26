package redislock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cronlock/cronlock/internal/cpuwait"
	"github.com/cronlock/cronlock/ledger"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Policy is what the daemon's Redis backend enforces besides the protocol
// (docs/protocol.md, "Redis policy guard").
type Policy struct {
	AllowEviction bool          // redis.allow_eviction: claim even if Redis may evict the keys
	MaxClockSkew  time.Duration // node.max_clock_skew: the skew that is warned about
	// Now is the wall clock slots are computed on, compared with Redis
	// TIME (nil: time.Now).
	Now func() time.Time
}

// Backend is the Redis backend as the daemon runs it: the client (Lazy:
// created at Open for a standalone server, else on first use), the policy
// guard in front of its claims and audits, and the readiness check. It is
// the ledger.Locker the engine hands to the job actors, the janitor and the
// auditor: a claim goes from a run to here and to Redis. A claim the guard
// refuses is never sent (its error is a *ledger.ClaimRefusedError); Renew,
// Peek (a read), Release, Unhand and Finish pass through, so that runs already going keep
// and release their leases. Safe for concurrent use, except CheckReady (one
// goroutine). It owns no goroutines or timers.
type Backend struct {
	*Lazy
	locker guardedLocker
	mon    *monitor
}

var (
	_ ledger.Locker           = (*Backend)(nil)
	_ ledger.Unhander         = (*Backend)(nil)
	_ ledger.Peeker           = (*Backend)(nil)
	_ ledger.ReadinessChecker = (*Backend)(nil)
)

// Open returns the Redis backend for opts. A standalone client is created
// now, without waiting for Redis (New; an error is returned only for what
// no retry fixes). Sentinel and Cluster clients need a reachable node to
// be created: Open then creates the client lazily (Lazy), logs a warning
// when the first attempt fails and returns no error, so that the daemon
// starts, not ready. It warns once when p.AllowEviction is set.
func Open(opts Options, p Policy, log *zap.Logger) (*Backend, error) {
	var l *Lazy
	addr := strings.Join(opts.Addresses, ",")
	if InferMode(opts) != ModeStandalone {
		l = NewLazy(opts)
		if _, err := l.Client(); err != nil {
			log.Warn("redis client not created yet; retrying in the background", zap.String("redis", addr), zap.Error(err))
		}
	} else {
		r, err := New(opts)
		if err != nil {
			return nil, fmt.Errorf("redis client: %w", err)
		}
		l = connected(opts, r)
	}
	g := newGuard(log, p.AllowEviction)
	g.minReplicas = opts.MinReplicasAcked
	g.logStart()
	now := p.Now
	if now == nil {
		now = time.Now
	}
	var seed string
	if len(opts.Addresses) > 0 {
		seed = opts.Addresses[0]
	}
	mon := &monitor{log: log, c: l, guard: g, maxSkew: p.MaxClockSkew, now: now, seed: seed, tls: opts.TLS,
		stalls: cpuwait.NewMeter(), stallMaxFor: stallMaxFor}
	return &Backend{Lazy: l, locker: guardedLocker{claimer: l, g: g}, mon: mon}, nil
}

// Claim asks the policy guard, then Redis (guardedLocker.Claim).
func (b *Backend) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	return b.locker.Claim(ctx, req)
}

// Finish passes through; an answered finish is noted for the readiness
// probe (guardedLocker.Finish).
func (b *Backend) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	return b.locker.Finish(ctx, req)
}

// Peek reads a slot's record (Redis.Peek); an answer is noted like an
// answered claim (answeredSince): at a herd, the lower-ranked nodes' reads
// are much of what Redis answers them.
func (b *Backend) Peek(ctx context.Context, job string, slot int64) (ledger.Claim, bool, error) {
	c, found, err := b.Lazy.Peek(ctx, job, slot)
	if err == nil {
		b.locker.g.noteAnswer()
	}
	return c, found, err
}

// Audit is refused while the guard refuses claims (guardedLocker.Audit).
func (b *Backend) Audit(ctx context.Context, req ledger.AuditRequest) (ledger.Audited, error) {
	return b.locker.Audit(ctx, req)
}

// CheckReady runs one readiness check (monitor.check): the probe, the
// server's settings when due, the clock skew when due. It blocks for its
// round trips (each bounded: 1 s for the probe, 2 s for the reads). Called
// by one goroutine at a time (the engine's health monitor, every second).
func (b *Backend) CheckReady(ctx context.Context, jobs []string) ledger.Readiness {
	return b.mon.check(ctx, jobs)
}

// StopChecks ends the wait of claims for the first readiness check: call
// it when no more checks will run (idempotent), so that a claim made then
// is refused (redis_error) instead of waiting out its context.
func (b *Backend) StopChecks() { b.mon.guard.markChecked() }

// Register adds the guard's gauges (cronlock_redis_unsafe,
// cronlock_redis_eviction_allowed, cronlock_redis_persistent) to reg.
func (b *Backend) Register(reg prometheus.Registerer) { b.mon.guard.register(reg) }

// TLSFiles are the files and settings of redis.tls.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
	ServerName                string
	InsecureSkipVerify        bool
}

// TLSConfig loads f into a client TLS configuration (TLS 1.2 or later).
// Errors name the setting whose file could not be used.
func TLSConfig(f TLSFiles) (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName,
		InsecureSkipVerify: f.InsecureSkipVerify} //nolint:gosec // operator's explicit choice
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("redis.tls.ca_file: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redis.tls.ca_file %s: no PEM certificate found", f.CAFile)
		}
	}
	if f.CertFile != "" || f.KeyFile != "" {
		c, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("redis.tls.cert_file/key_file: %w", err)
		}
		t.Certificates = []tls.Certificate{c}
	}
	return t, nil
}
