package actors

import (
	"context"
	"strconv"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
	"github.com/google/uuid"
	"go.uber.org/zap"
)

// maxRetryBackoff caps the doubling retry delay (SPEC.md §2 retry_backoff).
const maxRetryBackoff = 10 * time.Minute

// releaseTimeout bounds the release after a run; it runs on a
// context detached from the (possibly cancelled) run context (STYLE.md 7).
const releaseTimeout = 2 * time.Second

// run is one execution of a job for one slot: claim → lease → attempts →
// grace period → release → result to the hook runner. It lives on a
// goroutine owned by the job actor.
type run struct {
	job  config.Job
	slot time.Time // zero for a manual run
	deps *JobDeps

	id, owner string
	fence     int64
	log       *zap.Logger
	lostErr   error // set once the lease is lost
}

func (r *run) execute(ctx context.Context) {
	r.id = uuid.NewString()
	r.owner = r.deps.NodeID + ":" + r.id
	r.log = r.deps.Log.With(zap.String("job", r.job.Name), zap.String("run_id", r.id))
	if !r.slot.IsZero() {
		r.log = r.log.With(slotField(r.slot))
	}
	if ctx.Err() != nil {
		r.skip(SkipShuttingDown)
		return
	}
	useLease := r.job.Overlap != config.OverlapAllow || r.slot.IsZero()
	sent := time.Now()
	if !r.claim(ctx, useLease) {
		return
	}
	var lost <-chan LeaseLost
	stopLease := func() {}
	if useLease {
		lease := NewLease(r.log, r.deps.Locker, r.job.Name, r.owner, r.job.LockTTL, sent)
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() { defer close(done); _ = lease.Run(lctx) }()
		stopLease = func() { cancel(); <-done }
		lost = lease.Lost()
	}
	fin := r.attempts(ctx, lost)
	owner := ""
	if useLease {
		r.waitGrace()
		stopLease()
		owner = r.owner
	}
	r.end(ctx, owner, fin)
	r.report(fin)
}

func (r *run) skip(reason string) { skipSlot(r.deps, r.job.Name, r.slot, reason) }

// claim runs the claim script (SPEC.md §4) and reports whether this node
// may run the slot. A failed claim skips the slot (redis_error): fail-safe.
// A claim in flight when shutdown begins is completed, not abandoned: a
// slot that Redis gave us and nobody runs would be a silently missed run.
func (r *run) claim(ctx context.Context, useLease bool) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.deps.ClaimTimeout)
	defer cancel()
	var slot int64
	if !r.slot.IsZero() {
		slot = r.slot.Unix()
	}
	c, err := r.deps.Locker.Claim(cctx, redislock.ClaimRequest{Job: r.job.Name, Slot: slot,
		Owner: r.owner, TTL: r.job.LockTTL, Lease: useLease})
	if err != nil {
		r.log.Warn("claim failed; slot not run", zap.Error(err))
		r.skip(SkipRedisError)
		if useLease {
			r.phantom()
		}
		return false
	}
	switch c.Outcome {
	case redislock.Claimed:
		r.fence = c.Fence
		r.log = r.log.With(zap.Int64("fence", c.Fence))
		return true
	case redislock.Paused:
		r.skip(SkipPaused)
	case redislock.Overlap:
		r.skip(SkipOverlap)
	default:
		r.skip(SkipClaimedElsewhere)
	}
	return false
}

// phantom hands a lease whose claim outcome is unknown to the janitor, so
// that a claim applied by Redis after our timeout never blocks the job for
// lock_ttl (SPEC.md §4).
func (r *run) phantom() {
	p := Phantom{Job: r.job.Name, Owner: r.owner, Until: time.Now().Add(r.job.LockTTL)}
	select {
	case r.deps.Phantoms <- p:
	default:
		r.log.Warn("janitor queue full; a phantom lease may block the job until lock_ttl")
	}
}

