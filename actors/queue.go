package actors

import (
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
)

// This file holds the run's side of overlap queue and replace
// (docs/protocol.md, "Queue and replace"): a slot that comes due while the
// job's lease is held anywhere is recorded as the job's one pending slot,
// and the Finish of the run holding the lease hands the lease to it.

// queues reports whether the job's overlap policy keeps a pending slot.
func queues(job config.Job) bool {
	return job.Overlap == config.OverlapQueue || job.Overlap == config.OverlapReplace
}

// handoff is a pending slot whose claim a Finish made for this node: the
// lease (already renewing) and the fencing token. place says that the run
// that handed it on passed its place in deps.Load with it (passPlace).
type handoff struct {
	slot      time.Time
	runID     string
	lease     *Lease
	fence     int64
	seq, runs int64
	now       time.Time // Redis time of the finish that handed it on
	sent      time.Time // when that finish was sent (monotonic)
	place     bool
}

// adopt takes the claim handed on by the run before (r.pre) as this run's
// own: no claim is sent. A pending slot that a later slot overtook
// (docs/protocol.md, R7: the job's next slot after it has come, in Redis
// time, and it is older than the catch-up window) is not run: its record
// becomes skipped expired and the lease is released.
func (r *run) adopt() (Ran, bool) {
	h := r.pre
	r.sent, r.redisNow = h.sent, h.now
	r.lease, r.info.Fence = h.lease, h.fence
	r.relog()
	next := r.job.Sched.Next(h.slot)
	if !next.IsZero() && !next.After(h.now) && h.now.Sub(h.slot) > r.job.CatchupWindow {
		r.events <- runEvent{kind: evClaimed, won: false, slot: r.info.Slot, decided: true,
			claim: ledger.Claim{Outcome: ledger.Claimed, Token: h.fence, Seq: h.seq, Runs: h.runs}}
		r.logger().Info("pending slot dropped: a later slot came due before it could run (docs/protocol.md, R7)",
			zap.String("reason", ledger.SkipExpired))
		h.lease.halt()
		r.recordUnrun(h.lease.Owner(), ledger.SkipExpired)
		return r.skip(ledger.SkipExpired, nil), false
	}
	r.won = true
	r.events <- runEvent{kind: evClaimed, won: true, slot: r.info.Slot, decided: true,
		claim: ledger.Claim{Outcome: ledger.Claimed, Token: h.fence, Seq: h.seq, Runs: h.runs}}
	r.logger().Info("running the pending slot: the run before it ended and handed on the lease")
	return Ran{}, true
}

// queued logs a slot recorded as the job's pending slot: it is not
// skipped, it runs once the lease holder's run ends.
func (r *run) queued(c ledger.Claim) Ran {
	msg := "slot queued: the job runs elsewhere; this slot runs when that run ends"
	if r.job.Overlap == config.OverlapReplace {
		msg = "slot queued: the running run is asked to stop (overlap replace); this slot runs once it is dead"
	}
	r.logger().Info(msg, zap.String("lease_holder", c.Holder))
	return Ran{Skip: "queued"}
}

// takePending makes this run the run of the pending slot its claim took
// (Claim.Takes): the run it waited for ended without handing the lease on
// (its node stopped or crashed, or its finish failed), so this run runs it (trigger queued) and
// the slot it claimed for is the pending one now.
func (r *run) takePending(slot int64) {
	queued := r.info.Slot
	r.info.Slot, r.info.Trigger = time.Unix(slot, 0).In(queued.Location()), ledger.TriggerQueued
	r.relog()
	r.logger().Info("running the pending slot: the run it waited for ended without handing on the lease "+
		"(its node stopped or crashed, or its finish failed); the slot that came due is pending now",
		zap.Int64("queued_slot", unixOrZero(queued)))
}
