package redislock

import (
	"context"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

var (
	_ ledger.OutputStore     = (*Lazy)(nil)
	_ ledger.OutcomeRecorder = (*Lazy)(nil)
)

// StoreOutput is Redis.StoreOutput once a client exists.
func (l *Lazy) StoreOutput(ctx context.Context, job, occ string, out []byte, keep ledger.Retention) error {
	c, err := l.Client()
	if err != nil {
		return err
	}
	return c.StoreOutput(ctx, job, occ, out, keep)
}

// Output is Redis.Output once a client exists.
func (l *Lazy) Output(ctx context.Context, job, occ string) ([]byte, error) {
	c, err := l.Client()
	if err != nil {
		return nil, err
	}
	return c.Output(ctx, job, occ)
}

// PublishOutput is Redis.PublishOutput once a client exists.
func (l *Lazy) PublishOutput(ctx context.Context, job, occ string, ch ledger.OutputChunk, ttl time.Duration) error {
	c, err := l.Client()
	if err != nil {
		return err
	}
	return c.PublishOutput(ctx, job, occ, ch, ttl)
}

// FollowOutput is Redis.FollowOutput once a client exists.
func (l *Lazy) FollowOutput(ctx context.Context, job, occ, after string, block time.Duration) ([]ledger.OutputChunk, error) {
	c, err := l.Client()
	if err != nil {
		return nil, err
	}
	return c.FollowOutput(ctx, job, occ, after, block)
}

// RecordOutcome is Redis.RecordOutcome once a client exists.
func (l *Lazy) RecordOutcome(ctx context.Context, job string, slot int64, runID string, ok bool) (string, error) {
	c, err := l.Client()
	if err != nil {
		return "", err
	}
	return c.RecordOutcome(ctx, job, slot, runID, ok)
}
