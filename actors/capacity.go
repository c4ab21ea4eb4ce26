package actors

import (
	"context"
	"time"

	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/ledger"

	"go.uber.org/zap"
)

// SkipNodeBusy: this node was at node.max_parallel and did not claim the
// slot.
const SkipNodeBusy = "node_busy"

// busyWait is how long a node at its limit waits for a place after the
// fire (each Release wakes it to try again) before it skips the slot
// node_busy: longer than the claim delay (cluster.MaxDelay), so that a
// place freed within the slot's claim order is still used.
const busyWait = 2 * cluster.MaxDelay

// reserve waits the claim delay of the slot's claim order
// (cluster.Load.Enter: this node's rank among the live nodes that may
// run the job), then takes this node's place for a scheduled or catch-up run's claim
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
	if l == nil || r.info.Trigger == ledger.TriggerManual {
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
	deadline := time.Now().Add(busyWait) // from the fire, not from the end of the claim delay
	delay, rank := l.Enter(r.job.Name, r.info.Slot.Unix(), r.job.Nodes)
	r.ranked, r.rank = rank >= 0, rank
	if !sleepCtx(ctx, delay) {
		return r.notClaimed(ledger.SkipShuttingDown), false
	}
	var timeout <-chan time.Time // made at the first wait: most claims find a place
	for {
		ok, freed := l.TryReserve()
		if ok {
			break
		}
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
			return r.notClaimed(ledger.SkipShuttingDown), false
		}
	}
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
	case l == nil || r.info.Trigger == ledger.TriggerManual:
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
// node.max_parallel (node_busy). Another node may still claim it; if none
// does, the audit records it missed (docs/protocol.md, R8).
func (r *run) busy(context.Context) Ran {
	r.events <- runEvent{kind: evClaimed, slot: r.info.Slot}
	return r.skip(SkipNodeBusy, nil, zap.Int("max_parallel", r.deps.Load.Max()),
		zap.Int("runs_in_progress", r.deps.Load.InProgress()))
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
