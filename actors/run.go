package actors

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/cronlock/cronlock/ledger"

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
	// seenSeq, seenRuns: the highest ledger seq and run count the job
	// actor has seen, sent with the claim (docs/protocol.md, R5, R6).
	seenSeq, seenRuns int64
	// sent is when the claim was sent (monotonic), redisNow Redis time
	// as the claim answered: rule R3 counts the lease and the answer
	// window from them.
	sent, redisNow time.Time
	// events tells the job actor that the claim has its answer and that
	// the release begins (runEvent).
	events chan<- runEvent
	won    bool // the claim was won: the run goes on to its attempts
	// claimed is the answer of a won claim, reported to the job actor
	// (evClaimed) once the start check (R3) has said whether it starts.
	claimed       ledger.Claim
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
	// recordGiveUp is closed when awaitRecord stops waiting for the
	// current attempt's record write (records.go).
	recordGiveUp chan struct{}
	reserved     bool // holds a place in deps.Load (capacity.go)
	// ranked: reserve placed this node in the slot's claim order (rank:
	// 0 claims first; cluster.Load.Enter).
	ranked     bool
	rank       int
	inProgress bool // the place counts as a run in progress (Load.Won)
	// queueClaim: this node's run of the job holds the lease, so the
	// claim is expected to queue the slot (overlap queue or replace) or
	// record it skipped (skip), not to start a run; it takes no place in
	// deps.Load (capacity.go).
	queueClaim bool
	// localOverlap: this node runs the job (overlap skip), so the claim
	// is expected to find the lease held by that run: skip overlap_local.
	localOverlap bool
	// finished is the answer of the run's finish (nil: none came).
	finished *ledger.Finished
	// finishSent is when the finish that may hand the lease on was sent
	// (monotonic): the handed-on run's lease counts from it (R3).
	finishSent time.Time
	// out redacts, keeps and publishes the run's output (output.go); nil =
	// only logged.
	out *runOutput
}

