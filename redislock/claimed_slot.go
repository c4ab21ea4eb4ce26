package redislock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// ClaimedSlot returns job's claimed-slot record, state.slot (the highest
// slot claimed or skipped, Unix seconds), or 0 when there is none: one
// HGET, bounded by the call timeout unless ctx has a deadline. A node at
// node.max_parallel reads it to tell whether another node claimed a slot
// (actors.SlotPeeker).
func (r *Redis) ClaimedSlot(ctx context.Context, job string) (int64, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	v, err := r.c.Do(ctx, r.c.B().Hget().Key(r.key("state", job)).Field("slot").Build()).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("claimed slot %q: %w", job, err)
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("claimed slot %q: state.slot %q is not a number: %w", job, v, err)
	}
	return s, nil
}

// ClaimedSlot returns job's claimed slot (0 when none), as the Redis
// backend's.
func (m *Memory) ClaimedSlot(ctx context.Context, job string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("claimed slot %q: %w", job, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.job(job).slot, nil
}
