package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/google/uuid"
	"go.uber.org/zap"
)

// maxRetryBackoff caps the doubling retry delay of retry_backoff.
const maxRetryBackoff = 10 * time.Minute

// run is one execution of a job, whatever its trigger: claim → lease →
// attempts (with retries) → grace period → release with the history record
// → result to the hook runner. Scheduled, catch-up and manual runs all take
// this path; the trigger is data. It lives on a goroutine owned by the job
// actor.
type run struct {
	// job is the configuration the run was fired with, shared with the
	// job actor (never modified: NewJobOf).
	job   *config.Job
	env   []string // the job's base environment (jobBaseEnv); nil = built per attempt
	info  RunInfo  // Job, Slot and Trigger set by the job actor
	force bool     // a manual run that ignores pause (cronlock run -force)
	deps  *jobDeps
	// minSlot, minFence: the highest slot and fence the job actor has seen,
	// sent with the claim (state repair).
	minSlot, minFence int64
	// events tells the job actor that the claim has its answer and that
	// the release begins (runEvent).
	events        chan<- runEvent
	won           bool // the claim was won: the run goes on to its attempts
	releaseFailed bool // the release with the history record failed

	lease   *Lease
	log     *zap.Logger
	lostErr error // set once the lease is lost
	// fields are log's fields: the run's, then fence once claimed
	// (attempts add attempt).
	fields []zap.Field
	// replacedBy is the pending slot that replaces this run (overlap
	// replace), 0 = none.
	replacedBy int64

	// pre is the claim this run was handed by the Finish of the run before
	// it (a pending slot, overlap queue or replace): it does not claim.
	pre *handoff
	// next is what this run's Finish handed on: the pending slot, for the
	// job actor to start (nil = nothing).
	next *handoff

	recorded int // attempt whose run record exists (records.go); 0 = none
	// claimRecorded: the claim record (attempt 0, the lease before any
	// process) exists (records.go).
	claimRecorded bool
	reserved      bool // holds a place in deps.Load (capacity.go)
	inProgress    bool // the place counts as a run in progress (Load.Won)
	// gated: the run counts in deps.Claims from its start until its claim
	// is decided (ClaimGate; ungate ends it once).
	gated bool
	// firstDone ends this run's count among the node's first claims of
	// its instant (nodeload.Burst.First; nil = not counted); ungate calls it.
	firstDone func()
	// claimedAt is when the claim's answer came back (a won claim),
	// logged with "run started" as claimed_us (after the slot).
	claimedAt time.Time
	// claimDelay is the claim order's wait before the claim was sent
	// (capacity.go), logged with "run started" as claim_delay_us;
	// claimRank is this node's rank in the slot's claim order, reported
	// with the claim's answer (Load.Answered), when ranked.
	claimDelay time.Duration
	claimRank  int
	ranked     bool
	// queueClaim: this node's run of the job holds the lease (overlap
	// queue or replace), so the claim is expected to queue the slot, not
	// to start a run; it takes no place in deps.Load (capacity.go).
	queueClaim bool
	// due is Fire.Due: closed at the slot's fire time at (nil: it has
	// come). A claim sent before is early (ClaimRequest.Early); the
	// process starts once it is closed.
	due <-chan struct{}
	at  time.Time
}