// execute runs the job once and returns what happened: a skip reason, or
// the final result (which has also been sent to the hook runner).
func (r *run) execute(ctx context.Context) Ran {
	if r.info.RunID == "" {
		r.info.RunID = uuid.NewString()
	}
	r.info.Node = r.deps.NodeID
	r.relog()
	if ctx.Err() != nil && r.pre == nil { // a handed-on slot is claimed: it runs (or is recorded)
		r.events <- runEvent{kind: evClaimed, slot: r.info.Slot}
		return r.skip(ledger.SkipShuttingDown, nil)
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
	reason, late := r.startCheck()
	if r.pre == nil { // adopt reported its claim already
		if late {
			// Not won for the job actor: the fires it holds are decided
			// again (claimed now), not skipped overlap_local behind a run
			// that never starts; told after the release (notStarted).
			r.won = false
			defer func() { r.events <- runEvent{kind: evClaimed, slot: r.info.Slot, claim: r.claimed, decided: true} }()
		} else {
			r.events <- runEvent{kind: evClaimed, won: true, slot: r.info.Slot, claim: r.claimed, decided: true}
		}
	}
	if late {
		return r.notStarted(ctx, reason)
	}
	if r.deps.Watch != nil {
		r.deps.Watch.RunStarted(r.info, r.job, time.Now())
	}
	r.out = r.newRunOutput()
	r.out.start()
	fin := r.attempts(ctx, r.lease.Lost(), r.lease.Replaced())
	r.out.stop(r.deps.Retention) // before the finish: a reader that sees the run ended finds its output
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

// skip logs and counts a slot that is not run (a manual run that is
// refused is logged, not counted: it is no slot).
func (r *run) skip(reason string, err error, fields ...zap.Field) Ran {
	if r.info.Trigger == ledger.TriggerManual {
		r.logger().Warn("manual run not started", append(fields, zap.String("reason", reason), zap.Error(err))...)
	} else {
		skipSlot(r.deps, r.job.Name, r.info.Slot, reason, fields...)
	}
	return Ran{Skip: reason, Err: err}
}

// windows are the job's claim windows (docs/protocol.md, R2).
func (r *run) windows() ledger.Windows {
	return ledger.Windows{Early: r.deps.MaxSkew, Answer: ledger.AnswerWindow(r.deps.MaxSkew, r.job.LockTTL, r.job.Jitter),
		Catchup: r.job.CatchupWindow}
}

// claim sends the claim (docs/protocol.md, R1–R7) and reports whether this
// node may run. A failed claim skips the slot (redis_error): fail-safe.
// A claim in flight when shutdown begins is completed, not abandoned: a
// slot Redis gave us and nobody runs would be silently missed.
func (r *run) claim(ctx context.Context) (Ran, bool) {
	if r.pre != nil {
		return r.adopt()
	}
	useLease := r.job.Overlap != config.OverlapAllow || r.info.Trigger == ledger.TriggerManual
	req := ledger.ClaimRequest{Job: r.job.Name, Trigger: r.info.Trigger, Node: r.info.Node, RunID: r.info.RunID,
		TTL: r.job.LockTTL, Lease: useLease, IgnorePause: r.force, SeenSeq: r.seenSeq, SeenRuns: r.seenRuns,
		Windows: r.windows(), Retention: r.deps.Retention}
	if r.info.Trigger != ledger.TriggerManual {
		req.MaxRuns = int64(r.job.MaxRuns)
		req.Slot = r.info.Slot.Unix()
		req.Queue = queues(*r.job) && r.info.Trigger == ledger.TriggerSchedule
	}
	var c ledger.Claim
	var lease *Lease
	var err error
	peeked := false
	if r.ranked && r.info.Trigger == ledger.TriggerSchedule {
		if r.rank == 0 {
			r.deps.Load.FirstSent(req.Slot)
			defer r.deps.Load.FirstAnswered(req.Slot)
		} else {
			var stop bool
			var perr error
			c, peeked, stop, perr = r.peek(ctx, req.Slot)
			switch {
			case stop:
				return r.notClaimed(ledger.SkipShuttingDown), false
			case perr != nil:
				return r.readFailed(perr), false
			}
		}
	}
	if !peeked {
		c, lease, err = r.send(ctx, req)
	}
	for tries := 0; err == nil && c.Outcome == ledger.TooEarly; tries++ {
		// Sent before the slot in Redis time (this clock is fast, within
		// the early edge): sent again once Redis time has reached it (R2),
		// by Redis time as it answered (in milliseconds: a claim sent less
		// than one early is answered too_early once more, and sent again).
		if tries == 3 {
			c.Outcome = ledger.ClockSkew // Redis time does not advance as the answers say
			break
		}
		sleepCtx(context.WithoutCancel(ctx), r.info.Slot.Sub(c.Now)-time.Since(r.sent))
		c, lease, err = r.send(ctx, req)
	}
	var refused *ledger.ClaimRefusedError
	isRefused := errors.As(err, &refused)
	r.won = err == nil && c.Outcome == ledger.Claimed
	if r.won {
		r.claimed = c // reported after the start check (execute)
	} else {
		r.events <- runEvent{kind: evClaimed, failed: err != nil && !isRefused, slot: r.info.Slot, claim: c,
			decided: err == nil && recorded(c.Outcome)}
	}
	if isRefused {
		return r.skip(refused.Reason, err), false // nothing was sent: no phantom
	}
	if err != nil {
		log := r.logger() // built here: another run's End may write the line (repeatLog)
		r.deps.repeats.Log(repeatClaimFailed, func(extra ...zap.Field) {
			log.Warn("claim failed; not run", append(extra, zap.Error(err))...)
		}, nil)
		r.unanswered(req, useLease, err)
		return r.skip(ledger.SkipRedisError, err), false
	}
	r.deps.repeats.End(repeatClaimFailed) // Redis answers again
	r.deps.repeats.End(repeatReadFailed)
	r.deps.repeats.End(ledger.SkipRedisError)
	if c.Repaired {
		r.stateRepaired(c)
	}
	r.redisNow = c.Now
	owner := ""
	if useLease {
		owner = req.Owner()
	}
	return r.answer(c, lease, owner)
}

// peek is a lower-ranked node's read of its slot's record before the
// claim (cluster.Load.Settled says why). With B = min(node.max_clock_skew,
// lock_ttl), the clock term of the answer window W = B + jitter, and the
// slot's latest fire F = slot + jitter, both in Redis time (this node's
// clock corrected by its offset from Redis's as the health check last
// measured it, cronlock_clock_skew_seconds): it waits until this node's
// rank-0 claims of the slot are answered, at most until F + B/2, then
// reads the record, answered by F + 3B/4, so that a claim that follows
// leaves at least B/4 before the window ends (S + W). With less than that
// left it does not read. When none of those rank-0 claims was sent or
// answered for cluster.SettleStall, Redis is not answering this node (an
// outage, not a herd): it does not read either and the claim goes at
// once, as without the claim order's read.
//
// found: the slot has a record and the ledger holds all this node has seen
// of it (seq and successful runs; otherwise the claim must go, to repair
// it: R5, R6), and c is the answer the claim would have given
// (ClaimedElsewhere, the record's status and reason; R1). stop: shutdown
// began while it waited; nothing was claimed. err: the read failed (Redis
// did not answer it in the time a claim had left, or its connection
// failed): the slot is skipped redis_error, as a claim's failure skips
// it; a claim sent after a failed connection would come after the outage
// and run an outage slot late. Otherwise the claim, which decides, is sent.
func (r *run) peek(ctx context.Context, slot int64) (c ledger.Claim, found, stop bool, err error) {
	p, ok := r.deps.Locker.(ledger.Peeker)
	if !ok {
		return ledger.Claim{}, false, false, nil
	}
	b := min(r.deps.MaxSkew, r.job.LockTTL)
	// F on this node's clock: Redis time plus its offset (local − Redis),
	// bounded by B (beyond it the claim is refused clock_skew anyway).
	latestFire := r.info.Slot.Add(r.job.Jitter + max(-b, min(b, r.deps.Metrics.ClockSkew())))
	settled := r.deps.Load.Settled(slot)
wait:
	for {
		stallIn, inFlight := r.deps.Load.StallIn(slot)
		if !inFlight {
			break // answered meanwhile
		}
		if stallIn <= 0 {
			return ledger.Claim{}, false, false, nil
		}
		left := latestFire.Add(b / 2).Sub(r.deps.Now())
		if left <= 0 {
			break
		}
		t := time.NewTimer(min(left, stallIn))
		select {
		case <-settled:
			t.Stop()
			break wait
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ledger.Claim{}, false, true, nil
		}
	}
	left := latestFire.Add(3 * b / 4).Sub(r.deps.Now())
	if left <= 0 {
		return ledger.Claim{}, false, false, nil
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(left, r.deps.ClaimTimeout))
	defer cancel()
	c, found, err = p.Peek(pctx, r.job.Name, slot)
	if err != nil {
		return ledger.Claim{}, false, false, err
	}
	if !found || c.Seq < r.seenSeq || c.Runs < r.seenRuns {
		return ledger.Claim{}, false, false, nil
	}
	return c, true, false, nil
}

// readFailed skips a slot whose record read (peek) failed: no claim was
// sent, so no lease can exist (redis_error). Its warning, summarised while
// it repeats, says it was the read.
func (r *run) readFailed(err error) Ran {
	r.events <- runEvent{kind: evClaimed, failed: true, slot: r.info.Slot}
	log := r.logger()
	r.deps.repeats.Log(repeatReadFailed, func(extra ...zap.Field) {
		log.Warn("record read failed; not claimed, not run: redis did not answer the read of the slot's record "+
			"in the time a claim had left, or its connection failed (docs/protocol.md, claim order)", append(extra, zap.Error(err))...)
	}, nil)
	return r.skip(ledger.SkipRedisError, err)
}

// recorded reports whether a claim answered o leaves the slot with a
// record in the ledger (R1): the audit has nothing to add for it.
func recorded(o ledger.Outcome) bool {
	switch o {
	case ledger.Claimed, ledger.ClaimedElsewhere, ledger.Paused, ledger.Overlap, ledger.Queued, ledger.MaxRunsReached, ledger.StateLost, ledger.NotReplicated:
		return true
	}
	return false
}

// send sends req once, bounded by the claim timeout (a claim in flight at
// shutdown is completed), noting when it was sent (r.sent, monotonic: the
// lease and the answer window count from there, R3).
func (r *run) send(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, *Lease, error) {
	r.sent = time.Now()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.deps.ClaimTimeout)
	defer cancel()
	return acquire(cctx, r, r.deps.Locker, req,
		leaseOpts{replace: r.job.Overlap == config.OverlapReplace, maxRuns: int64(r.job.MaxRuns), maxSkew: r.deps.MaxSkew})
}

// answer acts on a claim's answer: a won claim keeps its lease and token
// (and takes over a pending slot the claim took); any other outcome is
// logged and, for a slot, counted as a skip (a queued slot is not a skip).
// owner is the lease value the claim asked for ("" without a lease).
func (r *run) answer(c ledger.Claim, lease *Lease, owner string) (Ran, bool) {
	if c.Expired > 0 {
		r.logger().Info("pending slot dropped: a later slot came due before it could run (docs/protocol.md, R7)",
			zap.Int64("pending_slot", c.Expired), zap.String("reason", ledger.SkipExpired))
		r.deps.Metrics.Skip(r.job.Name, ledger.SkipExpired)
	}
	switch c.Outcome {
	case ledger.Claimed:
		r.deps.repeats.End(repeatNotReplicated)
		r.deps.repeats.End(ledger.SkipNotReplicated)
		r.deps.repeats.End(ledger.SkipClockSkew)
		r.deps.repeats.End(ledger.SkipClaimLate)
		if c.Takes > 0 {
			r.takePending(c.Takes)
		}
		r.lease, r.info.Fence = lease, c.Token
		r.relog()
		return Ran{}, true
	case ledger.Paused:
		return r.skip(ledger.SkipPaused, nil), false
	case ledger.Overlap:
		if r.localOverlap && strings.HasPrefix(c.Holder, r.info.Node+":") { // this node's own run: the job runs longer than its period
			return r.skip(ledger.SkipOverlapLocal, nil, zap.String("lease_holder", c.Holder)), false
		}
		if c.Pending > 0 {
			return r.skip(ledger.SkipOverlap, nil, zap.String("lease_holder", c.Holder), zap.Int64("pending_slot", c.Pending)), false
		}
		return r.skip(ledger.SkipOverlap, nil, zap.String("lease_holder", c.Holder)), false
	case ledger.Queued:
		return r.queued(c), false
	case ledger.MaxRunsReached:
		return r.skip(ledger.SkipMaxRuns, nil, zap.Int("max_runs", r.job.MaxRuns)), false
	case ledger.ClockSkew:
		return r.clockSkew(c), false
	case ledger.OutsideWindow:
		return r.skip(ledger.SkipOutsideClaimWindow, nil, zap.Time("redis_time", c.Now)), false
	case ledger.StateLost:
		r.logger().Warn("slot not run: redis lost the job's ledger around it, so it may already have run "+
			"(docs/protocol.md, R5)", zap.Time("lost_at", c.Now))
		return r.skip(ledger.SkipStateLost, nil), false
	case ledger.OutsideRetention:
		return r.skip(ledger.SkipOutsideRetention, nil), false
	case ledger.NoRecord:
		return r.skip(ledger.SkipNoRecord, nil), false
	case ledger.NotReplicated:
		log := r.logger() // built here: another run's End may write the line (repeatLog)
		r.deps.repeats.Log(repeatNotReplicated, func(extra ...zap.Field) {
			log.Warn("claim not replicated; not run: fewer replicas than redis.min_replicas_acked acknowledged it "+
				"within redis.replica_ack_timeout, and a failover could forget it; releasing the lease",
				append(extra, zap.Int("replicas_acked", c.Replicas), zap.Int64("fence", c.Token))...)
		}, nil)
		r.info.Fence = c.Token
		r.recordUnrun(owner, ledger.SkipNotReplicated)
		return r.skip(ledger.SkipNotReplicated, nil, zap.Int("replicas_acked", c.Replicas)), false
	}
	if r.info.Trigger == ledger.TriggerBackfill {
		// The caller lists it: not a skip of the schedule. A record that
		// ran nothing (state_lost without -force) says why instead.
		if c.Status == "skipped" || c.Status == "missed" {
			return Ran{Skip: c.Reason}, false
		}
		return Ran{Skip: ledger.SkipAlreadyRun}, false
	}
	if c.Status == "skipped" && c.Reason != "" {
		// Another node decided the slot without running it: every node
		// reports the ledger's reason (overlap, paused, max_runs, ...); the
		// node whose own run overlaps, overlap_local.
		if r.localOverlap && c.Reason == ledger.SkipOverlap {
			return r.skip(ledger.SkipOverlapLocal, nil), false
		}
		return r.skip(c.Reason, nil, zap.String("decided_by", "ledger")), false
	}
	return r.skip(ledger.SkipClaimedElsewhere, nil, zap.String("record", c.Status), zap.String("record_reason", c.Reason)), false
}

// clockSkew reports a claim refused because Redis time was outside the
// slot's claim window (docs/protocol.md, R2). The script ran at Redis time
// c.Now, at a local time between the claim's send and its answer, so this
// node's offset from Redis time (local − Redis) lies in [lo, hi]. It is
// clock_skew when the clock alone puts the claim outside the window: fast
// by more than node.max_clock_skew (lo > E: a claim before the early edge)
// or, for a claim past the window, behind by more than the answer window
// W (hi < −W: its fire, at its own S, is already past S + W in Redis
// time); a warning says fix NTP, with the offset (the end of [lo, hi]
// nearer zero) and both bounds. Otherwise the claim itself came late
// (claim_late: the node or Redis overloaded or paused; a clock behind by
// less than W only shortened the time it had): a warning with how late,
// when it left, its round trip and the offset. Both are summarised while
// they repeat.
func (r *run) clockSkew(c ledger.Claim) Ran {
	recv, rtt := r.deps.Now(), time.Since(r.sent)
	sent := recv.Add(-rtt)
	lo, hi := sent.Sub(c.Now), recv.Sub(c.Now)
	offset := lo
	if hi < 0 {
		offset = hi
	}
	w := r.windows().Answer
	end := r.info.Slot.Add(w)
	log := r.logger()
	if c.Now.After(end) && hi >= -w && lo <= r.deps.MaxSkew {
		r.deps.repeats.Log(ledger.SkipClaimLate, func(extra ...zap.Field) {
			log.Warn("claim refused: it reached redis after the slot's answer window; this node's clock does not explain it "+
				"alone, so the claim came late (this node or redis overloaded or paused) and nothing runs (docs/protocol.md, R2)",
				append(extra, zap.Duration("late_by", c.Now.Sub(end)), zap.Duration("sent_after_slot", sent.Sub(r.info.Slot)),
					zap.Duration("claim_round_trip", rtt), zap.Duration("offset_from_redis", offset), zap.Time("redis_time", c.Now))...)
		}, nil)
		r.deps.Metrics.Skip(r.job.Name, ledger.SkipClaimLate)
		r.deps.noteLocal(r.info.Slot, ledger.SkipClaimLate)
		return Ran{Skip: ledger.SkipClaimLate}
	}
	r.deps.repeats.Log(ledger.SkipClockSkew, func(extra ...zap.Field) {
		log.Warn("claim refused: redis time is outside the slot's claim window by this node's clock (fast by more than "+
			"node.max_clock_skew, or behind by more than the answer window), so it runs nothing: fix NTP (docs/protocol.md, R2)",
			append(extra, zap.Duration("offset_from_redis", offset), zap.Duration("offset_at_least", lo),
				zap.Duration("offset_at_most", hi), zap.Time("redis_time", c.Now))...)
	}, nil)
	r.deps.Metrics.Skip(r.job.Name, ledger.SkipClockSkew)
	r.deps.noteLocal(r.info.Slot, ledger.SkipClockSkew)
	return Ran{Skip: ledger.SkipClockSkew}
}

// stateRepaired reports a claim that found the job's ledger behind what
// this node had seen: Redis lost data (docs/protocol.md, R5).
func (r *run) stateRepaired(c ledger.Claim) {
	r.deps.Metrics.StateRepaired(r.job.Name)
	r.logger().Warn("ledger state repaired: redis had lost part of the job's ledger (restart without persistence, "+
		"eviction or failover); slots around the loss are not run, runs counted for max_runs raised to what this node had seen",
		zap.Int64("found_seq", c.FoundSeq), zap.Int64("seq", c.Seq), zap.Int64("runs", c.Runs))
}

// startCheck is rule R3, just before the first fork: the lease must be
// live (Lease.Live: the safety margin before its expiry, on the monotonic
// clock, counted from the send of the claim or of its last renewal), and the slot must be within its answer window (in Redis
// time as the claim answered, advanced on the monotonic clock). It first
// waits, when Redis time had not reached the slot yet, until it has: no
// process starts before its fire time in Redis time.
func (r *run) startCheck() (reason string, late bool) {
	if r.redisNow.IsZero() || r.sent.IsZero() {
		return "", false // a handed-on slot: adopt checked it
	}
	elapsed := time.Since(r.sent)
	if r.info.Trigger == ledger.TriggerSchedule || r.info.Trigger == ledger.TriggerQueued {
		if wait := r.info.Slot.Sub(r.redisNow) - elapsed; wait > 0 { // a slot queued early runs at its time too
			sleepCtx(context.Background(), wait)
			elapsed = time.Since(r.sent)
		}
	}
	if !r.lease.Live() {
		return ledger.SkipLockLost, true
	}
	if r.info.Trigger == ledger.TriggerSchedule {
		if r.redisNow.Add(elapsed).After(r.info.Slot.Add(r.windows().Answer)) {
			return ledger.SkipLockLost, true
		}
	}
	return "", false
}

// notStarted ends a won claim that did not start (R3): its record becomes
// skipped with reason and its lease is released, one finish call.
func (r *run) notStarted(ctx context.Context, reason string) Ran {
	r.logger().Warn("won claim not started: its lease or answer window ran out before the fork (the node was paused "+
		"or overloaded); the slot is recorded skipped (docs/protocol.md, R3)", zap.String("reason", reason),
		zap.Duration("since_claim", time.Since(r.sent)))
	if r.won { // a handed-on slot, reported won by adopt
		r.events <- runEvent{kind: evReleasing, slot: r.info.Slot}
	}
	r.lease.halt()
	r.recordUnrun(r.lease.Owner(), reason)
	return r.skip(reason, nil)
}

// recordUnrun writes the record of a won claim that does not run (skip
// reason why) and releases its lease (owner, "" = none) in one finish; a
// finish that fails goes to the janitor.
func (r *run) recordUnrun(owner, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.deps.ClaimTimeout)
	defer cancel()
	rec := ledger.RunRecord{RunID: r.info.RunID, Slot: unixOrZero(r.info.Slot), Trigger: r.info.Trigger, Node: r.info.Node,
		Fence: r.info.Fence, Claimed: r.redisNow, Skip: why}
	req := ledger.FinishRequest{Job: r.job.Name, Owner: owner, Record: rec}
	if _, err := r.deps.Locker.Finish(ctx, req); err != nil {
		r.logger().Warn("record of a won claim not run not written; the janitor retries", zap.Error(err))
		r.sendFinish(req)
		if owner != "" {
			r.phantom(owner)
		}
	}
}

