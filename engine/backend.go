package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/cronlock/cronlock/ledger/memory"
	"os"
	"strings"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
)

// Backend is what the engine needs from a lock backend beyond
// ledger.Locker: liveness, server time for clock-skew checks, and Close.
type Backend interface {
	claimer
	Ping(ctx context.Context) error
	Time(ctx context.Context) (time.Time, error)
	Close()
}

var (
	_ Backend = (*redislock.Redis)(nil)
	_ Backend = (*memory.Memory)(nil)
	_ Backend = (*lazyRedis)(nil)
)

var (
	_ serverChecks = (*redislock.Redis)(nil)
	_ serverChecks = (*lazyRedis)(nil)
)

// serverChecks is what the health monitor reads from a Redis backend
// besides Ping and Time (docs/protocol.md, "Redis policy guard"): whether
// a claim of the jobs could run now, and the server settings the guard
// decides on.
type serverChecks interface {
	Probe(ctx context.Context, jobs []string) error
	ServerInfo(ctx context.Context, jobs []string) ([]redislock.ServerInfo, error)
	SavePoints(ctx context.Context) (string, error)
}

type backend struct {
	Backend
	kind   string       // "redis" | "memory"
	addr   string       // for logs; never holds a password
	checks serverChecks // nil for the memory backend
	guard  *guard       // nil for the memory backend
	// seed is the first configured address and tls the client's TLS
	// configuration (nil: off), for the explanation of a failure to
	// connect (redislock.ExplainTLS).
	seed string
	tls  *tls.Config
}

// claimer is what the job actors, the janitor (Unhander: a pending slot's
// lease a lost finish handed on), the auditor and `history` use of a
// backend.
type claimer interface {
	ledger.Locker
	ledger.Unhander
	Occurrences(ctx context.Context, job string, from, to int64) ([]ledger.Occurrence, error)
}

// locker is the claimer of the job actors, the janitor and the auditor:
// for Redis, claims and audits go through the policy guard.
func (b backend) locker() claimer {
	if b.guard != nil {
		return guardedLocker{claimer: b.Backend, g: b.guard}
	}
	return b.Backend
}

func (b backend) close() { b.Close() }

// newBackend builds the backend selected by lock.backend. A Redis client is
// created without waiting for Redis (an unreachable Redis at
// start is not fatal).
func newBackend(cfg *config.Config, log *zap.Logger) (backend, error) {
	if cfg.Lock.Backend != "redis" {
		return backend{Backend: memory.NewMemory(), kind: "memory"}, nil
	}
	opts, err := RedisOptions(cfg)
	if err != nil {
		return backend{}, err
	}
	addr := strings.Join(opts.Addresses, ",")
	g := newGuard(log, cfg.Redis.AllowEviction)
	g.minReplicas = cfg.Redis.MinReplicasAcked
	if redislock.InferMode(opts) != redislock.ModeStandalone {
		// Sentinel and Cluster clients need a reachable node to be created:
		// create it lazily so that the daemon starts (not ready) without one.
		l := &lazyRedis{opts: opts}
		if _, err := l.client(); err != nil {
			log.Warn("redis client not created yet; retrying in the background", zap.String("redis", addr), zap.Error(err))
		}
		return backend{Backend: l, kind: "redis", addr: addr, checks: l, guard: g, seed: opts.Addresses[0], tls: opts.TLS}, nil
	}
	r, err := redislock.New(opts)
	if err != nil {
		return backend{}, fmt.Errorf("redis client: %w", err)
	}
	return backend{Backend: r, kind: "redis", addr: addr, checks: r, guard: g, seed: opts.Addresses[0], tls: opts.TLS}, nil
}

// RedisOptions maps the config's redis section to redislock options,
// loading TLS files. Errors name the file that could not be used.
func RedisOptions(cfg *config.Config) (redislock.Options, error) {
	rc := cfg.Redis
	addrs := rc.Addresses
	if len(addrs) == 0 {
		addrs = []string{rc.Address}
	}
	o := redislock.Options{Addresses: addrs, Username: rc.Username, Password: rc.Password, DB: rc.DB,
		KeyPrefix: rc.KeyPrefix, SentinelMaster: rc.SentinelMaster, DialTimeout: rc.DialTimeout, Mode: rc.EffectiveMode(),
		MinReplicasAcked: rc.MinReplicasAcked, ReplicaAckTimeout: rc.ReplicaAckTimeout}
	if !rc.TLS.Enabled {
		return o, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: rc.TLS.ServerName,
		InsecureSkipVerify: rc.TLS.InsecureSkipVerify} //nolint:gosec // operator's explicit choice
	if rc.TLS.CAFile != "" {
		pem, err := os.ReadFile(rc.TLS.CAFile)
		if err != nil {
			return o, fmt.Errorf("redis.tls.ca_file: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return o, fmt.Errorf("redis.tls.ca_file %s: no PEM certificate found", rc.TLS.CAFile)
		}
	}
	if rc.TLS.CertFile != "" || rc.TLS.KeyFile != "" {
		c, err := tls.LoadX509KeyPair(rc.TLS.CertFile, rc.TLS.KeyFile)
		if err != nil {
			return o, fmt.Errorf("redis.tls.cert_file/key_file: %w", err)
		}
		t.Certificates = []tls.Certificate{c}
	}
	o.TLS = t
	return o, nil
}

// claimTimeout bounds one claim: actors.DefaultClaimTimeout, plus the WAIT
// for replicas when redis.min_replicas_acked is set (a won claim is then
// two round trips, the second up to redis.replica_ack_timeout).
func claimTimeout(cfg *config.Config) time.Duration {
	if cfg.Lock.Backend == "redis" && cfg.Redis.MinReplicasAcked > 0 {
		return actors.DefaultClaimTimeout + cfg.Redis.ReplicaAckTimeout
	}
	return actors.DefaultClaimTimeout
}