// execute runs the job once and returns what happened: a skip reason, or
// the final result (which has also been sent to the hook runner).
func (r *run) execute(ctx context.Context) Ran {
	if r.info.RunID == "" {
		r.info.RunID = uuid.NewString()
	}
	r.info.Node = r.deps.NodeID
	r.relog()
	// From here until its claim is decided the run holds the node's other
	// winners' process starts (ClaimGate), also while the claim order
	// delays its claim (capacity.go).
	r.gate(false)
	defer r.ungate()
	if ctx.Err() != nil && r.pre == nil { // a handed-on slot is claimed: it runs
		r.events <- runEvent{kind: evClaimed, slot: r.info.Slot}
		return r.skip(SkipShuttingDown, nil)
	}
	if ran, ok := r.reserve(ctx); !ok {
		return ran // node at max_parallel (capacity.go)
	}
	defer r.unreserve()
	ran, ok := r.claim(ctx)
	if !ok {
		return ran
	}
	r.placeWon()
	r.ungate()
	r.recordClaim()                               // the lease is held before the process starts (the winners' gate, an early claim's lead)
	r.deps.Claims.wait(ClaimGateMax, r.deps.Kill) // the node's other claims of this instant first
	if r.due != nil {
		<-r.due // an early claim's run starts at the fire time (the ticker closes due then, or when it stops)
	}
	fin := r.attempts(ctx, r.lease.Lost(), r.lease.Replaced())
	if r.lease.Owner() != "" {
		r.waitGrace()
	}
	r.events <- runEvent{kind: evReleasing, slot: r.info.Slot}
	r.end(ctx, fin)
	r.passPlace()
	r.forgetGroup() // after the release: until then a restart frees the lease (records.go)
	r.report(fin)
	return Ran{Finished: fin}
}

// gate counts the run's claim as in flight in deps.Claims and, with
// first, among the node's first claims of its instant (deps.Burst), each
// unless it is counted already. ungate ends both.
func (r *run) gate(first bool) {
	if !r.gated {
		r.deps.Claims.begin()
		r.gated = true
	}
	if first && r.firstDone == nil {
		r.firstDone = r.deps.Burst.First(r.info.Slot.Unix())
	}
}

// ungate ends the run's count in deps.Claims (execute began it), once.
func (r *run) ungate() {
	if r.firstDone != nil {
		r.firstDone()
		r.firstDone = nil
	}
	r.ungateClaims()
}

// ungateClaims ends the run's count in deps.Claims only (its claim waits
// its turn: capacity.go), once.
func (r *run) ungateClaims() {
	if r.gated {
		r.gated = false
		r.deps.Claims.end()
	}
}

// skip logs and counts a slot that is not run (a manual run that is
// refused is logged, not counted: it is no slot).
func (r *run) skip(reason string, err error, fields ...zap.Field) Ran {
	if r.info.Trigger == TriggerManual {
		r.logger().Warn("manual run not started", append(fields, zap.String("reason", reason), zap.Error(err))...)
	} else {
		skipSlot(r.deps, r.job.Name, r.info.Slot, reason, fields...)
	}
	return Ran{Skip: reason, Err: err}
}

