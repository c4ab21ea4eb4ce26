package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/redislock"
	"github.com/google/uuid"
)

// MaxRunTimeout caps how long a run request waits to be taken: a job stays
// in the pending set that long (ledger.PendingWindow).
const MaxRunTimeout = ledger.PendingWindow

// pollEvery is how often a waiting requester reads the request's status.
const pollEvery = 100 * time.Millisecond

// ErrNotTaken is returned by RequestRun when no daemon took the request
// within its timeout; the request was withdrawn and will never run.
var ErrNotTaken = errors.New("control: no daemon took the run request")

// NewRunRequest returns a request of a manual run of job with a new id.
func NewRunRequest(job, requester, reason string, force bool, now time.Time) ledger.RunRequest {
	return ledger.RunRequest{ID: uuid.NewString(), Job: job, Requester: requester, Reason: reason, At: now.UTC(), Force: force}
}

// RequestRun writes req and waits until a daemon takes it (its status is
// no longer pending) or timeout passes (at most MaxRunTimeout). Then it
// withdraws the request atomically: when that succeeds it returns
// ErrNotTaken (the request will never run); when a daemon took it in
// between, the request goes on. It returns the request's status once
// taken. It blocks, polling every 100 ms; ctx ending withdraws the request
// the same way and returns ctx.Err().
func RequestRun(ctx context.Context, r *redislock.Redis, req ledger.RunRequest, timeout time.Duration) (*ledger.RunStatus, error) {
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
	st, err := waitState(wctx, r, req.Job, req.ID, notPending)
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
	return waitState(cctx, r, req.Job, req.ID, notPending)
}

// ErrTakerGone is returned by WaitRun when the daemon that took the request
// stopped (its heartbeat record is no longer live) or restarted before it
// wrote the run's outcome: the outcome will never be written. The run may
// have started and been killed with its daemon; it is not run again.
var ErrTakerGone = errors.New("control: the daemon that took the run request is gone")

// ErrStatusLost is returned by the waits when Redis holds no status of the
// request: it expired, or Redis lost it. Nobody can tell how the run ended.
var ErrStatusLost = errors.New("control: redis holds no status of the run request")

// takerCheckEvery is how often WaitRun reads the taker's heartbeat record.
const takerCheckEvery = time.Second

// WaitRun waits until request id of job has finished or was refused and
// returns its last status. It blocks, polling every 100 ms, until then or
// until ctx ends (the run goes on without the waiter). Every second while
// the request is taken it reads the taker's heartbeat record (one more
// round trip), and returns an error wrapping ErrTakerGone when the taker
// is no longer live or has restarted since it took the request.
func WaitRun(ctx context.Context, r *redislock.Redis, job, id string) (*ledger.RunStatus, error) {
	var checked time.Time
	var gone error
	st, err := waitState(ctx, r, job, id, func(st *ledger.RunStatus) bool {
		switch st.State {
		case ledger.RunFinished, ledger.RunRefused, ledger.RunCancelled:
			return true
		}
		if st.State != ledger.RunTaken || time.Since(checked) < takerCheckEvery {
			return false
		}
		checked = time.Now()
		gone = takerGone(ctx, r, st, checked)
		return gone != nil
	})
	if gone != nil {
		return nil, gone
	}
	return st, err
}

// takerGone returns an error wrapping ErrTakerGone when st's taker has no
// live heartbeat record at now, or one of an incarnation started after it
// took the request (st.At; both by the taker's clock). A failed read is
// not a verdict: nil.
func takerGone(ctx context.Context, r *redislock.Redis, st *ledger.RunStatus, now time.Time) error {
	values, err := r.Nodes(ctx)
	if err != nil {
		return nil
	}
	for _, rec := range cluster.Decode(values) {
		switch {
		case rec.NodeID != st.Node:
		case rec.Started.After(st.At):
			return fmt.Errorf("%w: %s took request %s at %s and restarted at %s before reporting its outcome; "+
				"the run may have been killed with the daemon, and it is not run again",
				ErrTakerGone, st.Node, st.ID, st.At.Format(time.RFC3339), rec.Started.UTC().Format(time.RFC3339))
		case !rec.Live(now):
			return fmt.Errorf("%w: %s took request %s at %s and has sent no heartbeat since %s; "+
				"the run may have been killed with the daemon, and it is not run again",
				ErrTakerGone, st.Node, st.ID, st.At.Format(time.RFC3339), rec.Heartbeat.UTC().Format(time.RFC3339))
		default:
			return nil
		}
	}
	return fmt.Errorf("%w: %s took request %s at %s and has no heartbeat record any more; "+
		"the run may have been killed with the daemon, and it is not run again", ErrTakerGone, st.Node, st.ID, st.At.Format(time.RFC3339))
}

// notPending reports whether a daemon took (or the requester withdrew) the
// request.
func notPending(st *ledger.RunStatus) bool { return st.State != ledger.RunPending }

// waitState polls the request's status until done(status) or ctx ends.
func waitState(ctx context.Context, r *redislock.Redis, job, id string, done func(*ledger.RunStatus) bool) (*ledger.RunStatus, error) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		st, err := r.GetRunStatus(ctx, job, id)
		switch {
		case err != nil && ctx.Err() == nil:
			return nil, err
		case err == nil && st == nil:
			return nil, fmt.Errorf("%w: request %s of %s (a status expires %v after the request; "+
				"before that Redis lost it: a restart without persistence, FLUSHALL, a failover or eviction); the run's outcome is unknown",
				ErrStatusLost, id, job, ledger.RunStatusTTL)
		case err == nil && done(st):
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
// configuration and whose node.tags match its nodes: selectors (package
// targeting; a node that does not match does not schedule the job, nor
// take its run requests).
func (c *Cluster) Holders(job string, selectors []string) []string {
	var out []string
	for _, n := range c.Nodes {
		if _, ok := n.Jobs[job]; ok && n.State == "live" && cluster.Matches(selectors, n.Tags) {
			out = append(out, n.NodeID)
		}
	}
	return out
}
