package actors

import (
	"context"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/process"
	"go.uber.org/zap"
)

// JobDeps are what a job actor needs from the engine. All fields are
// required unless marked optional.
type JobDeps struct {
	Log     *zap.Logger
	Metrics *Metrics
	Locker  Locker
	NodeID  string
	// Environ is what runs inherit: the daemon's environment filtered by
	// JobEnviron (once, by the caller: it is shared by every job actor).
	Environ []string
	// Results receives every finished run (the hook runner's inbox).
	Results chan<- RunFinished
	// Phantoms receives owners of claims whose outcome is unknown (the
	// request timed out): the janitor releases them once Redis answers.
	Phantoms chan<- Phantom
	// Kill is closed when running runs must be terminated (shutdown_timeout
	// has passed, or a second signal arrived): SIGTERM, SIGKILL after
	// kill_grace.
	Kill <-chan struct{}
	// KillNow is closed on a second shutdown signal: running runs are
	// SIGKILLed at once, then release their leases. nil = never.
	KillNow <-chan struct{}
	// GracePeriod is waited after a run before its lease is released.
	GracePeriod time.Duration
	// ClaimTimeout bounds one claim round trip (default 2s).
	ClaimTimeout time.Duration
	// Now reads the wall clock for catch-up; nil = time.Now (tests pass a
	// skewed clock).
	Now func() time.Time
	// Start starts one attempt's process; nil = process.Start. Tests in
	// synctest bubbles substitute a fake driven by the bubble's clock.
	Start Starter

	repeats *repeatLog // set by NewJob: summarises the job's repeated warnings
}

// Proc is a started process as the actors use it (*process.Proc).
type Proc interface {
	Pid() int
	Started() time.Time
	Terminate(grace time.Duration)
	Done() <-chan struct{}
	Wait() process.Result
}

// Starter starts a process from a spec (process.Start).
type Starter func(process.Spec) (Proc, error)

func startProcess(s process.Spec) (Proc, error) { return process.Start(s) }

// Job is the actor of one job: it owns the job's overlap state and starts
// one run goroutine per run, whatever its trigger (docs/architecture.md).
// Its inbox takes Fire, Catchup, Reconfigure and RunNow.
type Job struct {
	deps  JobDeps
	cfg   config.Job
	inbox chan jobMsg
	done  chan struct{} // one value per finished run goroutine

	running     int
	lastCatchup time.Time
}

// inboxSize bounds queued messages per job; the ticker drops (and counts)
// fires beyond it rather than block.
const inboxSize = 16

// NewJob returns a job actor for cfg.
func NewJob(cfg config.Job, deps JobDeps) *Job {
	if deps.Start == nil {
		deps.Start = startProcess
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.ClaimTimeout <= 0 {
		deps.ClaimTimeout = 2 * time.Second
	}
	deps.repeats = newRepeatLog(repeatEvery)
	return &Job{deps: deps, cfg: cfg, inbox: make(chan jobMsg, inboxSize), done: make(chan struct{})}
}

// Inbox is where the ticker sends Fire messages.
func (j *Job) Inbox() chan<- jobMsg { return j.inbox }

// Send delivers m (Catchup, Reconfigure, RunNow) unless ctx ends first.
func (j *Job) Send(ctx context.Context, m jobMsg) error { return send(ctx, j.inbox, m) }

// Run handles messages until ctx ends. Then it stops claiming (queued fires
// are skipped with reason shutting_down), waits for its running runs —
// which end by themselves or when deps.Kill is closed — and returns nil.
func (j *Job) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			j.drain()
			return nil
		case m := <-j.inbox:
			j.handle(ctx, m)
		case <-j.done:
			j.running--
			j.deps.Metrics.SetRunning(j.cfg.Name, j.running)
		}
	}
}

func (j *Job) drain() {
	for j.running > 0 {
		select {
		case m := <-j.inbox:
			switch m := m.(type) {
			case Fire:
				j.skip(m.Slot, SkipShuttingDown)
			case RunNow:
				m.Reply <- Ran{Skip: SkipShuttingDown}
			}
		case <-j.done:
			j.running--
		}
	}
	j.deps.Metrics.SetRunning(j.cfg.Name, 0)
}

