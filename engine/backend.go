package engine

import (
	"context"
	"strings"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/memory"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
)

// Backend is what the engine needs from a lock backend beyond
// ledger.Locker: the readiness check, liveness, server time for
// clock-skew checks, and Close.
type Backend interface {
	claimer
	ledger.ReadinessChecker
	Ping(ctx context.Context) error
	Time(ctx context.Context) (time.Time, error)
	Close()
}

var (
	_ Backend = (*redislock.Backend)(nil)
	_ Backend = (*memory.Memory)(nil)
)

type backend struct {
	Backend
	kind  string             // "redis" | "memory"
	addr  string             // for logs; never holds a password
	redis *redislock.Backend // the Redis backend; nil for the memory backend
}

// claimer is what the job actors, the janitor (Unhander: a pending slot's
// lease a lost finish handed on), the auditor and `history` use of a
// backend. The Redis backend's claims and audits go through its policy
// guard (redislock.Backend).
type claimer interface {
	ledger.Locker
	ledger.Unhander
	Occurrences(ctx context.Context, job string, from, to int64) ([]ledger.Occurrence, error)
}

func (b backend) close() { b.Close() }

// newBackend builds the backend selected by lock.backend. A Redis client is
// created without waiting for Redis (an unreachable Redis at start is not
// fatal: redislock.Open).
func newBackend(cfg *config.Config, log *zap.Logger, now func() time.Time) (backend, error) {
	if cfg.Lock.Backend != "redis" {
		return backend{Backend: memory.NewMemory(), kind: "memory"}, nil
	}
	opts, err := RedisOptions(cfg)
	if err != nil {
		return backend{}, err
	}
	r, err := redislock.Open(opts, redislock.Policy{AllowEviction: cfg.Redis.AllowEviction,
		MaxClockSkew: cfg.Node.MaxClockSkew, Now: now}, log)
	if err != nil {
		return backend{}, err
	}
	return backend{Backend: r, kind: "redis", addr: strings.Join(opts.Addresses, ","), redis: r}, nil
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
	t, err := redislock.TLSConfig(redislock.TLSFiles{CAFile: rc.TLS.CAFile, CertFile: rc.TLS.CertFile,
		KeyFile: rc.TLS.KeyFile, ServerName: rc.TLS.ServerName, InsecureSkipVerify: rc.TLS.InsecureSkipVerify})
	if err != nil {
		return o, err
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
