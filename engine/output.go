package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/memory"
)

var (
	_ ledger.OutputStore = (*lazyRedis)(nil)
	_ ledger.OutputStore = (*memory.Output)(nil)
)

// outputStore is where runs keep and publish their output: Redis (through
// the lazy client when it is one), or on the memory backend the daemon's
// own memory.Output.
func outputStore(b backend) ledger.OutputStore {
	if s, ok := b.Backend.(ledger.OutputStore); ok {
		return s
	}
	return memory.NewOutput()
}

// output returns the output store for the API and the dashboard.
func (e *Engine) output() (ledger.OutputStore, error) { return e.out, nil }

// outputKeys is the output section as a reload compares it.
func outputKeys(cfg *config.Config) string {
	return fmt.Sprint(cfg.Output.MaxBytes, cfg.Output.Redact)
}

// StoreOutput is redislock.Redis.StoreOutput once a client exists.
func (l *lazyRedis) StoreOutput(ctx context.Context, job, occ string, out []byte, ttl time.Duration) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	return c.StoreOutput(ctx, job, occ, out, ttl)
}

// Output is redislock.Redis.Output once a client exists.
func (l *lazyRedis) Output(ctx context.Context, job, occ string) ([]byte, error) {
	c, err := l.client()
	if err != nil {
		return nil, err
	}
	return c.Output(ctx, job, occ)
}

// PublishOutput is redislock.Redis.PublishOutput once a client exists.
func (l *lazyRedis) PublishOutput(ctx context.Context, job, occ string, ch ledger.OutputChunk, ttl time.Duration) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	return c.PublishOutput(ctx, job, occ, ch, ttl)
}

// FollowOutput is redislock.Redis.FollowOutput once a client exists.
func (l *lazyRedis) FollowOutput(ctx context.Context, job, occ, after string, block time.Duration) ([]ledger.OutputChunk, error) {
	c, err := l.client()
	if err != nil {
		return nil, err
	}
	return c.FollowOutput(ctx, job, occ, after, block)
}