func (j *Job) handle(ctx context.Context, m jobMsg) {
	switch m := m.(type) {
	case Fire:
		j.onFire(ctx, m.Slot, TriggerSchedule)
	case Catchup:
		j.onCatchup(ctx)
	case Reconfigure:
		j.cfg = m.Job
	case RunNow:
		j.onRunNow(ctx, m)
	}
}

func (j *Job) onFire(ctx context.Context, slot time.Time, trigger Trigger) {
	switch {
	case !j.cfg.Enabled:
		j.skip(slot, SkipDisabled)
	case ctx.Err() != nil:
		j.skip(slot, SkipShuttingDown)
	case j.running > 0 && j.cfg.Overlap != config.OverlapAllow:
		j.skip(slot, SkipOverlapLocal)
	default:
		j.start(ctx, &run{job: j.cfg, info: RunInfo{Job: j.cfg.Name, Slot: slot, Trigger: trigger}}, nil)
	}
}

// onRunNow starts a manual run. A disabled job is refused unless forced;
// pause and overlap are decided by the claim, as for any run.
func (j *Job) onRunNow(ctx context.Context, m RunNow) {
	switch {
	case !j.cfg.Enabled && !m.Force:
		j.deps.Log.Warn("manual run not started", zap.String("job", j.cfg.Name), zap.String("reason", SkipDisabled))
		m.Reply <- Ran{Skip: SkipDisabled}
	case ctx.Err() != nil:
		m.Reply <- Ran{Skip: SkipShuttingDown}
	default:
		r := &run{job: j.cfg, info: RunInfo{Job: j.cfg.Name, Trigger: TriggerManual}, force: m.Force}
		j.start(ctx, r, m.Reply)
	}
}

// onCatchup runs the latest slot S <= now with now−S <= catchup_window,
// at most once per slot from this node; the claim makes it once in the
// cluster.
func (j *Job) onCatchup(ctx context.Context) {
	w := j.cfg.CatchupWindow
	if w <= 0 || !j.cfg.Enabled {
		return
	}
	now := j.deps.Now()
	var latest time.Time
	for t := j.cfg.Sched.Next(now.Add(-w - time.Second)); !t.IsZero() && !t.After(now); t = j.cfg.Sched.Next(t) {
		if now.Sub(t) <= w {
			latest = t
		}
	}
	if latest.IsZero() || !latest.After(j.lastCatchup) {
		return
	}
	j.lastCatchup = latest
	j.deps.Log.Info("catch-up: claiming the latest missed slot", zap.String("job", j.cfg.Name), slotField(latest))
	j.onFire(ctx, latest, TriggerCatchup)
}

func (j *Job) skip(slot time.Time, reason string) { skipSlot(&j.deps, j.cfg.Name, slot, reason) }

// skipSlot logs (info; debug for claimed_elsewhere and disabled, warn for
// overlap_local) and counts one skipped slot (docs/protocol.md, "Skip
// reasons"). overlap_local and redis_error repeat on every slot while a
// long run or an outage lasts: their lines are summarised (repeats.go).
func skipSlot(deps *JobDeps, job string, slot time.Time, reason string) {
	deps.Metrics.Skip(job, reason)
	log := deps.Log.Info
	switch reason {
	case SkipClaimedElsewhere, SkipDisabled:
		log = deps.Log.Debug
	case SkipOverlapLocal:
		log = deps.Log.Warn
	}
	write := func(extra ...zap.Field) {
		log("slot skipped", append([]zap.Field{zap.String("job", job), zap.String("node_id", deps.NodeID), slotField(slot),
			zap.String("reason", reason)}, extra...)...)
	}
	if reason == SkipOverlapLocal || reason == SkipRedisError {
		deps.repeats.Log(reason, write)
		return
	}
	write()
}

// start launches r on a goroutine; the actor waits for it in Run/drain.
// reply, when set, receives what happened (1-buffered: never blocks).
func (j *Job) start(ctx context.Context, r *run, reply chan<- Ran) {
	j.deps.repeats.End(SkipOverlapLocal) // no run was left in progress
	j.running++
	j.deps.Metrics.SetRunning(j.cfg.Name, j.running)
	r.deps = &j.deps
	go func() {
		defer func() { j.done <- struct{}{} }()
		ran := r.execute(ctx)
		if reply != nil {
			reply <- ran
		}
	}()
}

var _ Proc = (*process.Proc)(nil)