// unanswered hands the janitor a claim whose answer was lost: Redis may
// have applied it, leaving the lease taken and the slot's record claimed,
// though this node runs nothing. The janitor releases the lease (a
// phantom, at once when Redis answers) and sends the finish that turns
// the run's own claimed or unknown records into skipped redis_error
// (ledger.FinishRequest.OwnRecordOnly), retried like any finish, so that
// the audit never declares it unknown ("it may have run") and a max_runs
// job does not count it. A claim that never left this node (no
// connection) needs neither.
func (r *run) unanswered(req ledger.ClaimRequest, useLease bool, err error) {
	owner := ""
	if useLease {
		owner = req.Owner()
		r.phantom(owner)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return
	}
	r.sendFinish(ledger.FinishRequest{Job: r.job.Name, Owner: owner, MaxRuns: int64(r.job.MaxRuns), OwnRecordOnly: true,
		Record: ledger.RunRecord{RunID: req.RunID, Slot: req.Slot, Trigger: req.Trigger, Node: req.Node, Skip: ledger.SkipRedisError}})
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
		if fin.Result == ledger.ResultSuccess || r.lostErr != nil || r.replacedBy != 0 || attempt > r.job.Retries || ctx.Err() != nil {
			return fin
		}
		r.logger().Info("attempt failed; retrying", zap.String("result", fin.Result),
			zap.Duration("backoff", backoff))
		if !r.sleep(ctx, backoff, lost, replaced) {
			switch {
			case r.lostErr != nil:
				fin.Result = ledger.ResultLockLost
			case r.replacedBy != 0:
				fin.Result = ledger.ResultReplaced
			}
			return fin
		}
		backoff = min(backoff*2, maxRetryBackoff)
		if !r.stillHeld(lost) { // R3 before every attempt, not only the first
			fin.Result = ledger.ResultLockLost
			r.logger().Warn("retry not started: the lease was lost during the backoff (the node was paused or " +
				"redis unreachable); another node may hold it now (docs/protocol.md, R3)")
			return fin
		}
	}
}

