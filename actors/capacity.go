package actors

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// SkipNodeBusy: this node was at node.max_parallel and did not claim the
// slot, and no other node had claimed it when this node looked again.
const SkipNodeBusy = "node_busy"

// busyWait is how long a node at its limit waits for a place after the
// fire (each Release wakes it to try again) before it looks whether
// another node claimed the slot: longer than the claim delay of every
// other node (nodeload.MaxDelay, nodeload.YieldDelay for a claim a node
// with excess load yields) plus a claim round trip on a loaded host.
const busyWait = 100 * time.Millisecond

// SlotPeeker reads the job's claimed-slot record (state.slot: the highest
// slot claimed or skipped, Unix seconds; 0 when none) in one round trip.
// Implemented by *redislock.Redis and *redislock.Memory; a run at
// node.max_parallel uses it to tell node_busy from claimed_elsewhere.
type SlotPeeker interface {
	ClaimedSlot(ctx context.Context, job string) (int64, error)
}

// reserve waits the claim delay of the slot's claim order
// (nodeload.Load.Enter: this node's rank among the live nodes that may
// run the job, or a yield when it has excess load; the claim's answer is
// reported with Load.Answered), then
// takes this node's place for a scheduled or catch-up run's claim
// (JobDeps.Load; manual runs are not limited). The place is held from here
// to the end of the run, or only for the claim's round trip when the claim
// is not won. At node.max_parallel it waits for a place until busyWait
// after it began; then the slot is skipped (busy) and ok is false. When
// ctx ends first the slot is skipped shutting_down (nothing was claimed).
//
// A claim that is expected to queue its slot (r.queueClaim: this node's
// run of the job holds the lease) adds no run in progress: it takes no
// place and does not wait, so a node at its limit still queues the slot
// of its own job (it runs later in the place of the run before it).
//
// The run of a pending slot handed on by a Finish (r.pre, trigger queued)
// is claimed already: it neither waits nor is refused. It takes over the
// place of the run that handed it on (passPlace), so that the node's runs
// in progress count it without a gap another claim could take; after a
// run that held no place (a manual run) it takes one even at the limit.
func (r *run) reserve(ctx context.Context) (Ran, bool) {
	l := r.deps.Load
	if l == nil || r.info.Trigger == TriggerManual {
		return Ran{}, true
	}
	if r.pre != nil {
		if !r.pre.place {
			l.Hold()
		}
		r.reserved, r.inProgress = true, true
		return Ran{}, true
	}
	if r.queueClaim {
		return Ran{}, true // placeWon takes a place if the claim wins after all
	}
	// The busy wait's deadline: busyWait from the fire time, not from an
	// early fire's arrival, nor from when the claim order let it go.
	deadline := time.Now().Add(busyWait)
	if isEarly(r.due) {
		deadline = deadline.Add(time.Until(r.at))
	}
	entered := time.Now()
	delay, rank := l.Enter(r.job.Name, r.info.Slot.Unix(), r.job.Nodes)
	r.claimRank, r.ranked = rank, rank >= 0
	// The burst order is for the claims of an instant at its fire time:
	// a catch-up claim (after an outage) must not wait for the node's
	// claims of that slot still in flight to a Redis that was down.
	burst := r.info.Trigger == TriggerSchedule
	first := rank == 0 && burst
	r.gate(first) // the first-claim count is ended by ungate, when the claim is decided
	waits := delay > 0 || rank > 0 && burst
	if waits {
		// A claim that waits its turn is not in flight: it must not hold
		// the node's winners (ClaimGate) for its delay or its turn in the
		// burst. It counts again from when it is sent.
		r.ungateClaims()
	}
	if !sleepCtx(ctx, delay) {
		return r.notClaimed(SkipShuttingDown), false
	}
	if rank > 0 && burst {
		// Waiting its turn in the burst it does hold the winners: at a
		// herd, forks started before the node's later claims are sent
		// starve them (hundreds of runnable shells on a small machine),
		// and a claim not sent within the claim timeout skips its slot.
		// Outside a herd the turn comes at once (the node's rank-0 claims
		// of the instant were answered during the rank delay).
		r.gate(false)
		r.deps.Burst.Defer(ctx, r.info.Slot.Unix(), r.info.Slot) // after the node's rank-0 claims of the instant
		if ctx.Err() != nil {
			return r.notClaimed(SkipShuttingDown), false
		}
	}
	r.gate(false) // it counts again from here, when it had waited
	r.claimDelay = time.Since(entered).Truncate(time.Microsecond)
	if delay == 0 && rank <= 0 {
		r.claimDelay = 0 // sent at once: the microseconds above are the call's own
	}
	var timeout <-chan time.Time // made at the first wait: most claims find a place
	for {
		ok, freed := l.TryReserve()
		if ok {
			break
		}
		r.ungate() // waiting for a place is no claim in flight: it holds no winner
		if timeout == nil {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			return r.busy(ctx), false
		case <-ctx.Done():
			return r.notClaimed(SkipShuttingDown), false
		}
	}
	r.gate(first) // when it waited for a place, its claim is in flight again
	r.reserved = true
	return Ran{}, true
}

// placeWon counts a won claim's place as a run in progress (Load.Won). A
// queue claim (r.queueClaim) that won after all (the run before it
// released the lease first) takes a place now, even at the limit: its
// slot is claimed and must run.
func (r *run) placeWon() {
	l := r.deps.Load
	switch {
	case l == nil || r.info.Trigger == TriggerManual:
	case !r.reserved && r.queueClaim:
		l.Hold()
		r.reserved, r.inProgress = true, true
	case r.reserved && !r.inProgress:
		l.Won()
		r.inProgress = true
	}
}

// unreserve gives back the place reserve took (unless passPlace handed
// it on).
func (r *run) unreserve() {
	if r.reserved {
		r.reserved = false
		r.deps.Load.Release(r.inProgress)
	}
}

// passPlace hands this run's place, a run in progress, to the run of the
// pending slot its Finish handed the lease to (r.next): the place is not
// released in between.
func (r *run) passPlace() {
	if r.next != nil && r.reserved && r.inProgress {
		r.next.place = true
		r.reserved = false
	}
}

// busy skips a slot this node may not claim because it is at
// node.max_parallel: claimed_elsewhere when the claimed-slot record shows
// that another node claimed (or skipped) it, else node_busy (also when the
// record cannot be read: this node did not run it because it was busy).
func (r *run) busy(ctx context.Context) Ran {
	r.events <- runEvent{kind: evClaimed, slot: r.info.Slot}
	reason, fields := SkipNodeBusy, []zap.Field{zap.Int("max_parallel", r.deps.Load.Max()),
		zap.Int("runs_in_progress", r.deps.Load.InProgress())}
	if p, ok := r.deps.Locker.(SlotPeeker); ok {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.deps.ClaimTimeout)
		s, err := p.ClaimedSlot(pctx, r.job.Name)
		cancel()
		switch {
		case err != nil:
			fields = append(fields, zap.NamedError("claimed_slot_error", err))
		case s >= r.info.Slot.Unix():
			reason = SkipClaimedElsewhere
			if r.ranked { // another node ran or skipped the slot this node did not claim
				r.deps.Load.Answered(r.claimRank, false, true)
			}
		}
	}
	return r.skip(reason, nil, fields...)
}

// notClaimed tells the job actor that this run's claim is decided (it was
// not sent) and skips the slot with reason.
func (r *run) notClaimed(reason string) Ran {
	r.events <- runEvent{kind: evClaimed, slot: r.info.Slot}
	return r.skip(reason, nil)
}

// sleepCtx waits d and reports true, or false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
