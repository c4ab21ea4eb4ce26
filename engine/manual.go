package engine

import (
	"context"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
)

// ManualOptions are the inputs of RunJob besides the config and the job.
type ManualOptions struct {
	Log     *zap.Logger   // required; run and hook lines, and the job's output
	Environ []string      // the caller's environment, passed to the run and hooks
	Locker  ledger.Locker // required: the configured backend, already open
	Force   bool          // run even if the job is paused or disabled
	// Requester (user@host) goes into the history record.
	Requester string
	Start     actors.Starter
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
		return actors.Ran{Skip: ledger.SkipShuttingDown, Err: ctx.Err()}
	}
	var ran actors.Ran
	withJobActor(ctx, cfg, job, o, func(a *actors.Job, kill chan<- struct{}) {
		ran = sendRunNow(ctx, a, kill, actors.RunNow{Force: o.Force, Requester: o.Requester})
	})
	return ran
}

// withJobActor wires a job actor for job, with a hook runner and a janitor,
// in this process, calls use with it, and then stops them, waiting for the
// runs, their hooks and the janitor's last sweep. use may close kill (once)
// to terminate running runs. The actors outlive ctx: an interrupted run is
// terminated through kill, then releases its lease and reports like any
// other.
func withJobActor(ctx context.Context, cfg *config.Config, job config.Job, o ManualOptions,
	use func(a *actors.Job, kill chan<- struct{})) {
	metrics := actors.NewMetrics(nil)
	metrics.InitJob(job.Name)
	// The hook of an interrupted run still runs, bounded by hook_timeout.
	environ := actors.JobEnviron(o.Environ, cfg.SecretEnv...) // what the run and its hook inherit
	hooks := actors.NewHookRunner(o.Log, metrics, environ, o.Start, nil, nil)
	janitor := actors.NewJanitor(o.Log, o.Locker, 16)
	kill := make(chan struct{})
	deps := actors.JobDeps{Log: o.Log, Metrics: metrics, Locker: o.Locker, NodeID: cfg.Node.ID,
		Environ: environ, Results: hooks.Inbox(), Phantoms: janitor.Inbox(), Finishes: janitor.Finishes(), Kill: kill,
		GracePeriod: cfg.Node.GracePeriod, Start: o.Start, ClaimTimeout: claimTimeout(cfg),
		MaxSkew: cfg.Node.MaxClockSkew, Retention: retentionOf(cfg), OutputMaxBytes: cfg.Output.MaxBytes, Redact: cfg.Output.Patterns}
	if out, ok := o.Locker.(ledger.OutputStore); ok { // Redis: the run's output is kept and published as a daemon's
		deps.Output = out
	}
	a := actors.NewJob(job, deps)

	actx, stopActor := context.WithCancel(context.WithoutCancel(ctx))
	jctx, stopJanitor := context.WithCancel(context.WithoutCancel(ctx))
	actorDone, hooksDone, janitorDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { defer close(actorDone); _ = a.Run(actx) }()
	go func() { defer close(hooksDone); _ = hooks.Run(actx) }()
	go func() { defer close(janitorDone); _ = janitor.Run(jctx) }()

	use(a, kill)

	stopActor()
	<-actorDone
	hooks.Close() // the job actor, the only sender, has returned
	<-hooksDone
	stopJanitor() // its last sweep releases a lease whose release failed
	<-janitorDone
}

// sendRunNow sends m (its Reply is set here) and waits for the answer; when
// ctx ends first it closes kill, which terminates the run, and still waits.
// kill must not have been closed yet.
func sendRunNow(ctx context.Context, a *actors.Job, kill chan<- struct{}, m actors.RunNow) actors.Ran {
	reply := make(chan actors.Ran, 1)
	m.Reply = reply
	_ = a.Send(context.WithoutCancel(ctx), m) // the actor runs until use returns: never fails
	select {
	case ran := <-reply:
		return ran
	case <-ctx.Done():
		close(kill)
		return <-reply
	}
}
