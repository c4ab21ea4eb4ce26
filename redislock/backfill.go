package redislock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
)

// Backfilled returns the slots (Unix seconds, ascending) in [from, to]
// that a backfill claimed for job (docs/protocol.md, "Backfill"): one
// ZRANGE BYSCORE of P backfill:J.
func (r *Redis) Backfilled(ctx context.Context, job string, from, to int64) ([]int64, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	members, err := r.c.Do(ctx, r.c.B().Zrange().Key(r.key("backfill", job)).Min(strconv.FormatInt(from, 10)).
		Max(strconv.FormatInt(to, 10)).Byscore().Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("backfilled %q: %w", job, err)
	}
	out := make([]int64, 0, len(members))
	for _, m := range members {
		n, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("backfilled %q: member %q: %w", job, m, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// Backfilled returns the backfilled slots in [from, to]; see
// Redis.Backfilled.
func (m *Memory) Backfilled(ctx context.Context, job string, from, to int64) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("backfilled %q: %w", job, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int64
	for s := range m.job(job).backfilled {
		if s >= from && s <= to {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, nil
}