// claim runs the claim step (docs/protocol.md, "claim") and reports whether
// this node may run. A failed claim skips the slot (redis_error):
// fail-safe. A claim in flight when shutdown begins is completed, not
// abandoned: a slot that Redis gave us and nobody runs would be a silently
// missed run.
func (r *run) claim(ctx context.Context) (Ran, bool) {
	if r.pre != nil {
		return r.adopt()
	}
	useLease := r.job.Overlap != config.OverlapAllow || r.info.Trigger == TriggerManual
	req := ClaimRequest{Job: r.job.Name, Owner: r.info.Node + ":" + r.info.RunID, TTL: r.job.LockTTL,
		Lease: useLease, IgnorePause: r.force, MinSlot: r.minSlot, MinFence: r.minFence,
		NeedRecord: r.info.Trigger == TriggerCatchup}
	if r.info.Trigger != TriggerManual {
		req.MaxRuns = int64(r.job.MaxRuns)
	}
	if !r.info.Slot.IsZero() {
		req.Slot = r.info.Slot.Unix()
		req.Queue = queues(*r.job) && r.info.Trigger != TriggerBackfill
		req.Backfill = r.info.Trigger == TriggerBackfill
	}
	var c Claim
	var lease *Lease
	var err error
	var claimFrom time.Time
	if req.MaxRuns > 0 && !r.awaitFireTime(ctx) {
		// A job with max_runs is claimed at its fire time: a success that
		// another run of the job records in the lead would not be counted
		// by an early win (overlap: allow runs alongside).
		return r.notClaimed(SkipShuttingDown), false
	}
	for {
		// Before the fire time the claim is early: where it would skip,
		// it answers NotYet and is sent again at the fire time.
		req.Early = r.info.Trigger == TriggerSchedule && req.Slot > 0 && isEarly(r.due)
		claimFrom = time.Now()
		req.AnswerBy = r.answerBy(claimFrom)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.deps.ClaimTimeout)
		c, lease, err = acquire(cctx, r, r.deps.Locker, req,
			leaseOpts{replace: r.job.Overlap == config.OverlapReplace, maxRuns: int64(r.job.MaxRuns)})
		cancel()
		if err != nil || c.Outcome != NotYet || !req.Early {
			break
		}
		if c.Repaired {
			r.stateRepaired(c) // the claim at the fire time finds the state repaired
		}
		if !r.awaitFireTime(ctx) {
			return r.notClaimed(SkipShuttingDown), false
		}
		if next := r.nextSlot(); !next.IsZero() && !time.Now().Before(next) {
			// The early claim's answer came only once the job's next slot
			// had come (a Redis that hung and resumed): a claim sent now
			// would be for a slot that is no longer the job's latest,
			// which never runs late (docs/protocol.md, "Catch-up").
			err = fmt.Errorf("slot %d: %w", req.Slot, errEarlyAnswerAfterNextSlot)
			break
		}
	}
	r.claimedAt = time.Now()
	if took := r.claimedAt.Sub(claimFrom); err == nil && took > r.deps.ClaimTimeout {
		// Visible: without the late answer this slot would have been
		// skipped here and, the claim being applied, run nowhere.
		// The closure may be run later by another run's End (repeatLog):
		// it takes this logger, built here, never r's fields.
		log := r.logger()
		r.deps.repeats.Log(repeatLateAnswer, func(extra ...zap.Field) {
			log.Warn("claim answered after the claim timeout (redis or this node overloaded); acting on the late answer",
				append(extra, zap.Duration("took", took), zap.String("outcome", c.Outcome.String()))...)
		}, nil)
	} else if err == nil {
		r.deps.repeats.End(repeatLateAnswer)
	}
	r.ungate()
	if r.ranked && err == nil {
		r.deps.Load.Answered(r.claimRank, c.Outcome == Claimed, c.Outcome == ClaimedElsewhere)
	}
	if err == nil && c.LastRun > 0 && r.deps.Load != nil {
		r.deps.Load.RunTook(r.job.Name, c.LastRun) // the job's last run, as every claiming node read it
	}
	var refused *ClaimRefusedError
	isRefused := errors.As(err, &refused)
	r.won = err == nil && c.Outcome == Claimed
	// A refused claim was never sent (the Redis policy guard): like a
	// skipped claim it is not "failed", so fires held for it are decided
	// again, each refused with the same reason.
	r.events <- runEvent{kind: evClaimed, won: r.won, failed: err != nil && !isRefused, slot: r.info.Slot, claim: c}
	if isRefused {
		return r.skip(refused.Reason, err), false // nothing was sent: no phantom
	}
	if err != nil {
		log := r.logger() // built here: another run's End may write the line (repeatLog)
		r.deps.repeats.Log(repeatClaimFailed, func(extra ...zap.Field) {
			log.Warn("claim failed; not run", append(extra, zap.Error(err))...)
		}, nil)
		if useLease {
			r.phantom(req.Owner)
		}
		return r.skip(SkipRedisError, err), false
	}
	r.deps.repeats.End(repeatClaimFailed) // Redis answers again
	r.deps.repeats.End(SkipRedisError)
	if c.Repaired {
		r.stateRepaired(c)
	}
	owner := ""
	if useLease {
		owner = req.Owner
	}
	return r.answer(c, lease, owner)
}

// errEarlyAnswerAfterNextSlot is the claim error of a slot whose early
// claim (sent in the claim lead, answered NotYet) was answered only once
// the job's next slot had come: the claim at the fire time is not sent.
var errEarlyAnswerAfterNextSlot = errors.New("the early claim was answered only after the job's next slot had come; the slot is not claimed")

