package engine

import (
	"context"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
)

// BackfillOptions are the inputs of Backfill besides the config, the job
// and the slots.
type BackfillOptions struct {
	ManualOptions // Force: also a paused job's slots, and slots before a detected loss of the ledger (state_lost)
	// Allow runs all slots at once without the lease (-overlap allow);
	// otherwise they run one after the other, each holding the job's lease.
	Allow bool
	// Poll is the wait before claiming a slot again while the job's lease
	// is held (a scheduled run, or another backfill); default 100ms.
	Poll time.Duration
}

// BackfillResult is what happened to one slot: Ran.Skip is "" when it ran
// (Ran.Finished holds the result), ledger.SkipAlreadyRun when an earlier
// backfill ran it, or the reason it was not run.
type BackfillResult struct {
	Slot time.Time
	Ran  actors.Ran
}

// Backfill runs job for each of slots (past slots of its schedule, in
// order) in this process, through the daemon's run path with trigger
// backfill: each slot is claimed through its ledger record
// (docs/protocol.md, R1), so a slot that ran by any path (the schedule,
// catch-up, an earlier or a concurrent backfill) is not run again; a slot
// recorded missed or skipped runs. Without Allow the slots run one at a
// time: while the lease is held the claim is retried every Poll. It blocks
// until every slot has run or been skipped and the hooks have ended, and
// returns one result per slot, in order. Cancelling ctx terminates the run
// in progress (SIGTERM, SIGKILL after kill_grace; it is recorded) and skips
// the slots not started (shutting_down).
func Backfill(ctx context.Context, cfg *config.Config, job config.Job, slots []time.Time, o BackfillOptions) []BackfillResult {
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	job.Overlap = config.OverlapSkip // one run at a time, through the lease
	if o.Allow {
		job.Overlap = config.OverlapAllow
	}
	out := make([]BackfillResult, len(slots))
	for i, s := range slots {
		out[i] = BackfillResult{Slot: s, Ran: actors.Ran{Skip: ledger.SkipShuttingDown}}
	}
	if ctx.Err() != nil {
		return out
	}
	withJobActor(ctx, cfg, job, o.ManualOptions, func(a *actors.Job, kill chan<- struct{}) {
		if o.Allow {
			backfillAll(ctx, a, kill, out, o.Force)
			return
		}
		for i := range out {
			if ctx.Err() != nil {
				return
			}
			out[i].Ran = backfillOne(ctx, o.Log, a, kill, out[i].Slot, o.Poll, o.Force)
		}
	})
	return out
}

// backfillOne runs one slot, claiming it again every poll while the lease
// is held.
func backfillOne(ctx context.Context, log *zap.Logger, a *actors.Job, kill chan<- struct{}, slot time.Time, poll time.Duration, force bool) actors.Ran {
	waiting := false
	for {
		ran := sendRunNow(ctx, a, kill, actors.RunNow{Backfill: true, Slot: slot, Force: force})
		if ran.Skip != ledger.SkipOverlap || ctx.Err() != nil {
			return ran
		}
		if !waiting {
			waiting = true
			log.Info("backfill waits: the job's lease is held (a run in progress)", zap.Int64("slot", slot.Unix()))
		}
		t := time.NewTimer(poll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return actors.Ran{Skip: ledger.SkipShuttingDown, Err: ctx.Err()}
		}
	}
}

// backfillAll starts every slot at once (overlap allow: no lease) and
// waits for all of them; when ctx ends it closes kill once.
func backfillAll(ctx context.Context, a *actors.Job, kill chan<- struct{}, out []BackfillResult, force bool) {
	replies := make([]chan actors.Ran, len(out))
	for i := range out {
		replies[i] = make(chan actors.Ran, 1)
		if err := a.Send(ctx, actors.RunNow{Backfill: true, Slot: out[i].Slot, Force: force, Reply: replies[i]}); err != nil {
			replies[i] = nil // not sent: stays shutting_down
		}
	}
	killed := false
	for i, r := range replies {
		if r == nil {
			continue
		}
		select {
		case out[i].Ran = <-r:
		case <-ctx.Done():
			if !killed {
				killed = true
				close(kill)
			}
			out[i].Ran = <-r
		}
	}
}
