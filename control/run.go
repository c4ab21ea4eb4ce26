package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cronlock/cronlock/redislock"
	"github.com/google/uuid"
)

// MaxRunTimeout caps how long a run request waits to be taken: a job stays
// in the pending set that long (redislock.PendingWindow).
const MaxRunTimeout = redislock.PendingWindow

// pollEvery is how often a waiting requester reads the request's status.
const pollEvery = 100 * time.Millisecond

// ErrNotTaken is returned by RequestRun when no daemon took the request
// within its timeout; the request was withdrawn and will never run.
var ErrNotTaken = errors.New("control: no daemon took the run request")

// NewRunRequest returns a request of a manual run of job with a new id.
func NewRunRequest(job, requester, reason string, force bool, now time.Time) redislock.RunRequest {
	return redislock.RunRequest{ID: uuid.NewString(), Job: job, Requester: requester, Reason: reason, At: now.UTC(), Force: force}
}

// RequestRun writes req and waits until a daemon takes it (its status is
// no longer pending) or timeout passes (at most MaxRunTimeout). Then it
// withdraws the request atomically: when that succeeds it returns
// ErrNotTaken (the request will never run); when a daemon took it in
// between, the request goes on. It returns the request's status once
// taken. It blocks, polling every 100 ms; ctx ending withdraws the request
// the same way and returns ctx.Err().
func RequestRun(ctx context.Context, r *redislock.Redis, req redislock.RunRequest, timeout time.Duration) (*redislock.RunStatus, error) {
	if timeout <= 0 || timeout > MaxRunTimeout {
		return nil, fmt.Errorf("run request timeout %v: want more than 0 and at most %v", timeout, MaxRunTimeout)
	}
	value, err := r.RequestRun(ctx, req)
	if err != nil {
		if value != "" {
			_, _ = r.CancelRun(context.WithoutCancel(ctx), req.Job, req.ID, value, time.Now()) // best effort: not announced
		}
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := waitState(wctx, r, req.Job, req.ID, func(s string) bool { return s != redislock.RunPending })
	if err == nil {
		return st, nil
	}
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer ccancel()
	withdrawn, cerr := r.CancelRun(cctx, req.Job, req.ID, value, time.Now())
	switch {
	case cerr != nil:
		return nil, fmt.Errorf("run request %s not taken within %v, and withdrawing it failed (a daemon may still take it): %w", req.ID, timeout, cerr)
	case withdrawn && ctx.Err() != nil:
		return nil, ctx.Err()
	case withdrawn:
		return nil, ErrNotTaken
	}
	// Taken just before the withdrawal: read who took it.
	return waitState(cctx, r, req.Job, req.ID, func(s string) bool { return s != redislock.RunPending })
}

// WaitRun waits until request id of job has finished or was refused and
// returns its last status. It blocks, polling every 100 ms, until then or
// until ctx ends (the run goes on without the waiter).
func WaitRun(ctx context.Context, r *redislock.Redis, job, id string) (*redislock.RunStatus, error) {
	return waitState(ctx, r, job, id, func(s string) bool {
		return s == redislock.RunFinished || s == redislock.RunRefused || s == redislock.RunCancelled
	})
}

// waitState polls the request's status until done(state) or ctx ends.
func waitState(ctx context.Context, r *redislock.Redis, job, id string, done func(string) bool) (*redislock.RunStatus, error) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		st, err := r.GetRunStatus(ctx, job, id)
		switch {
		case err != nil && ctx.Err() == nil:
			return nil, err
		case err == nil && st == nil:
			return nil, fmt.Errorf("run request %s of %s: no status in Redis (expired after %v?)", id, job, redislock.RunStatusTTL)
		case err == nil && done(st.State):
			return st, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// Holders returns the live nodes of c that have job in their
// configuration.
func (c *Cluster) Holders(job string) []string {
	var out []string
	for _, n := range c.Nodes {
		if _, ok := n.Jobs[job]; ok && n.State == "live" {
			out = append(out, n.NodeID)
		}
	}
	return out
}
