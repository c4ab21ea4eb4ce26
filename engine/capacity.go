package engine

import (
	"context"
	"fmt"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/redislock"
)

// node.max_parallel (package nodeload): a run at the limit reads the job's
// claimed slot through the job actors' Locker to tell node_busy from
// claimed_elsewhere.

var (
	_ actors.SlotPeeker = (*redislock.Redis)(nil)
	_ actors.SlotPeeker = (*redislock.Memory)(nil)
	_ actors.SlotPeeker = (*lazyRedis)(nil)
	_ actors.SlotPeeker = guardedLocker{}
)

// ClaimedSlot reads the claimed slot; a read, so the guard lets it pass.
func (l guardedLocker) ClaimedSlot(ctx context.Context, job string) (int64, error) {
	p, ok := l.claimer.(actors.SlotPeeker)
	if !ok {
		return 0, fmt.Errorf("claimed slot %q: backend %T cannot read it", job, l.claimer)
	}
	return p.ClaimedSlot(ctx, job)
}

func (l *lazyRedis) ClaimedSlot(ctx context.Context, job string) (int64, error) {
	r, err := l.client()
	if err != nil {
		return 0, err
	}
	return r.ClaimedSlot(ctx, job)
}