// awaitFireTime waits for the slot's fire time (r.due) before a claim is
// sent at it, and reports false when the shutdown began meanwhile (the
// slot is then not claimed, as for a fire that came after). Waiting is no
// claim in flight: it holds neither the node's winners (ClaimGate) nor its
// later claims of the instant (the burst order).
func (r *run) awaitFireTime(ctx context.Context) bool {
	if !isEarly(r.due) {
		return true
	}
	r.ungate()
	<-r.due
	if ctx.Err() != nil {
		return false
	}
	r.gate(false)
	return true
}

// maxLateAnswer bounds how long after the claim timeout the answer of a
// scheduled claim already sent is still waited for (answerBy): 5 s after
// the claim was sent in all, less than a failover takes to be decided
// (Sentinel's down-after-milliseconds and Cluster's node-timeout, which
// docs/protocol.md asks to keep at 5 s or more), so that a late answer
// comes from the master the other nodes also claim on, not from a frozen
// old master that resumed after a replica took over.
const maxLateAnswer = 3 * time.Second

// answerBy is ClaimRequest.AnswerBy of a scheduled claim started at now
// (zero for other triggers). Once sent, a claim may have been applied by
// Redis even when its answer is late (an overloaded node or server, e.g. at
// a herd of thousands of claims on a small machine), and then every other
// node finds the slot claimed: giving up on it at the claim timeout would
// leave the slot run nowhere. So the answer is waited for, and acted on,
// while all of these hold: the job's next slot has not come (a claim
// answered later is for a slot that is no longer the latest: an outage's
// slots are skipped, and the catch-up runs only the latest, see
// docs/protocol.md "Catch-up"), the lease it takes has lived less than a
// third of lock_ttl (the lease's first renewal is due then), and at most
// maxLateAnswer after the claim timeout.
func (r *run) answerBy(now time.Time) time.Time {
	if r.info.Trigger != TriggerSchedule || r.info.Slot.IsZero() || r.job.Sched == nil {
		return time.Time{}
	}
	by := now.Add(r.deps.ClaimTimeout + maxLateAnswer)
	if lease := now.Add(r.job.LockTTL / 3); lease.Before(by) {
		by = lease
	}
	if next := r.nextSlot(); !next.IsZero() && next.Before(by) {
		by = now.Add(next.Sub(now)) // on now's monotonic clock: a wall clock step does not stretch the wait
	}
	return by
}

// nextSlot is the fire time of the job's slot after this run's, for a
// scheduled slot; zero for other triggers and for a job with no later
// slot.
func (r *run) nextSlot() time.Time {
	if r.info.Trigger != TriggerSchedule || r.info.Slot.IsZero() || r.job.Sched == nil {
		return time.Time{}
	}
	return r.job.Sched.Next(r.info.Slot)
}

