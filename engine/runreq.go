package engine

import (
	"context"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/redislock"
	"github.com/google/uuid"
	"go.uber.org/zap"
)

var (
	_ cluster.RunRequestStore = (*redislock.Redis)(nil)
	_ cluster.RunRequestStore = (*redislock.Backend)(nil)
)

// newTaker returns the actor that takes the cluster's run requests for
// this node's enabled jobs, or nil for the memory backend.
func (e *Engine) newTaker() *cluster.Taker {
	store, ok := e.backend.Backend.(cluster.RunRequestStore)
	if e.backend.kind != "redis" || !ok {
		return nil
	}
	return cluster.NewTaker(cluster.TakerOptions{Log: e.log, Store: store, Node: e.cfg.Node.ID, Held: e.holds,
		Start: e.startRequested, Now: e.opts.Now})
}

// startRequested hands a taken run request to job's actor as RunNow
// (cluster.TakerOptions.Start); wait blocks until the actor's answer.
func (e *Engine) startRequested(ctx context.Context, job string, force bool, requester string) (func() cluster.RunOutcome, error) {
	reply := make(chan actors.Ran, 1) // the actor answers every RunNow it took, without blocking
	if err := e.jobs.RunNow(ctx, job, actors.RunNow{Force: force, Requester: requester, Reply: reply}); err != nil {
		return nil, err
	}
	return func() cluster.RunOutcome {
		ran := <-reply
		return cluster.RunOutcome{Skip: ran.Skip, Err: ran.Err, RunID: ran.Finished.RunID, Result: ran.Finished.Result,
			ExitCode: ran.Finished.ExitCode}
	}, nil
}

// runHere runs job in this daemon now, for a run requested through the
// API on the memory backend (api.RunFunc): the same path as a run request
// a daemon takes from Redis (the job actor's RunNow: the lease, retries,
// hooks, a history record with trigger manual and the requester), with a
// run_request event in the job's trail. Without wait it answers once the
// run was refused or, after the claim's time bound, is running.
func (e *Engine) runHere(ctx context.Context, job string, req api.RunRequest) (ledger.RunStatus, error) {
	st := ledger.RunStatus{ID: uuid.NewString(), Node: e.cfg.Node.ID}
	if e.mem != nil {
		_ = e.mem.AddEvents(ctx, map[string][]redislock.Event{job: {{Type: redislock.EventRunRequest, At: e.opts.Now().UTC(),
			By: req.Requester, Note: req.Reason, Request: st.ID}}})
	}
	e.log.Info("run requested through the API", zap.String("job", job), zap.String("request", st.ID),
		zap.String("requester", req.Requester), zap.String("reason", req.Reason), zap.Bool("force", req.Force))
	reply := make(chan actors.Ran, 1) // the actor answers every RunNow it took, without blocking
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := e.jobs.RunNow(hctx, job, actors.RunNow{Force: req.Force, Requester: req.Requester, Reply: reply})
	cancel()
	if err != nil {
		st.State, st.Skip, st.Error, st.At = ledger.RunRefused, cluster.SkipNotHeld, err.Error(), e.opts.Now().UTC()
		return st, nil
	}
	var answer <-chan time.Time // nil: wait for the end
	if !req.Wait {
		answer = time.After(claimTimeout(e.cfg) + time.Second)
	}
	select {
	case ran := <-reply:
		if ran.Skip != "" {
			st.State, st.Skip = ledger.RunRefused, ran.Skip
			if ran.Err != nil {
				st.Error = ran.Err.Error()
			}
		} else {
			st.State, st.RunID, st.Result, st.ExitCode = ledger.RunFinished, ran.Finished.RunID, ran.Finished.Result, ran.Finished.ExitCode
		}
	case <-answer:
		st.State = ledger.RunTaken
	case <-ctx.Done():
		return st, ctx.Err()
	}
	st.At = e.opts.Now().UTC()
	return st, nil
}

// holds reports whether job is configured and enabled on this node, and
// scheduled here (its nodes: matches node.tags: package cluster).
func (e *Engine) holds(job string) bool {
	for _, j := range e.runningJobs() {
		if j.Name == job {
			return j.Enabled && cluster.Matches(j.Nodes, e.cfg.Node.Tags)
		}
	}
	return false
}
