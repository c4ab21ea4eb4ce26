package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/redislock"
)

// errNotConnected is returned by lazyRedis calls until a client exists.
var errNotConnected = errors.New("engine: redis client not created yet")

// lazyRedis creates its Redis client on first use and retries with backoff
// (1 s doubling to 30 s) until it succeeds. Sentinel and Cluster clients
// must reach a node to be created, and an unreachable
// Redis at start must not stop the daemon: until then every
// call fails fast with errNotConnected, so slots are skipped (redis_error)
// and /readyz says not ready. Safe for concurrent use; a call never waits
// for another caller's connection attempt.
type lazyRedis struct {
	opts redislock.Options
	r    atomic.Pointer[redislock.Redis]

	mu      sync.Mutex // held while connecting
	next    time.Time  // earliest next attempt
	wait    time.Duration
	lastErr error
}

func (l *lazyRedis) client() (*redislock.Redis, error) {
	if r := l.r.Load(); r != nil {
		return r, nil
	}
	if !l.mu.TryLock() {
		return nil, errNotConnected
	}
	defer l.mu.Unlock()
	if r := l.r.Load(); r != nil {
		return r, nil
	}
	if time.Now().Before(l.next) {
		return nil, fmt.Errorf("%w: %w", errNotConnected, l.lastErr)
	}
	r, err := redislock.New(l.opts)
	if err != nil {
		l.lastErr = err
		l.wait = min(max(2*l.wait, time.Second), 30*time.Second)
		l.next = time.Now().Add(l.wait)
		return nil, fmt.Errorf("%w: %w", errNotConnected, err)
	}
	l.r.Store(r)
	return r, nil
}

func (l *lazyRedis) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	r, err := l.client()
	if err != nil {
		return ledger.Claim{}, err
	}
	return r.Claim(ctx, req)
}

func (l *lazyRedis) Renew(ctx context.Context, job, owner string, ttl time.Duration) (int64, error) {
	r, err := l.client()
	if err != nil {
		return 0, err
	}
	return r.Renew(ctx, job, owner, ttl)
}

func (l *lazyRedis) Unhand(ctx context.Context, job, owner string) (int64, bool, error) {
	r, err := l.client()
	if err != nil {
		return 0, false, err
	}
	return r.Unhand(ctx, job, owner)
}

func (l *lazyRedis) Release(ctx context.Context, job, owner string) (bool, error) {
	r, err := l.client()
	if err != nil {
		return false, err
	}
	return r.Release(ctx, job, owner)
}

func (l *lazyRedis) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	r, err := l.client()
	if err != nil {
		return ledger.Finished{}, err
	}
	return r.Finish(ctx, req)
}

func (l *lazyRedis) Ping(ctx context.Context) error {
	r, err := l.client()
	if err != nil {
		return err
	}
	return r.Ping(ctx)
}

func (l *lazyRedis) Time(ctx context.Context) (time.Time, error) {
	r, err := l.client()
	if err != nil {
		return time.Time{}, err
	}
	return r.Time(ctx)
}

func (l *lazyRedis) Probe(ctx context.Context, jobs []string) error {
	r, err := l.client()
	if err != nil {
		return err
	}
	return r.Probe(ctx, jobs)
}

func (l *lazyRedis) ServerInfo(ctx context.Context, jobs []string) ([]redislock.ServerInfo, error) {
	r, err := l.client()
	if err != nil {
		return nil, err
	}
	return r.ServerInfo(ctx, jobs)
}

func (l *lazyRedis) SavePoints(ctx context.Context) (string, error) {
	r, err := l.client()
	if err != nil {
		return "", err
	}
	return r.SavePoints(ctx)
}

// Close closes the client if one was created.
func (l *lazyRedis) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.r.Load(); r != nil {
		r.Close()
	}
}
