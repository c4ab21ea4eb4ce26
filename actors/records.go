package actors

import (
	"github.com/cronlock/cronlock/runrecords"
	"go.uber.org/zap"
)

// RunRecords keeps, while a run is in progress, its current attempt's
// process group and its exact lease value where the next incarnation of a
// daemon that died without shutting down finds them
// (*runrecords.Store; docs/architecture.md, "Start-up"). Put, Replace
// and Remove block for one write each (the first call also opens the
// file).
type RunRecords interface {
	Put(runrecords.Record) error
	// Replace writes rec in place of the record of its run's attempt
	// old, in one write (Put when there is none).
	Replace(old int, rec runrecords.Record) error
	Remove(runID string, attempt int) error
}

// recordClaim records a won claim's lease before the run's first process
// starts (runrecords.Record with Attempt 0): an early claim holds the lease
// up to ClaimLead before, and a daemon killed in between would otherwise
// leave a lease its next start cannot release (the job blocked for
// lock_ttl; at a herd the winners' gate holds a won claim up to
// ClaimGateMax). recordGroup of attempt 1 replaces it. A failure is logged
// and the run goes on.
func (r *run) recordClaim() {
	if r.deps.Records == nil || r.lease.Owner() == "" {
		return
	}
	rec := runrecords.Record{RunID: r.info.RunID, Job: r.job.Name, Owner: r.lease.Owner(), LockTTL: r.job.LockTTL,
		KillGrace: r.job.KillGrace}
	if err := r.deps.Records.Put(rec); err != nil {
		r.logger().Warn("claim record not written: if the daemon dies before the run starts, its lease stays behind until lock_ttl",
			zap.Error(err))
		return
	}
	r.claimRecorded = true
}

// recordGroup records the process group of attempt p in place of the
// previous attempt's record or the claim record (one write: at any moment
// the record names the group that may still run). A failure is logged and
// the run goes on, its previous record kept.
func (r *run) recordGroup(attempt int, p Proc) {
	if r.deps.Records == nil {
		return
	}
	rec := runrecords.Record{RunID: r.info.RunID, Attempt: attempt, Job: r.job.Name, Owner: r.lease.Owner(),
		LockTTL: r.job.LockTTL, KillGrace: r.job.KillGrace, Group: p.Group()}
	var err error
	if old, ok := r.lastRecord(); ok {
		err = r.deps.Records.Replace(old, rec)
	} else {
		err = r.deps.Records.Put(rec)
	}
	if err != nil {
		r.logger().Warn("run record not written: if the daemon dies during this attempt, its processes and lease stay behind",
			zap.Error(err)) // the run's logger carries the attempt
		return
	}
	r.claimRecorded, r.recorded = false, attempt
}

// lastRecord is the attempt of the run's record on file (0: the claim
// record); ok is false when there is none. At most one exists.
func (r *run) lastRecord() (attempt int, ok bool) {
	return r.recorded, r.recorded > 0 || r.claimRecorded
}

// forgetGroup removes the record of the last recorded attempt, or the
// claim record, if any.
func (r *run) forgetGroup() {
	attempt, ok := r.lastRecord()
	if !ok {
		return
	}
	r.claimRecorded, r.recorded = false, 0
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
