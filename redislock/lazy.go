package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// ErrNotConnected is returned by Lazy calls until a client exists.
var ErrNotConnected = errors.New("redislock: redis client not created yet")

// Lazy creates its Redis client on first use and retries with backoff
// (1 s doubling to 30 s) until it succeeds. Sentinel and Cluster clients
// must reach a node to be created, and an unreachable
// Redis at start must not stop the daemon: until then every
// call fails fast with ErrNotConnected, so slots are skipped (redis_error)
// and /readyz says not ready. Safe for concurrent use; a call never waits
// for another caller's connection attempt.
type Lazy struct {
	opts Options
	r    atomic.Pointer[Redis]

	mu      sync.Mutex // held while connecting
	next    time.Time  // earliest next attempt
	wait    time.Duration
	lastErr error
}

// NewLazy returns a Lazy for opts; it does no I/O.
func NewLazy(opts Options) *Lazy { return &Lazy{opts: opts} }

// connected returns a Lazy whose client, r, was created from opts.
func connected(opts Options, r *Redis) *Lazy {
	l := &Lazy{opts: opts}
	l.r.Store(r)
	return l
}

// Client returns the client, creating it if none exists and the backoff
// allows an attempt now (New; it blocks for that attempt only). Errors
// wrap ErrNotConnected, and the creation's error when there was one.
func (l *Lazy) Client() (*Redis, error) {
	if r := l.r.Load(); r != nil {
		return r, nil
	}
	if !l.mu.TryLock() {
		return nil, ErrNotConnected
	}
	defer l.mu.Unlock()
	if r := l.r.Load(); r != nil {
		return r, nil
	}
	if time.Now().Before(l.next) {
		return nil, fmt.Errorf("%w: %w", ErrNotConnected, l.lastErr)
	}
	r, err := New(l.opts)
	if err != nil {
		l.lastErr = err
		l.wait = min(max(2*l.wait, time.Second), 30*time.Second)
		l.next = time.Now().Add(l.wait)
		return nil, fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	l.r.Store(r)
	return r, nil
}

func (l *Lazy) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	r, err := l.Client()
	if err != nil {
		return ledger.Claim{}, err
	}
	return r.Claim(ctx, req)
}

func (l *Lazy) Peek(ctx context.Context, job string, slot int64) (ledger.Claim, bool, error) {
	r, err := l.Client()
	if err != nil {
		return ledger.Claim{}, false, err
	}
	return r.Peek(ctx, job, slot)
}

func (l *Lazy) Renew(ctx context.Context, job, owner string, ttl time.Duration) (int64, error) {
	r, err := l.Client()
	if err != nil {
		return 0, err
	}
	return r.Renew(ctx, job, owner, ttl)
}

func (l *Lazy) Unhand(ctx context.Context, job, owner string) (int64, bool, error) {
	r, err := l.Client()
	if err != nil {
		return 0, false, err
	}
	return r.Unhand(ctx, job, owner)
}

func (l *Lazy) Release(ctx context.Context, job, owner string) (bool, error) {
	r, err := l.Client()
	if err != nil {
		return false, err
	}
	return r.Release(ctx, job, owner)
}

func (l *Lazy) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	r, err := l.Client()
	if err != nil {
		return ledger.Finished{}, err
	}
	return r.Finish(ctx, req)
}

func (l *Lazy) Ping(ctx context.Context) error {
	r, err := l.Client()
	if err != nil {
		return err
	}
	return r.Ping(ctx)
}

func (l *Lazy) Time(ctx context.Context) (time.Time, error) {
	r, err := l.Client()
	if err != nil {
		return time.Time{}, err
	}
	return r.Time(ctx)
}

func (l *Lazy) Probe(ctx context.Context, jobs []string) error {
	r, err := l.Client()
	if err != nil {
		return err
	}
	return r.Probe(ctx, jobs)
}

func (l *Lazy) ServerInfo(ctx context.Context, jobs []string) ([]ServerInfo, error) {
	r, err := l.Client()
	if err != nil {
		return nil, err
	}
	return r.ServerInfo(ctx, jobs)
}

func (l *Lazy) SavePoints(ctx context.Context) (string, error) {
	r, err := l.Client()
	if err != nil {
		return "", err
	}
	return r.SavePoints(ctx)
}

// Close closes the client if one was created.
func (l *Lazy) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.r.Load(); r != nil {
		r.Close()
	}
}
