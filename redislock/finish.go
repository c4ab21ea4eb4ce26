package redislock

import (
	"context"
	"errors"
	"fmt"
	"github.com/cronlock/cronlock/actors"
	"strconv"
)

// Finish ends a run in ONE round trip (a winning run costs one claim and
// one release): it releases the lease if it still holds owner
// (compare-and-DEL; owner "" = the run held no lease, overlap: allow) and
// appends rec to the capped history stream and copies its fields (but the
// output tail) into the state hash as last_<field>. released reports
// whether a lease was deleted. Use a fresh ctx with its own timeout, never
// a run's cancelled one. On error nothing is known: the lease may or may not
// have been released (retry the release alone).
func (r *Redis) Finish(ctx context.Context, job, owner string, rec actors.RunRecord) (released bool, err error) {
	if job == "" {
		return false, errors.New("finish: empty job name")
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	args := append([]string{strconv.Itoa(r.historyLen), owner}, encodeRecord(rec)...)
	n, err := finishScript.Exec(ctx, r.c, []string{r.key("job", job), r.key("history", job), r.key("state", job)},
		args).AsInt64()
	if err != nil {
		return false, fmt.Errorf("finish %q: %w", job, explainScript(err))
	}
	return n == 1, nil
}

// Finish releases the lease (if owner holds it) and records rec; see
// Redis.Finish.
func (m *Memory) Finish(ctx context.Context, job, owner string, rec actors.RunRecord) (released bool, err error) {
	if job == "" {
		return false, errors.New("finish: empty job name")
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("finish %q: %w", job, err)
	}
	if owner != "" {
		if released, err = m.Release(ctx, job, owner); err != nil {
			return false, err
		}
	}
	return released, m.record(ctx, job, rec)
}
