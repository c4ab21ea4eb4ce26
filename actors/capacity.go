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
// other node (nodeload.MaxDelay) plus a claim round trip on a loaded host.
const busyWait = 100 * time.Millisecond

// SlotPeeker reads the job's claimed-slot record (state.slot: the highest
// slot claimed or skipped, Unix seconds; 0 when none) in one round trip.
// Implemented by *redislock.Redis and *redislock.Memory; a run at
// node.max_parallel uses it to tell node_busy from claimed_elsewhere.
type SlotPeeker interface {
	ClaimedSlot(ctx context.Context, job string) (int64, error)
}

// reserve waits the load-ordered claim delay (nodeload.Load.Enter), then
// takes this node's place for a scheduled or catch-up run's claim
// (JobDeps.Load; manual runs are not limited). The place is held from here
// to the end of the run, or only for the claim's round trip when the claim
// is not won. At node.max_parallel it waits for a place until busyWait
// after it began; then the slot is skipped (busy) and ok is false. When
// ctx ends first the slot is skipped shutting_down (nothing was claimed).
// With ok true the caller calls claimed once the claim has its answer.
func (r *run) reserve(ctx context.Context) (Ran, bool) {
	l := r.deps.Load
	if l == nil || r.info.Trigger == TriggerManual {
		return Ran{}, true
	}
	deadline := time.NewTimer(busyWait)
	defer deadline.Stop()
	r.queued = true
	if !sleepCtx(ctx, l.Enter()) {
		r.claimed()
		return r.notClaimed(SkipShuttingDown), false
	}
	for !l.Reserve() {
		select {
		case <-l.Freed():
		case <-deadline.C:
			r.claimed()
			return r.busy(ctx), false
		case <-ctx.Done():
			r.claimed()
			return r.notClaimed(SkipShuttingDown), false
		}
	}
	r.reserved = true
	return Ran{}, true
}

// claimed ends the claim's place in the load's queue (nodeload.Load.Leave).
func (r *run) claimed() {
	if r.queued {
		r.queued = false
		r.deps.Load.Leave()
	}
}

// unreserve gives back the place reserve took.
func (r *run) unreserve() {
	if r.reserved {
		r.deps.Load.Release(r.won)
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
