package redislock

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cronlock/cronlock/ledger"
	"github.com/redis/rueidis"
)

// Hook results (ledger.HookStore): the list P hooks:J:ID (ID the
// occurrence's ledger id, the job's hash tag in Cluster mode, as P
// out:J:ID), one JSON entry per hook, capped at ledger.MaxHookResults and
// expiring with the ledger's retention.

var (
	_ ledger.HookStore = (*Redis)(nil)
	_ ledger.HookStore = (*Lazy)(nil)
)

// StoreHookResult appends r (RPUSH, LTRIM, PEXPIRE) and indexes the
// occurrence (keptIndex): one round trip, a second when older occurrences
// go.
func (r *Redis) StoreHookResult(ctx context.Context, job, occ string, h ledger.HookResult, keep ledger.Retention) error {
	data, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("store hook result %s %s: %w", job, occ, err)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	key := r.outputKey("hooks", job, occ)
	age, _ := keep.Resolved()
	cmds := append(rueidis.Commands{r.c.B().Rpush().Key(key).Element(rueidis.BinaryString(data)).Build(),
		r.c.B().Ltrim().Key(key).Start(-ledger.MaxHookResults).Stop(-1).Build(),
		r.c.B().Pexpire().Key(key).Milliseconds(max(age.Milliseconds(), 1)).Build()}, r.indexKept(job, occ, keep)...)
	if err := r.doKept(ctx, job, keep, cmds); err != nil {
		return fmt.Errorf("store hook result %s %s: %w", job, occ, err)
	}
	return nil
}

// HookResults reads the list (LRANGE). An entry that does not parse is
// skipped: it cannot be shown.
func (r *Redis) HookResults(ctx context.Context, job, occ string) ([]ledger.HookResult, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	list, err := r.c.Do(ctx, r.c.B().Lrange().Key(r.outputKey("hooks", job, occ)).Start(0).Stop(-1).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("hook results %s %s: %w", job, occ, err)
	}
	out := make([]ledger.HookResult, 0, len(list))
	for _, s := range list {
		var h ledger.HookResult
		if json.Unmarshal([]byte(s), &h) == nil {
			out = append(out, h)
		}
	}
	return out, nil
}

// StoreHookResult is Redis.StoreHookResult once a client exists.
func (l *Lazy) StoreHookResult(ctx context.Context, job, occ string, h ledger.HookResult, keep ledger.Retention) error {
	c, err := l.Client()
	if err != nil {
		return err
	}
	return c.StoreHookResult(ctx, job, occ, h, keep)
}

// HookResults is Redis.HookResults once a client exists.
func (l *Lazy) HookResults(ctx context.Context, job, occ string) ([]ledger.HookResult, error) {
	c, err := l.Client()
	if err != nil {
		return nil, err
	}
	return c.HookResults(ctx, job, occ)
}