// attempts runs the command up to 1+retries times (SPEC.md §2 retries).
func (r *run) attempts(ctx context.Context, lost <-chan LeaseLost) RunFinished {
	fin := RunFinished{Job: r.job, RunID: r.id, Node: r.deps.NodeID, Slot: r.slot, Fence: r.fence}
	backoff := r.job.RetryBackoff
	for attempt := 1; ; attempt++ {
		fin.Attempts = attempt
		out := r.attempt(attempt, lost)
		if attempt == 1 {
			fin.Started = out.Started
		}
		fin.Result, fin.ExitCode, fin.Tail, fin.Finished = out.result, out.ExitCode, out.Tail, out.Finished
		if fin.Result == ResultSuccess || r.lostErr != nil || attempt > r.job.Retries || ctx.Err() != nil {
			return fin
		}
		r.log.Info("attempt failed; retrying", zap.Int("attempt", attempt), zap.String("result", fin.Result),
			zap.Duration("backoff", backoff))
		if !r.sleep(ctx, backoff, lost) {
			if r.lostErr != nil {
				fin.Result = ResultLockLost
			}
			return fin
		}
		backoff = min(backoff*2, maxRetryBackoff)
	}
}

// sleep waits d; it returns false when the run must stop instead (shutdown,
// kill, or lease lost).
func (r *run) sleep(ctx context.Context, d time.Duration, lost <-chan LeaseLost) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-r.deps.Kill:
	case l := <-lost:
		r.onLost(l)
	}
	return false
}

func (r *run) onLost(l LeaseLost) {
	r.lostErr = l.Err
	r.deps.Metrics.LeaseLost(r.job.Name)
}

// waitGrace waits node.grace_period before the lease is released (cut short
// when running runs are being killed).
func (r *run) waitGrace() {
	if r.deps.GracePeriod <= 0 {
		return
	}
	t := time.NewTimer(r.deps.GracePeriod)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.deps.Kill:
	}
}

// end releases the lease (owner "" = none held) and writes the history
// record in one round trip, on a fresh context (STYLE.md 7).
func (r *run) end(ctx context.Context, owner string, fin RunFinished) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, err := r.deps.Locker.Finish(rctx, r.job.Name, owner, record(fin)); err != nil {
		r.log.Warn("lease release and history record failed; the janitor retries the release", zap.Error(err))
		if owner != "" {
			r.phantom()
		}
	}
}

// record is the history entry of a finished run (SPEC.md §8).
func record(fin RunFinished) redislock.RunRecord {
	var slot int64
	if !fin.Slot.IsZero() {
		slot = fin.Slot.Unix()
	}
	return redislock.RunRecord{RunID: fin.RunID, Slot: slot, Node: fin.Node, Start: fin.Started,
		End: fin.Finished, Attempts: fin.Attempts, Result: fin.Result, ExitCode: fin.ExitCode,
		Fence: fin.Fence, OutputTail: string(lastBytes(fin.Tail, envTailSize))}
}

// report hands the result to the hook runner. It never blocks forever: when
// the hook runner's inbox is full it waits until it has room or Kill closes.
func (r *run) report(fin RunFinished) {
	select {
	case r.deps.Results <- fin:
		return
	default:
	}
	select {
	case r.deps.Results <- fin:
	case <-r.deps.Kill:
		r.log.Error("hook runner not accepting results; result dropped", zap.String("result", fin.Result))
	}
}

// env is the child's environment: the daemon's, the job's env, then the
// CRONLOCK_* variables of SPEC.md §5 (later entries win).
func (r *run) env(attempt int) []string {
	env := make([]string, 0, len(r.deps.Environ)+len(r.job.Env)+6)
	env = append(env, r.deps.Environ...)
	for k, v := range r.job.Env {
		env = append(env, k+"="+v)
	}
	sched := ""
	if !r.slot.IsZero() {
		sched = r.slot.UTC().Format(time.RFC3339)
	}
	return append(env, "CRONLOCK_JOB="+r.job.Name, "CRONLOCK_NODE_ID="+r.deps.NodeID,
		"CRONLOCK_RUN_ID="+r.id, "CRONLOCK_SCHEDULED_TIME="+sched,
		"CRONLOCK_FENCING_TOKEN="+strconv.FormatInt(r.fence, 10), "CRONLOCK_ATTEMPT="+strconv.Itoa(attempt))
}
