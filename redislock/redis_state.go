package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/redis/rueidis"
)

// State reads the job's state hash, pause key, lease and pending slot in
// one pipelined round trip (HGETALL, GET, GET, PTTL, GET; not atomic, so a
// lease expiring in between shows a holder with LeaseTTL 0).
func (r *Redis) State(ctx context.Context, job string) (ledger.JobState, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	return decodeState(job, r.c.DoMulti(ctx, r.stateCmds(job)...))
}

// States reads the states of jobs as State does, in the order of jobs, in
// one round trip for all: State's commands for each job, pipelined (in
// Cluster mode rueidis sends each to its job's shard). The first job whose
// state cannot be read fails the call.
func (r *Redis) States(ctx context.Context, jobs []string) ([]ledger.JobState, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	cmds := make(rueidis.Commands, 0, len(jobs)*stateCmdsPerJob)
	for _, job := range jobs {
		cmds = append(cmds, r.stateCmds(job)...)
	}
	res := r.c.DoMulti(ctx, cmds...)
	out := make([]ledger.JobState, len(jobs))
	for i, job := range jobs {
		st, err := decodeState(job, res[i*stateCmdsPerJob:(i+1)*stateCmdsPerJob])
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// stateCmdsPerJob is len(stateCmds(job)).
const stateCmdsPerJob = 5

// stateCmds are the commands that read job's state: HGETALL of the state
// hash, GET of the pause key and of the lease, PTTL of the lease, GET of
// the pending slot.
func (r *Redis) stateCmds(job string) rueidis.Commands {
	lease := r.key("job", job)
	return rueidis.Commands{
		r.c.B().Hgetall().Key(r.key("state", job)).Build(),
		r.c.B().Get().Key(r.key("paused", job)).Build(),
		r.c.B().Get().Key(lease).Build(),
		r.c.B().Pttl().Key(lease).Build(),
		r.c.B().Get().Key(r.key("pending", job)).Build(),
	}
}

// decodeState reads the replies of stateCmds(job).
func decodeState(job string, res []rueidis.RedisResult) (ledger.JobState, error) {
	h, err := res[0].AsStrMap()
	if err != nil {
		return ledger.JobState{}, fmt.Errorf("state %q: %w", job, err)
	}
	paused, perr := res[1].ToString()
	if perr != nil && !rueidis.IsRedisNil(perr) {
		return ledger.JobState{}, fmt.Errorf("state %q: %w", job, perr)
	}
	holder, err := res[2].ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return ledger.JobState{}, fmt.Errorf("state %q: %w", job, err)
	}
	pttl, err := res[3].AsInt64()
	if err != nil {
		return ledger.JobState{}, fmt.Errorf("state %q: %w", job, err)
	}
	pending, err := res[4].AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		return ledger.JobState{}, fmt.Errorf("state %q: pending slot: %w", job, err)
	}
	st := ledger.JobState{Paused: perr == nil, LeaseHolder: holder, Pending: pending}
	if st.Paused {
		p := decodePause(paused)
		st.Pause = &p
	}
	if pttl > 0 {
		st.LeaseTTL = time.Duration(pttl) * time.Millisecond
	}
	if err := decodeStateHash(&st, h); err != nil {
		return ledger.JobState{}, fmt.Errorf("state %q: %w", job, err)
	}
	return st, nil
}

// decodeStateHash reads the state hash's fence, runs, seq and last run.
func decodeStateHash(st *ledger.JobState, h map[string]string) error {
	var err error
	st.Fence, err = parseInt(h, "fence")
	if err == nil {
		st.Runs, err = parseInt(h, "runs")
	}
	if err == nil {
		st.Seq, err = parseInt(h, "seq")
	}
	if err == nil && h["last"] != "" {
		var o ledger.Occurrence
		o, err = decodeOccurrence(h["last"], nil)
		last := o.RunRecord()
		last.OutputTail = ""
		st.Last, st.Slot = &last, o.Slot
	}
	return err
}

// Pause sets the job's paused key (no TTL): from the next claim on, every
// node skips its slots with reason "paused" until Resume. Manual runs ignore
// it. Idempotent.
func (r *Redis) Pause(ctx context.Context, job string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	if err := r.c.Do(ctx, r.c.B().Set().Key(r.key("paused", job)).Value("1").Build()).Error(); err != nil {
		return fmt.Errorf("pause %q: %w", job, err)
	}
	return nil
}

// Resume deletes the job's paused key. Idempotent.
func (r *Redis) Resume(ctx context.Context, job string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	if err := r.c.Do(ctx, r.c.B().Del().Key(r.key("paused", job)).Build()).Error(); err != nil {
		return fmt.Errorf("resume %q: %w", job, err)
	}
	return nil
}

// Time returns the Redis server's clock (TIME, microsecond precision), for
// the clock-skew check (cronlock_clock_skew_seconds). In Cluster mode it is
// the clock of whichever node answers.
func (r *Redis) Time(ctx context.Context) (time.Time, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	v, err := r.c.Do(ctx, r.c.B().Time().Build()).AsStrSlice()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("got %d values, want 2", len(v))
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("time: %w", err)
	}
	sec, err1 := strconv.ParseInt(v[0], 10, 64)
	usec, err2 := strconv.ParseInt(v[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return time.Time{}, fmt.Errorf("time: %w", err)
	}
	return time.Unix(sec, usec*1000).UTC(), nil
}

// Ping checks that Redis answers (for /readyz).
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	if err := r.c.Do(ctx, r.c.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// parseInt reads an integer field; a missing field is 0.
func parseInt(m map[string]string, k string) (int64, error) {
	v, ok := m[k]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("field %s: %w", k, err)
	}
	return n, nil
}

// parseTime reads an RFC 3339 field; a missing field is the zero time.
func parseTime(m map[string]string, k string) (time.Time, error) {
	v, ok := m[k]
	if !ok {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("field %s: %w", k, err)
	}
	return t.UTC(), nil
}