// answer acts on a claim's answer: a won claim keeps its lease and fence
// (and takes over a pending slot the claim took); any other outcome is
// logged and, for a slot, counted as a skip (a queued slot is not a skip).
// owner is the lease value the claim asked for ("" without a lease): a won
// claim that was not replicated releases it.
func (r *run) answer(c Claim, lease *Lease, owner string) (Ran, bool) {
	switch c.Outcome {
	case Claimed:
		r.deps.repeats.End(repeatNotReplicated) // replicas acknowledge again
		r.deps.repeats.End(SkipNotReplicated)
		if c.Takes > 0 {
			r.takePending(c.Takes)
		}
		r.lease, r.info.Fence = lease, c.Fence
		r.relog()
		return Ran{}, true
	case Paused:
		return r.skip(SkipPaused, nil), false
	case Overlap:
		if r.info.Trigger == TriggerBackfill { // the caller claims again: not a skip yet
			r.logger().Debug("backfill slot not claimed: the lease is held", zap.String("lease_holder", c.Holder))
			return Ran{Skip: SkipOverlap}, false
		}
		if c.Pending > 0 {
			return r.skip(SkipOverlap, nil, zap.String("lease_holder", c.Holder), zap.Int64("pending_slot", c.Pending)), false
		}
		return r.skip(SkipOverlap, nil, zap.String("lease_holder", c.Holder)), false
	case Queued:
		return r.queued(c), false
	case AlreadyRun:
		r.logger().Info("backfill slot not run: an earlier backfill ran it")
		return Ran{Skip: SkipAlreadyRun}, false
	case MaxRunsReached:
		return r.skip(SkipMaxRuns, nil, zap.Int("max_runs", r.job.MaxRuns)), false
	case NotReplicated:
		log := r.logger() // built here: another run's End may write the line (repeatLog)
		r.deps.repeats.Log(repeatNotReplicated, func(extra ...zap.Field) {
			log.Warn("claim not replicated; not run: fewer replicas than redis.min_replicas_acked acknowledged it "+
				"within redis.replica_ack_timeout, and a failover could forget it; releasing the lease",
				append(extra, zap.Int("replicas_acked", c.Replicas), zap.Int64("fence", c.Fence))...)
		}, nil)
		if owner != "" {
			r.releaseUnrun(owner)
		}
		if c.Takes > 0 { // the claim took a pending slot: not run either; its own slot stays pending
			r.logger().Info("pending slot taken by the claim not run either: the claim was not replicated",
				zap.Int64("pending_slot", c.Takes))
		}
		return r.skip(SkipNotReplicated, nil, zap.Int("replicas_acked", c.Replicas)), false
	case NotYet: // only an early claim may get it (the claim loop sends it again)
		return r.skip(SkipRedisError, fmt.Errorf("claim answered %v to a claim that was not early", c.Outcome)), false
	case NoRecord:
		r.logger().Warn("catch-up not run: the lock backend holds no record of the job's last claimed slot (a new job, " +
			"or redis lost its state and no live node remembers it), so this slot may already have run")
		return r.skip(SkipNoRecord, nil), false
	}
	return r.skip(SkipClaimedElsewhere, nil), false
}

// stateRepaired reports a claim that had to raise the job's state to what
// this node had seen: Redis lost data (docs/protocol.md, "State repair").
func (r *run) stateRepaired(c Claim) {
	r.deps.Metrics.StateRepaired(r.job.Name)
	r.logger().Warn("claim state repaired: redis had lost the job's claimed slot or fencing token "+
		"(restart without persistence, eviction or failover); raised to what this node had seen",
		zap.Int64("found_slot", c.FoundSlot), zap.Int64("found_fence", c.FoundFence),
		zap.Int64("state_slot", c.StateSlot), zap.Int64("state_fence", c.StateFence))
}

// releaseUnrun releases the lease of a won claim that is not run, on a
// fresh context bounded by the claim timeout; when that fails the janitor
// releases it later.
func (r *run) releaseUnrun(owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.deps.ClaimTimeout)
	defer cancel()
	if _, err := r.deps.Locker.Release(ctx, r.job.Name, owner); err != nil {
		r.logger().Warn("lease of a claim not run not released; the janitor retries", zap.Error(err))
		r.phantom(owner)
	}
}

// phantom hands a lease whose state is unknown to the janitor, so that a
// claim applied by Redis after our timeout never blocks the job for
// lock_ttl (docs/protocol.md, "Phantom leases and the janitor").
func (r *run) phantom(owner string) { r.sendPhantom(owner, false) }

// sendPhantom is phantom; handedOn marks the lease a failed finish may
// have handed to the job's pending slot (Phantom.HandedOn).
func (r *run) sendPhantom(owner string, handedOn bool) {
	p := Phantom{Job: r.job.Name, Owner: owner, Until: time.Now().Add(r.job.LockTTL), HandedOn: handedOn}
	select {
	case r.deps.Phantoms <- p:
	default:
		r.logger().Warn("janitor queue full; a phantom lease may block the job until lock_ttl")
	}
}

