package actors

import (
	"context"
	"strconv"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// maxMissedCount bounds the walks over a schedule: the ticker's over the
// slots a late wake passes over, and an audit's over the slots it sends
// in one call.
const maxMissedCount = 1000

// auditLookBack is how far back a node's first audit of a job looks for
// a due slot before auditing at once (Auditor.Audit).
const auditLookBack = time.Hour

// AuditGrace is added to a job's answer window before a due occurrence
// without a record is recorded missed (docs/protocol.md, R8): room for the
// answer of a claim sent at the window's end.
const AuditGrace = 2 * time.Second

// Auditor records one node's jobs' missed occurrences (docs/protocol.md,
// R8). It owns no goroutine: the engine calls Audit for each job every
// few seconds.
type Auditor struct {
	Log     *zap.Logger
	Metrics *Metrics
	Locker  ledger.Locker
	NodeID  string
	// MaxSkew is node.max_clock_skew (the answer window's first term).
	MaxSkew time.Duration
	// Retention bounds the ledger (rule R9).
	Retention ledger.Retention
	// Now reads the wall clock; it only chooses which slots to send: the
	// backend decides by Redis time.
	Now func() time.Time
	// Started is when this daemon started: a slot due before it that no
	// node recorded was due while this node was down.
	Started time.Time
	// Missed, when set, is told the slots this node's audit recorded
	// missed (each once in the cluster) and why, for alerts (package
	// notify). It must not block.
	Missed func(job *config.Job, node string, slots []int64, reason string)

	jobs map[string]*auditState // owned by the caller's goroutine
}

// auditState is where a job's audit stands on this node: audited_to as
// last read or written (0 = not read yet) and when the next slot will be
// certain.
type auditState struct {
	from int64
	due  time.Time
	// streak: the last audit that looked at slots recorded some missed;
	// later ones in a row are logged at info (one warning an outage).
	streak bool
}

// Audit records the missed occurrences of job cfg. It returns the slots
// this node recorded (one warning for them, counted in
// cronlock_occurrences_missed_total); another node may record some
// instead, each once in the cluster. A disabled job's slots are not
// audited: they are skipped disabled on every node that has the job.
//
// job, when not nil, is the job's actor: the audit sends the ledger seq it
// has seen (R5) and gives it back what the audit saw (Job.See).
func (a *Auditor) Audit(ctx context.Context, cfg *config.Job, job *Job) ([]int64, error) {
	if !cfg.Enabled || cfg.Sched == nil {
		return nil, nil
	}
	if a.jobs == nil {
		a.jobs = map[string]*auditState{}
	}
	st := a.jobs[cfg.Name]
	if st == nil {
		st = &auditState{}
		a.jobs[cfg.Name] = st
	}
	now := a.Now()
	if now.Before(st.due) {
		return nil, nil // no slot became certain since the last audit
	}
	window := ledger.AnswerWindow(a.MaxSkew, cfg.LockTTL, cfg.Jitter)
	if st.from == 0 && st.due.IsZero() {
		// The first look: at once when a slot came due in the last hour
		// (a downtime's misses are recorded at start); a job whose slots
		// are rarer is first audited after its next slot (10,000 yearly
		// jobs cost nothing at start).
		if s := cfg.Sched.Next(now.Add(-auditLookBack)); s.IsZero() || s.After(now) {
			st.due = a.dueAfter(cfg, now.Unix(), window)
			return nil, nil
		}
	}
	req := ledger.AuditRequest{Job: cfg.Name, Window: window, Grace: AuditGrace, Node: a.NodeID, Retention: a.Retention,
		MaxRuns: int64(cfg.MaxRuns), LockTTL: cfg.LockTTL, Early: a.MaxSkew}
	if job != nil {
		req.SeenSeq = job.seenSeq.Load()
	}
	saw := func(got ledger.Audited) {
		if job != nil {
			job.See(got.Seq, got.Runs)
		}
		if got.Repaired {
			a.Metrics.StateRepaired(cfg.Name)
			a.Log.Warn("ledger state repaired: redis had lost part of the job's ledger (restart without persistence, "+
				"eviction or failover); slots around the loss are recorded state_lost, not missed", zap.String("job", cfg.Name),
				zap.Int64("seq", got.Seq))
		}
		if len(got.Unknown) > 0 {
			a.Log.Warn("occurrences of unknown outcome: claimed, and no result within lock_ttl and the answer window "+
				"(the node that claimed them died, or its finish was lost); they may have run, and count toward max_runs",
				zap.String("job", cfg.Name), zap.Strings("occurrences", got.Unknown))
		}
	}
	if st.from == 0 {
		read, err := a.Locker.Audit(ctx, req)
		if err != nil {
			return nil, err
		}
		saw(read)
		st.from = read.From
	}
	until := now.Add(-window - AuditGrace)
	req.From = st.from
	for s := cfg.Sched.Next(time.Unix(st.from, 0)); !s.IsZero() && !s.After(until) && len(req.Slots) < maxMissedCount; s = cfg.Sched.Next(s) {
		req.Slots = append(req.Slots, s.Unix())
	}
	if len(req.Slots) == 0 {
		st.due = a.dueAfter(cfg, st.from, window)
		return nil, nil
	}
	if last := req.Slots[len(req.Slots)-1]; job != nil && !job.Undecided(req.Slots[0], last) {
		// This node saw every one of these slots answered with a record:
		// the audit would add nothing. Its audited_to moves on here only;
		// the next audit that writes finds the ledger's (Stale) and goes on
		// from there.
		st.from, st.due = last, a.dueAfter(cfg, last, window)
		return nil, nil
	}
	req.Reason = a.reason(req.Slots[0], req.Slots[len(req.Slots)-1], job)
	got, err := a.Locker.Audit(ctx, req)
	if err != nil {
		return nil, err
	}
	saw(got)
	if got.Stale { // another node audited meanwhile: go on from where it left
		st.from = got.From
		return nil, nil
	}
	st.from, st.due = got.To, a.dueAfter(cfg, got.To, window)
	if job != nil {
		job.Audited(got.To)
	}
	if len(got.Missed) == 0 {
		st.streak = false
		return nil, nil
	}
	a.Metrics.OccurrencesMissed(cfg.Name, len(got.Missed))
	if a.Missed != nil {
		a.Missed(cfg, a.NodeID, got.Missed, req.Reason)
	}
	msg, level := "occurrences missed: due, and no node claimed or decided them within their answer window", zapcore.WarnLevel
	if st.streak {
		msg, level = "more occurrences missed (the outage goes on)", zapcore.InfoLevel
	}
	st.streak = true
	a.Log.Log(level, msg, zap.String("job", cfg.Name), zap.Int("missed", len(got.Missed)), zap.Int64("first_slot", got.Missed[0]),
		zap.Int64("last_slot", got.Missed[len(got.Missed)-1]), zap.String("reason", req.Reason))
	return got.Missed, nil
}

// dueAfter is when the first slot after from becomes certain (its answer
// window and the grace passed); a minute from now when there is none.
func (a *Auditor) dueAfter(cfg *config.Job, from int64, window time.Duration) time.Time {
	if s := cfg.Sched.Next(time.Unix(from, 0)); !s.IsZero() {
		return s.Add(window + AuditGrace)
	}
	return a.Now().Add(time.Minute)
}

// Due is when Audit of cfg may next do anything: the zero time for a job
// not looked at yet (Audit looks at once), the end of time for a disabled
// job (its slots are not audited), else when its next slot becomes
// certain. An audit that failed leaves Due in the past (it is retried).
// The caller may skip Audit until then: an idle node with 10,000 jobs
// then does nothing between their slots.
func (a *Auditor) Due(cfg *config.Job) time.Time {
	if !cfg.Enabled || cfg.Sched == nil {
		return endOfTime
	}
	if st := a.jobs[cfg.Name]; st != nil {
		return st.due
	}
	return time.Time{}
}

// endOfTime is later than any slot.
var endOfTime = time.Unix(1<<62, 0)

// Forget drops a job's audit state (a job removed by a reload).
func (a *Auditor) Forget(job string) { delete(a.jobs, job) }

// reason is what this node knows of why slots first..last were missed:
// it was not running yet, or its job actor (job, nil = none) skipped one
// of them on its own (Job.LocalSkip, the latest: claim_late, node_busy,
// redis_error, …; named with its slot when the call covers several), or
// it knows nothing more.
func (a *Auditor) reason(first, last int64, job *Job) string {
	if time.Unix(last, 0).Before(a.Started) {
		return "not_claimed: no live node claimed it (this node was not running)"
	}
	if job != nil {
		if slot, r := job.LocalSkip(first, last); r != "" {
			if first == last {
				return "not_claimed: no live node claimed it; this node skipped it: " + r
			}
			return "not_claimed: no live node claimed it; this node skipped slot " + strconv.FormatInt(slot, 10) + ": " + r
		}
	}
	return "not_claimed: no live node claimed it (nodes down, redis unreachable, or skipped locally)"
}
