package engine

import (
	"context"

	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Job targeting (package cluster): the job set gets only the jobs whose
// nodes: this node's node.tags match; the watcher judges every job.

var (
	_ cluster.Lister = (*redislock.Redis)(nil)
	_ cluster.Lister = (*redislock.Backend)(nil)
)

// newWatcher returns the actor that reports jobs no live node may run. On
// a Redis backend it reads the other nodes' heartbeat records (the node
// list) once per heartbeat interval; on the memory backend (one node) it
// judges by this node alone.
func newWatcher(cfg *config.Config, b backend, opts Options, reg prometheus.Registerer) *cluster.Watcher {
	o := cluster.WatcherOptions{Log: opts.Log, Self: cluster.Node{ID: cfg.Node.ID, Tags: cfg.Node.Tags}, Registry: reg,
		Every: cfg.Node.HeartbeatInterval}
	if l, ok := b.Backend.(cluster.Lister); ok && b.kind == "redis" {
		o.Lister = l
	}
	return cluster.NewWatcher(o)
}

// applyJobs applies the jobs this node may run to the job set (a job whose
// nodes: does not match node.tags is not scheduled here: no actor, no
// claim) and hands all of them to the watcher. It logs the jobs left out,
// once per start or reload.
func (e *Engine) applyJobs(ctx context.Context, jobs []config.Job) error {
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name
	}
	e.load.SetJobs(names) // every job's index in the claim order, the same on every node
	mine, others := cluster.ForNode(jobs, e.cfg.Node.Tags)
	if len(others) > 0 {
		e.log.Info("jobs not scheduled on this node: their nodes: does not match node.tags",
			zap.Strings("jobs", others), zap.Any("node_tags", e.cfg.Node.Tags))
	}
	if err := e.jobs.Apply(ctx, mine); err != nil {
		return err
	}
	return e.targets.SetJobs(ctx, jobs)
}