// attempts runs the command up to 1+retries times.
func (r *run) attempts(ctx context.Context, lost <-chan LeaseLost, replaced <-chan int64) RunFinished {
	fin := RunFinished{RunInfo: r.info, Cfg: *r.job}
	backoff := r.job.RetryBackoff
	for attempt := 1; ; attempt++ {
		fin.Attempts = attempt
		// Every later line of the run carries the attempt.
		r.log = r.deps.Log.WithLazy(slices.Concat(r.runFields(), []zap.Field{zap.Int("attempt", attempt)})...)
		out := r.attempt(attempt, lost, replaced)
		if attempt == 1 {
			fin.Started = out.Started
		}
		fin.Result, fin.ExitCode, fin.Signal = out.result, out.ExitCode, out.Signal
		fin.Tail, fin.Finished = out.Tail, out.Finished
		if fin.Result == ResultSuccess || r.lostErr != nil || r.replacedBy != 0 || attempt > r.job.Retries || ctx.Err() != nil {
			return fin
		}
		r.logger().Info("attempt failed; retrying", zap.String("result", fin.Result),
			zap.Duration("backoff", backoff))
		if !r.sleep(ctx, backoff, lost, replaced) {
			switch {
			case r.lostErr != nil:
				fin.Result = ResultLockLost
			case r.replacedBy != 0:
				fin.Result = ResultReplaced
			}
			return fin
		}
		backoff = min(backoff*2, maxRetryBackoff)
	}
}

// sleep waits d; it returns false when the run must stop instead (shutdown,
// kill, lease lost, or replaced).
func (r *run) sleep(ctx context.Context, d time.Duration, lost <-chan LeaseLost, replaced <-chan int64) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-r.deps.Kill:
	case l := <-lost:
		r.onLost(l)
	case slot := <-replaced:
		r.onReplaced(slot)
	}
	return false
}

