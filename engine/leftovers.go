package engine

import (
	"context"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/process"
	"github.com/cronlock/cronlock/statedir"
	"go.uber.org/zap"
)

// leftoverReleaseTimeout bounds the release of one stale lease at start;
// a release that fails, and every one after it, goes to the janitor.
const leftoverReleaseTimeout = time.Second

// runRecords is what the job actors record runs in: nil without a state
// directory (engine tests), never a typed nil.
func (e *Engine) runRecords() actors.RunRecords {
	if e.records == nil {
		return nil
	}
	if e.wrapRecords != nil {
		return e.wrapRecords(e.records)
	}
	return e.records
}

// closeRecords closes the run records' file once every run has ended.
func (e *Engine) closeRecords() {
	if e.records == nil {
		return
	}
	if err := e.records.Close(); err != nil {
		e.log.Warn("run records not closed", zap.Error(err))
	}
}

// clearLeftovers is the first step of Run, before the ticker's first fire
// and before catch-up. Run records left in the state directory belong to
// runs of a previous incarnation that died without shutting down
// (SIGKILL, OOM killer, crash): their process groups are killed
// (process.KillLeftovers: SIGTERM, SIGKILL after the job's kill_grace),
// then their leases are released by compare-and-delete on the exact
// recorded lease value, so the jobs are free within seconds instead of
// lock_ttl. It blocks for at most the largest kill_grace plus 5 s, plus
// one bounded round trip per lease while the backend answers.
func (e *Engine) clearLeftovers(ctx context.Context) {
	if e.records == nil {
		return
	}
	left, err := e.records.Load()
	if err != nil {
		e.log.Error("run records unreadable: processes and leases a previous daemon left, if any, are not cleaned up",
			zap.Error(err))
		return
	}
	for _, err := range left.Bad {
		e.log.Warn("run record unusable; its run is not cleaned up", zap.Error(err))
	}
	if len(left.Records)+len(left.Elsewhere) > 0 {
		e.log.Warn("the previous daemon died without shutting down; cleaning up after its runs",
			zap.Int("runs", len(left.Records)), zap.Int("runs_elsewhere", len(left.Elsewhere)))
		free := append(e.killLeftovers(left.Records), left.Elsewhere...) // a reboot or the end of their pid namespace ended those
		e.releaseLeftovers(ctx, free)
	}
	if err := e.records.Clear(); err != nil {
		e.log.Warn("run records not removed; the next start looks at them again", zap.Error(err))
	}
}

// killLeftovers kills the recorded groups and returns the records whose
// processes are gone, so that their leases may be released. A group that
// could not be verified or survived SIGKILL keeps its lease until it
// expires: its processes may still run.
func (e *Engine) killLeftovers(all []statedir.Record) []statedir.Record {
	var free, recs []statedir.Record
	for _, r := range all {
		if r.Attempt == 0 { // a claim record: the lease was won, no process started
			e.log.Info("leftover run had won its claim but started no process; releasing its lease",
				zap.String("job", r.Job), zap.String("run_id", r.RunID))
			free = append(free, r)
			continue
		}
		recs = append(recs, r)
	}
	groups := make([]process.Leftover, len(recs))
	for i, r := range recs {
		groups[i] = process.Leftover{Group: r.Group, KillGrace: r.KillGrace}
	}
	for i, res := range process.KillLeftovers(groups) {
		r := recs[i]
		log := e.log.With(zap.String("job", r.Job), zap.String("run_id", r.RunID), zap.Int("attempt", r.Attempt),
			zap.Int("pgid", r.Group.ID), zap.String("outcome", res.Outcome.String()), zap.Int("members", res.Members))
		switch res.Outcome {
		case process.LeftoverKilled:
			log.Warn("leftover process group of the previous daemon killed", zap.String("signal", res.Signal.String()))
		case process.LeftoverGone:
			log.Info("leftover run's process group already gone")
		case process.LeftoverForeign:
			log.Warn("leftover run's process group id now belongs to other processes; not signalled",
				zap.String("reason", res.Reason))
		case process.LeftoverUnverified:
			log.Error("leftover process group not killed: it cannot be verified; its lease is left to expire",
				zap.String("reason", res.Reason))
			continue
		case process.LeftoverSurvived:
			log.Error("leftover process group survived SIGKILL; its lease is left to expire")
			continue
		}
		free = append(free, r)
	}
	return free
}

// releaseLeftovers releases each distinct recorded lease. Once the
// backend fails to answer, the rest go to the janitor as phantoms, which
// releases them when it answers (they would expire lock_ttl after the
// daemon died in any case).
func (e *Engine) releaseLeftovers(ctx context.Context, recs []statedir.Record) {
	seen := map[string]bool{}
	down := false
	for _, r := range recs {
		if r.Owner == "" || seen[r.Job+"\x00"+r.Owner] {
			continue // no lease (overlap: allow), or another attempt of the same run
		}
		seen[r.Job+"\x00"+r.Owner] = true
		log := e.log.With(zap.String("job", r.Job), zap.String("owner", r.Owner))
		if !down {
			rctx, cancel := context.WithTimeout(ctx, leftoverReleaseTimeout)
			released, err := e.backend.Release(rctx, r.Job, r.Owner)
			cancel()
			if err == nil {
				if released {
					log.Info("stale lease of the previous daemon released")
				} else {
					log.Info("stale lease of the previous daemon already gone")
				}
				continue
			}
			log.Warn("stale lease not released yet; the janitor retries", zap.Error(err))
			down = true
		}
		p := actors.Phantom{Job: r.Job, Owner: r.Owner, Until: time.Now().Add(r.LockTTL)}
		select {
		case e.janitor.Inbox() <- p:
		default:
			log.Warn("janitor queue full; the stale lease expires after lock_ttl", zap.Duration("lock_ttl", r.LockTTL))
		}
	}
}
