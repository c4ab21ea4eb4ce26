package engine

import (
	"context"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/redislock"
	"github.com/cronlock/cronlock/runrequests"
	"github.com/cronlock/cronlock/targeting"
)

var (
	_ runrequests.Store = (*redislock.Redis)(nil)
	_ runrequests.Store = (*lazyRedis)(nil)
)

// newTaker returns the actor that takes the cluster's run requests for
// this node's enabled jobs, or nil for the memory backend.
func (e *Engine) newTaker() *runrequests.Taker {
	store, ok := e.backend.Backend.(runrequests.Store)
	if e.backend.kind != "redis" || !ok {
		return nil
	}
	return runrequests.New(runrequests.Options{Log: e.log, Store: store, Node: e.cfg.Node.ID, Held: e.holds,
		Start: func(ctx context.Context, job string, m actors.RunNow) error { return e.jobs.RunNow(ctx, job, m) },
		Now:   e.opts.Now})
}

// holds reports whether job is configured and enabled on this node, and
// scheduled here (its nodes: matches node.tags: package targeting).
func (e *Engine) holds(job string) bool {
	for _, j := range e.runningJobs() {
		if j.Name == job {
			return j.Enabled && targeting.Matches(j.Nodes, e.cfg.Node.Tags)
		}
	}
	return false
}

func (l *lazyRedis) PendingRunJobs(ctx context.Context, since time.Time) ([]string, error) {
	r, err := l.client()
	if err != nil {
		return nil, err
	}
	return r.PendingRunJobs(ctx, since)
}

func (l *lazyRedis) TakeRun(ctx context.Context, job, node string, at time.Time) (*redislock.RunRequest, error) {
	r, err := l.client()
	if err != nil {
		return nil, err
	}
	return r.TakeRun(ctx, job, node, at)
}

func (l *lazyRedis) SetRunStatus(ctx context.Context, job string, st redislock.RunStatus) error {
	r, err := l.client()
	if err != nil {
		return err
	}
	return r.SetRunStatus(ctx, job, st)
}

func (l *lazyRedis) WatchRunRequests(ctx context.Context, subscribed, notified func()) error {
	r, err := l.client()
	if err != nil {
		return err
	}
	return r.WatchRunRequests(ctx, subscribed, notified)
}
