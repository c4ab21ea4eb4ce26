package actors

import (
	"time"

	"github.com/cronlock/cronlock/statedir"
	"go.uber.org/zap"
)

// RunRecords keeps, while a run is in progress, its current attempt's
// process group and its exact lease value where the next incarnation of a
// daemon that died without shutting down finds them
// (*statedir.RunRecords; docs/architecture.md, "Start-up"). Put, Replace
// and Remove block for one write each (the first call also opens the
// file).
type RunRecords interface {
	Put(statedir.Record) error
	// Replace writes rec in place of the record of its run's attempt
	// old, in one write (Put when there is none).
	Replace(old int, rec statedir.Record) error
	Remove(runID string, attempt int) error
}

// groupRecorded is the outcome of recordGroupAsync's write.
type groupRecorded struct {
	attempt int
	err     error
}

// recordWait bounds how long an attempt's end waits for its run record's
// write (a hung state directory must not hold the run's release).
const recordWait = 2 * time.Second

// recordGroupAsync records the process group of attempt p in place of the
// previous attempt's record or the claim record (one write: at any moment
// the record names the group that may still run), on a goroutine, so that
// a blocked state directory delays no timeout and no kill
// (docs/protocol.md, R3). Its outcome comes on the returned channel
// (nil: nothing to write), to be handed to recordedGroup; the goroutine
// touches no field of r.
func (r *run) recordGroupAsync(attempt int, p Proc) <-chan groupRecorded {
	if r.deps.Records == nil {
		return nil
	}
	r.recordGiveUp = make(chan struct{})
	giveUp := r.recordGiveUp
	rec := statedir.Record{RunID: r.info.RunID, Attempt: attempt, Job: r.job.Name, Owner: r.lease.Owner(),
		LockTTL: r.job.LockTTL, KillGrace: r.job.KillGrace, Group: p.Group()}
	old, replace := r.lastRecord()
	store := r.deps.Records
	ch := make(chan groupRecorded, 1)
	go func() {
		var err error
		if replace {
			err = store.Replace(old, rec)
		} else {
			err = store.Put(rec)
		}
		ch <- groupRecorded{attempt: attempt, err: err}
		select {
		case <-giveUp: // awaitRecord gave up on it: nobody removes it but this goroutine
			if err == nil {
				_ = store.Remove(rec.RunID, attempt)
			}
		default:
		}
	}()
	return ch
}

// recordedGroup notes the outcome of recordGroupAsync. A failure is
// logged and the run goes on, its previous record kept.
func (r *run) recordedGroup(g groupRecorded) {
	if g.err != nil {
		r.logger().Warn("run record not written: if the daemon dies during this attempt, its processes and lease stay behind",
			zap.Error(g.err))
		return
	}
	r.recorded = g.attempt
}

// awaitRecord waits, at most recordWait, for a write recordGroupAsync
// started and not yet noted (ch nil: none).
func (r *run) awaitRecord(ch <-chan groupRecorded) {
	if ch == nil {
		return
	}
	t := time.NewTimer(recordWait)
	defer t.Stop()
	select {
	case g := <-ch:
		r.recordedGroup(g)
	case <-t.C:
		close(r.recordGiveUp) // the write, when it ends, removes its own record
		r.logger().Error("run record write blocked (state directory hung?); the run ends without it",
			zap.Duration("waited", recordWait))
	}
}

// lastRecord is the attempt of the run's record on file (0: the claim
// record); ok is false when there is none. At most one exists.
func (r *run) lastRecord() (attempt int, ok bool) {
	return r.recorded, r.recorded > 0
}

// forgetGroup removes the record of the last recorded attempt, or the
// claim record, if any.
func (r *run) forgetGroup() {
	attempt, ok := r.lastRecord()
	if !ok {
		return
	}
	r.recorded = 0
	if err := r.deps.Records.Remove(r.info.RunID, attempt); err != nil {
		if attempt == 0 {
			r.logger().Warn("claim record not removed: the next start of the daemon will release this run's lease",
				zap.Error(err))
			return
		}
		r.logger().Warn("run record not removed: the next start of the daemon will look for this run's processes",
			zap.Int("record_attempt", attempt), zap.Error(err))
	}
}
