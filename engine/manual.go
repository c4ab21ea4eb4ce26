package engine

import (
	"context"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
)

// ManualOptions are the inputs of RunJob besides the config and the job.
type ManualOptions struct {
	Log     *zap.Logger   // required; run and hook lines, and the job's output
	Environ []string      // the caller's environment, passed to the run and hooks
	Locker  actors.Locker // required: the configured backend, already open
	Force   bool          // run even if the job is paused or disabled
	Start   actors.Starter
}

// RunJob runs job once, now, in this process, through the daemon's run
// path: a job actor receives actors.RunNow and runs it like a scheduled run
// (claim with the lease but no slot, retries, hooks, history record with
// trigger manual). It blocks until the run and its hooks have ended, and
// returns what happened (Ran.Skip says why it did not start). Cancelling
// ctx terminates the run (SIGTERM to its process group, SIGKILL after
// kill_grace); the lease is still released and the run recorded.
func RunJob(ctx context.Context, cfg *config.Config, job config.Job, o ManualOptions) actors.Ran {
	if ctx.Err() != nil {
		return actors.Ran{Skip: actors.SkipShuttingDown, Err: ctx.Err()}
	}
	metrics := actors.NewMetrics(nil)
	metrics.InitJob(job.Name)
	// The hook of an interrupted run still runs, bounded by hook_timeout.
	environ := actors.JobEnviron(o.Environ, cfg.SecretEnv...) // what the run and its hook inherit
	hooks := actors.NewHookRunner(o.Log, metrics, environ, o.Start, nil, nil)
	janitor := actors.NewJanitor(o.Log, o.Locker, 16)
	kill := make(chan struct{})
	a := actors.NewJob(job, actors.JobDeps{Log: o.Log, Metrics: metrics, Locker: o.Locker, NodeID: cfg.Node.ID,
		Environ: environ, Results: hooks.Inbox(), Phantoms: janitor.Inbox(), Kill: kill,
		GracePeriod: cfg.Node.GracePeriod, Start: o.Start, ClaimTimeout: claimTimeout(cfg)})

	// The actors outlive ctx: an interrupted run is terminated through
	// Kill, then releases its lease and reports like any other.
	actx, stopActor := context.WithCancel(context.WithoutCancel(ctx))
	jctx, stopJanitor := context.WithCancel(context.WithoutCancel(ctx))
	actorDone, hooksDone, janitorDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { defer close(actorDone); _ = a.Run(actx) }()
	go func() { defer close(hooksDone); _ = hooks.Run(actx) }()
	go func() { defer close(janitorDone); _ = janitor.Run(jctx) }()

	reply := make(chan actors.Ran, 1)
	_ = a.Send(actx, actors.RunNow{Force: o.Force, Reply: reply}) // actx is live: never fails
	var ran actors.Ran
	select {
	case ran = <-reply:
	case <-ctx.Done():
		close(kill)
		ran = <-reply
	}
	stopActor()
	<-actorDone
	hooks.Close() // the job actor, the only sender, has returned
	<-hooksDone
	stopJanitor() // its last sweep releases a lease whose release failed
	<-janitorDone
	return ran
}