// stillHeld reports whether the run's lease is live (Lease.Live) and no
// loss was reported on lost (one it finds is noted as onLost does).
func (r *run) stillHeld(lost <-chan LeaseLost) bool {
	select {
	case l := <-lost:
		r.onLost(l)
		return false
	default:
	}
	return r.lostErr == nil && r.lease.Live()
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
	if queues(*r.job) && r.info.Trigger != ledger.TriggerBackfill && ctx.Err() == nil {
		r.finishSent = time.Now()
		nextID = uuid.NewString()
		next = r.info.Node + ":" + nextID
	}
	var nextLog *zap.Logger // only a lease handed on logs (Finished.Fence > 0 needs a Next)
	if next != "" {
		nextLog = r.deps.Log.With(zap.String("job", r.job.Name), zap.String("run_id", nextID),
			zap.String("node_id", r.info.Node), zap.String("trigger", string(ledger.TriggerQueued)))
	}
	cur := *r.job
	if p := r.deps.latest.Load(); p != nil {
		cur = *p // a reload since the claim applies to the lease handed on
	}
	rec := fin.Record()
	rec.Claimed = r.redisNow
	f, lease, err := r.lease.endHanding(ctx, rec, next, nextLog, cur.LockTTL,
		leaseOpts{replace: cur.Overlap == config.OverlapReplace, maxRuns: int64(cur.MaxRuns), maxSkew: r.deps.MaxSkew})
	if err != nil {
		r.releaseFailed = true
		r.logger().Warn("lease release and run record failed; the janitor sends them again", zap.Error(err))
		r.sendFinish(ledger.FinishRequest{Job: r.job.Name, Owner: r.lease.Owner(), Record: rec, MaxRuns: int64(cur.MaxRuns), Retry: true})
		if owner := r.lease.Owner(); owner != "" {
			r.phantom(owner)
			if next != "" { // the call may have handed it the lease
				r.sendPhantom(next, true)
			}
		}
		return
	}
	r.finished = &f
	if f.NotReplicated && f.Token == 0 {
		r.logger().Warn("the finish that made the job's max_runs was not acknowledged by redis.min_replicas_acked replicas "+
			"within redis.replica_ack_timeout: a failover could forget it (the nodes that saw the count keep it, R6)",
			zap.Int("replicas_acked", f.Replicas), zap.Int64("runs", f.Runs))
	}
	switch {
	case f.Pending > 0 && f.NotReplicated && f.Token > 0:
		r.logger().Warn("pending slot handed the lease but not run: fewer replicas than redis.min_replicas_acked "+
			"acknowledged the hand-over within redis.replica_ack_timeout, and a failover could forget it; releasing the lease",
			zap.Int64("pending_slot", f.Pending), zap.Int("replicas_acked", f.Replicas), zap.Int64("fence", f.Token))
		h := &run{job: r.job, deps: r.deps, info: RunInfo{Job: r.job.Name, Slot: time.Unix(f.Pending, 0), Trigger: ledger.TriggerQueued,
			RunID: nextID, Node: r.info.Node, Fence: f.Token}, redisNow: f.Now}
		h.recordUnrun(next, ledger.SkipNotReplicated)
		skipSlot(r.deps, r.job.Name, time.Unix(f.Pending, 0), ledger.SkipNotReplicated, zap.Int("replicas_acked", f.Replicas))
	case f.Pending > 0 && lease != nil:
		r.next = &handoff{slot: time.Unix(f.Pending, 0), runID: nextID, lease: lease, fence: f.Token,
			seq: f.Seq, runs: f.Runs, now: f.Now, sent: r.finishSent}
	case f.Pending > 0 && f.Left:
		r.logger().Info("pending slot left for another node: this node stops; the next claim of the job runs it "+
			"(or drops it, once a later slot came due: docs/protocol.md, R7)", zap.Int64("pending_slot", f.Pending))
	case f.Pending > 0:
		skipSlot(r.deps, r.job.Name, time.Unix(f.Pending, 0), ledger.SkipMaxRuns, zap.Int("max_runs", cur.MaxRuns))
	}
}

// sendFinish hands a finish that failed (Redis may or may not have applied
// it) to the janitor, which sends it again until it is applied (a finish
// is idempotent).
func (r *run) sendFinish(req ledger.FinishRequest) {
	req.Retry, req.Next = true, ""
	if r.deps.Finishes != nil {
		select {
		case r.deps.Finishes <- req:
			return
		default:
		}
	}
	r.logger().Error("the janitor's queue is full: the occurrence's record is lost (it stays claimed in the ledger); " +
		"the janitor retries the release")
}

// report records the run's metrics (cronlock_runs_total, duration, last
// success) here, where the run ends, so that no hook can delay them, then
// hands the result to the hook runner. It never blocks forever: when the
// hook runner's inbox is full it waits until it has room or Kill closes.
func (r *run) report(fin RunFinished) {
	r.deps.Metrics.RunFinished(fin.Job, fin.Result, fin.Finished.Sub(fin.Started), fin.Finished)
	if r.deps.Watch != nil {
		r.deps.Watch.RunFinished(fin)
	}
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