// onReplaced notes the pending slot that replaces this run (overlap
// replace): no further attempt is made, and the result is replaced.
func (r *run) onReplaced(slot int64) {
	r.replacedBy = slot
	r.logger().Info("run replaced: a newer slot is pending (overlap replace); terminating the run",
		zap.Int64("pending_slot", slot), zap.Duration("kill_grace", r.job.KillGrace))
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

// end releases the lease and writes the history record in one round trip;
// a lease whose release failed goes to the janitor. With overlap queue or
// replace the same call hands the lease to the job's pending slot (r.next),
// unless shutdown has begun: then a pending slot is left for another
// node's next claim.
func (r *run) end(ctx context.Context, fin RunFinished) {
	var next string
	var nextID string
	if queues(*r.job) && r.info.Trigger != TriggerBackfill && ctx.Err() == nil {
		nextID = uuid.NewString()
		next = r.info.Node + ":" + nextID
	}
	var nextLog *zap.Logger // only a lease handed on logs (Finished.Fence > 0 needs a Next)
	if next != "" {
		nextLog = r.deps.Log.With(zap.String("job", r.job.Name), zap.String("run_id", nextID),
			zap.String("node_id", r.info.Node), zap.String("trigger", string(TriggerQueued)))
	}
	cur := *r.job
	if p := r.deps.latest.Load(); p != nil {
		cur = *p // a reload since the claim applies to the lease handed on
	}
	f, lease, err := r.lease.endHanding(ctx, fin.Record(), next, nextLog, cur.LockTTL,
		leaseOpts{replace: cur.Overlap == config.OverlapReplace, maxRuns: int64(cur.MaxRuns)})
	if err != nil {
		r.releaseFailed = true
		r.unfinished(fin.Record(), err, cur)
		if owner := r.lease.Owner(); owner != "" {
			r.phantom(owner)
			if next != "" { // the call may have handed it the lease
				r.sendPhantom(next, true)
			}
		}
		return
	}
	switch {
	case f.Pending > 0 && f.NotReplicated:
		r.logger().Warn("pending slot handed the lease but not run: fewer replicas than redis.min_replicas_acked "+
			"acknowledged the hand-over within redis.replica_ack_timeout, and a failover could forget it; releasing the lease",
			zap.Int64("pending_slot", f.Pending), zap.Int("replicas_acked", f.Replicas), zap.Int64("fence", f.Fence))
		r.releaseUnrun(next)
		skipSlot(r.deps, r.job.Name, time.Unix(f.Pending, 0), SkipNotReplicated, zap.Int("replicas_acked", f.Replicas))
	case f.Pending > 0 && lease != nil:
		r.next = &handoff{slot: time.Unix(f.Pending, 0), runID: nextID, lease: lease, fence: f.Fence,
			stateSlot: f.StateSlot, stateFence: f.StateFence}
	case f.Pending > 0 && f.Left && r.info.Trigger == TriggerBackfill:
		r.logger().Info("pending slot left for the next claim of the job, which runs it: a backfill run does not hand on the lease",
			zap.Int64("pending_slot", f.Pending))
	case f.Pending > 0 && f.Left:
		r.logger().Info("pending slot left for another node: this node stops; the next claim of the job runs it",
			zap.Int64("pending_slot", f.Pending))
	case f.Pending > 0:
		skipSlot(r.deps, r.job.Name, time.Unix(f.Pending, 0), SkipMaxRuns, zap.Int("max_runs", cur.MaxRuns))
	}
}

// unfinished hands a finish that failed (Redis may or may not have
// applied it) to the janitor, which sends it again until the run is
// recorded (FinishRequest.Retry: once, applied or not).
func (r *run) unfinished(rec RunRecord, err error, cur config.Job) {
	req := FinishRequest{Job: r.job.Name, Owner: r.lease.Owner(), Record: rec, MaxRuns: int64(cur.MaxRuns), Retry: true}
	if r.deps.Finishes != nil {
		select {
		case r.deps.Finishes <- req:
			r.logger().Warn("lease release and history record failed; the janitor sends them again", zap.Error(err))
			return
		default:
		}
	}
	r.logger().Error("lease release and history record failed, and the janitor's queue is full: the run's record is lost; "+
		"the janitor retries the release", zap.Error(err))
}

// report records the run's metrics (cronlock_runs_total, duration, last
// success) here, where the run ends, so that no hook can delay them, then
// hands the result to the hook runner. It never blocks forever: when the
// hook runner's inbox is full it waits until it has room or Kill closes.
func (r *run) report(fin RunFinished) {
	r.deps.Metrics.RunFinished(fin.Job, fin.Result, fin.Finished.Sub(fin.Started), fin.Finished)
	select {
	case r.deps.Results <- fin:
		return
	default:
	}
	select {
	case r.deps.Results <- fin:
	case <-r.deps.Kill:
		r.logger().Error("hook runner not accepting results; result dropped", zap.String("result", fin.Result))
	}
}

// relog marks the run's fields (job, run id, node, trigger, and the slot
// and fence once known) and its logger as changed: both are built again
// from r.info at their next use (runFields, logger), so that a change of
// the run's slot or fence reaches every later line (attempts build their
// loggers from runFields). A run that only finds its slot claimed
// elsewhere builds neither: it logs nothing at info (its skip line is
// written by skipSlot with its own fields). The fields are encoded when
// the run first logs, not here, and each logger of the run is one layer
// on the daemon's, so that only the one that logs is encoded, once.
func (r *run) relog() { r.fields, r.log = nil, nil }

// runFields returns the run's log fields (relog), building them at the
// first call after a change. The slice is new each time: loggers made
// before (the lease's) keep theirs.
func (r *run) runFields() []zap.Field {
	if r.fields != nil {
		return r.fields
	}
	f := make([]zap.Field, 4, 7) // room for slot, fence and an attempt's number
	f[0], f[1] = zap.String("job", r.job.Name), zap.String("run_id", r.info.RunID)
	f[2], f[3] = zap.String("node_id", r.info.Node), zap.String("trigger", string(r.info.Trigger))
	if !r.info.Slot.IsZero() {
		f = append(f, slotField(r.info.Slot))
	}
	if r.info.Fence != 0 {
		f = append(f, zap.Int64("fence", r.info.Fence))
	}
	r.fields = f
	return f
}

// logger returns the run's logger (relog), building it at the first call
// after a change.
func (r *run) logger() *zap.Logger {
	if r.log == nil {
		r.log = r.deps.Log.WithLazy(r.runFields()...)
	}
	return r.log
}
