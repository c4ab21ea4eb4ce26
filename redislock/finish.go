package redislock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/cronlock/cronlock/actors"
)

// Finish ends a run in ONE round trip (a winning run costs one claim and
// one release): it releases the lease if it still holds req.Owner
// (compare-and-DEL; "" = the run held no lease, overlap: allow), appends
// req.Record to the capped history stream and copies its fields (but the
// output tail) into the state hash as last_<field>, and, when the lease was
// released and a slot is pending, hands the lease to req.Next (or clears
// the pending slot when req.Next is ""). Use a fresh ctx with its own
// timeout, never a run's cancelled one. On error nothing is known: the
// lease may or may not have been released or handed on (the caller hands
// both owners to the janitor). With Options.MinReplicasAcked a finish that
// handed the lease on waits for the replicas like a won claim
// (finishReplicated); fewer acknowledgements come back as
// Finished.NotReplicated: the handed-on slot is not run.
func (r *Redis) Finish(ctx context.Context, req actors.FinishRequest) (actors.Finished, error) {
	if err := req.Validate(); err != nil {
		return actors.Finished{}, fmt.Errorf("finish %q: %w", req.Job, err)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	retry := "0"
	if req.Retry {
		retry = strconv.FormatInt(max(req.Record.End.UnixMilli(), 1), 10)
	}
	args := append([]string{strconv.Itoa(r.historyLen), req.Owner, req.Next, strconv.FormatInt(req.TTL.Milliseconds(), 10),
		strconv.FormatInt(req.MaxRuns, 10), retry}, encodeRecord(req.Record)...)
	keys := r.hot(req.Job).finish
	if r.minAcks > 0 && req.Next != "" {
		f, err := r.finishReplicated(ctx, keys, args)
		if err != nil {
			return actors.Finished{}, fmt.Errorf("finish %q: %w", req.Job, explainScript(err))
		}
		return f, nil
	}
	vals, err := finishScript.Exec(ctx, r.c, keys, args).AsIntSlice()
	if err != nil {
		return actors.Finished{}, fmt.Errorf("finish %q: %w", req.Job, explainScript(err))
	}
	f, err := decodeFinished(vals)
	if err != nil {
		return actors.Finished{}, fmt.Errorf("finish %q: %w", req.Job, err)
	}
	return f, nil
}

// retryMargin is how far the capped history must reach back before a
// retried finish's run end for the retry to tell whether an earlier
// attempt appended its record (finishScript): more than the clock skew
// between a node and Redis (warned above node.max_clock_skew,
// docs/protocol.md "What each fault does") and the time a finish spends in
// flight.
const retryMargin = time.Minute

// decodeFinished reads finishScript's reply.
func decodeFinished(vals []int64) (actors.Finished, error) {
	if len(vals) != 8 {
		return actors.Finished{}, fmt.Errorf("script returned %d values, want 8", len(vals))
	}
	return actors.Finished{Released: vals[0] == 1, Pending: vals[1], Fence: vals[2], StateSlot: vals[3], StateFence: vals[4],
		Runs: vals[5], Left: vals[6] == 1, Unsure: vals[7] == 1}, nil
}

// Finish releases the lease (if req.Owner holds it), records req.Record
// and hands the lease to the pending slot; see Redis.Finish.
func (m *Memory) Finish(ctx context.Context, req actors.FinishRequest) (actors.Finished, error) {
	if err := errors.Join(req.Validate(), ctx.Err()); err != nil {
		return actors.Finished{}, fmt.Errorf("finish %q: %w", req.Job, err)
	}
	var f actors.Finished
	if req.Owner != "" {
		released, err := m.Release(ctx, req.Job, req.Owner)
		if err != nil {
			return actors.Finished{}, err
		}
		f.Released = released
	}
	recorded, newer, unsure := false, false, false
	if req.Retry {
		recorded, newer, unsure = m.retryFacts(req.Job, req.Record)
	}
	if !recorded {
		if err := m.record(ctx, req.Job, req.Record, !newer); err != nil {
			return actors.Finished{}, err
		}
	}
	m.mu.Lock()
	j := m.job(req.Job)
	if req.Record.Result == actors.ResultSuccess && !recorded {
		j.runs++
	}
	f.Runs = j.runs
	if f.Released && j.queued > 0 {
		f.Pending = j.queued
		switch {
		case req.MaxRuns > 0 && j.runs >= req.MaxRuns:
			j.queued = 0 // the job is done
		case req.Next != "" && j.fence < math.MaxInt64:
			j.handedTo, j.handedSlot = req.Next, j.queued
			j.queued = 0
			j.owner, j.expires = req.Next, time.Now().Add(req.TTL.Truncate(time.Millisecond))
			j.fence++
			f.Fence = j.fence
		default:
			f.Left = true // for the next claim (Redis: HINCRBY fails at the maximum)
		}
	}
	f.StateSlot, f.StateFence, f.Unsure = j.slot, j.fence, unsure
	m.mu.Unlock()
	if f.Fence > 0 || (req.MaxRuns > 0 && req.Record.Result == actors.ResultSuccess) { // runs of other jobs reach the file with the next write
		if err := m.commit(ctx, req.Job); err != nil {
			return actors.Finished{}, fmt.Errorf("finish %q: %w", req.Job, err)
		}
	}
	return f, nil
}

var (
	_ actors.Unhander = (*Redis)(nil)
	_ actors.Unhander = (*Memory)(nil)
)

// Unhand takes back the lease a Finish may have handed to the job's
// pending slot, owner (FinishRequest.Next), when that finish's answer was
// lost and nobody runs the slot: if the lease still holds owner it is
// deleted and, when the finish noted handing owner that slot and no other
// slot is pending, the slot is pending again, for the job's next claim
// (unhandScript). held says the lease was owner's; slot is the slot put
// back (0 = none). One round trip.
func (r *Redis) Unhand(ctx context.Context, job, owner string) (slot int64, held bool, err error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	n, err := unhandScript.Exec(ctx, r.c, []string{r.key("job", job), r.key("state", job), r.key("pending", job)},
		[]string{owner}).AsInt64()
	if err != nil {
		return 0, false, fmt.Errorf("unhand %q: %w", job, explainScript(err))
	}
	return max(n, 0), n >= 0, nil
}

// Unhand is Redis.Unhand in memory.
func (m *Memory) Unhand(ctx context.Context, job, owner string) (slot int64, held bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("unhand %q: %w", job, err)
	}
	m.mu.Lock()
	j := m.job(job)
	if j.owner != owner {
		m.mu.Unlock()
		return 0, false, nil
	}
	j.owner = ""
	if j.handedTo == owner && j.queued == 0 {
		j.queued, slot = j.handedSlot, j.handedSlot
	}
	m.mu.Unlock()
	if slot > 0 {
		if err := m.commit(ctx, job); err != nil {
			return 0, true, fmt.Errorf("unhand %q: %w", job, err)
		}
	}
	return slot, true, nil
}
