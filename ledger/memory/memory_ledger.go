package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// This file is the ledger of the memory backend: the rules of
// docs/protocol.md (R1–R9) as the scripts in scripts.go keep them, in Go,
// with the local clock as "Redis time" (one process is the whole
// cluster). The conformance suite runs the same cases against both. The
// state file keeps each job's highest claimed slot, token, pause flag and
// run count (memory_state.go): after a restart, slots up to that slot
// count as claimed (floor), and tokens go on from the kept one (R4).

// mint is rule R4.
func (j *memJob) mint(nowUs int64) int64 {
	j.fence = max(j.fence+1, nowUs)
	return j.fence
}

// put writes an occurrence's record (R1).
func (j *memJob) put(o ledger.Occurrence) {
	j.occ[o.ID] = o
	j.seq++
	if o.Slot > j.slot && (o.Status == "claimed" || o.Status == "ran") {
		j.slot = o.Slot
	}
}

// trim is rule R9, as the scripts' trim: at most lim records a call,
// none whose slot lies within protect of now; by count only once the
// ledger holds more than max + slack records (ledger.Retention.TrimSlack).
func (j *memJob) trim(now time.Time, rt ledger.Retention, lim int, protect time.Duration, slack int) {
	age, maxN := rt.Resolved()
	oldBound := now.Add(-max(age, protect)).Unix()
	if len(j.occ) <= maxN+slack {
		// Within the slack only records too old go: most calls find none
		// and sort nothing (make bench-go's BenchmarkRunPath spent half its
		// CPU sorting the ledger at every claim).
		if !j.hasOlder(oldBound) {
			return
		}
		maxN = len(j.occ)
	}
	bound := now.Add(-protect).Unix()
	ids := slices.SortedFunc(func(yield func(string) bool) {
		for id := range j.occ {
			if !yield(id) {
				return
			}
		}
	}, func(a, b string) int { return int(j.score(a) - j.score(b)) })
	cut := max(len(ids)-maxN, 0)
	for cut < len(ids) && j.score(ids[cut]) < oldBound {
		cut++
	}
	for cut > 0 && j.score(ids[cut-1]) >= bound {
		cut--
	}
	for _, id := range ids[:min(cut, lim)] {
		delete(j.occ, id)
		if s, err := strconv.ParseInt(id, 10, 64); err == nil && s > j.trimmedTo {
			j.trimmedTo = s
		}
	}
}

// hasOlder says whether a record's index score (score) is before bound.
func (j *memJob) hasOlder(bound int64) bool {
	for _, o := range j.occ {
		if s := o.Slot; s > 0 && s < bound || s == 0 && o.Claimed/1000 < bound {
			return true
		}
	}
	return false
}

// score is an occurrence's index score: its slot, a manual run's claim
// time in seconds.
func (j *memJob) score(id string) int64 {
	o := j.occ[id]
	if o.Slot > 0 {
		return o.Slot
	}
	return o.Claimed / 1000
}

// Claim decides one occurrence as claimScript does (docs/protocol.md,
// R1–R7). With a state store it returns only once the job's slot, token,
// pause flag and run count are in the state file; an error then means the
// outcome is unknown: the caller does not run the slot.
func (m *Memory) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	if err := errors.Join(req.Validate(), ctx.Err()); err != nil {
		return ledger.Claim{}, fmt.Errorf("claim %q: %w", req.Job, err)
	}
	m.mu.Lock()
	j := m.job(req.Job)
	if j.fence == math.MaxInt64 { // R4: the next token would wrap (never in practice)
		m.mu.Unlock()
		return ledger.Claim{}, fmt.Errorf("claim %q: the fencing token is at its maximum", req.Job)
	}
	c := j.claim(req, time.Now())
	m.mu.Unlock()
	if c.Outcome == ledger.Claimed {
		if err := m.commit(ctx, req.Job); err != nil {
			return ledger.Claim{}, fmt.Errorf("claim %q: %w", req.Job, err)
		}
	}
	return c, nil
}

func (j *memJob) claim(req ledger.ClaimRequest, now time.Time) (c ledger.Claim) {
	nowMs := now.UnixMilli()
	c = ledger.Claim{Now: time.UnixMilli(nowMs), FoundSeq: j.seq}
	began := j.since
	if began == 0 {
		began = nowMs // a new ledger begins now
	}
	if j.since == 0 {
		j.since = nowMs
	}
	if req.SeenSeq > j.seq { // R5
		j.seq, j.lostAt, c.Repaired = req.SeenSeq, nowMs, true
	}
	if req.SeenRuns > j.runs { // R6
		j.runs, c.Repaired = req.SeenRuns, true
	}
	wrote := false
	defer func() { // on every return: c is the named result
		if wrote {
			j.trim(now, req.Retention, 10, req.Windows.Early+req.Windows.Answer+req.Windows.Catchup, req.Retention.TrimSlack())
		}
		c.Seq, c.Runs = j.seq, j.runs
	}()
	slot, id := req.Slot, strconv.FormatInt(req.Slot, 10)
	rec := func(status, reason string, token int64, trig ledger.Trigger, runID string) ledger.Occurrence {
		return ledger.Occurrence{ID: id, Slot: slot, Status: status, Reason: reason, Node: req.Node, Token: token,
			Trigger: string(trig), RunID: runID, Claimed: nowMs}
	}
	decide := func(status, reason string) {
		if slot > 0 {
			j.put(rec(status, reason, 0, req.Trigger, ""))
			wrote = true
		}
	}
	ms, w := slot*1000, req.Windows
	switch req.Trigger { // R2
	case ledger.TriggerSchedule:
		if nowMs < ms-w.Early.Milliseconds() || nowMs > ms+w.Answer.Milliseconds() {
			c.Outcome = ledger.ClockSkew
			return c
		}
		if nowMs < ms {
			c.Outcome = ledger.TooEarly
			return c
		}
	case ledger.TriggerCatchup:
		// A slot due before the ledger began: nothing tells whether it ran.
		if nowMs < ms || nowMs > ms+w.Catchup.Milliseconds() || ms < began {
			c.Outcome = ledger.OutsideWindow
			return c
		}
	case ledger.TriggerBackfill:
		if nowMs <= ms+w.Answer.Milliseconds() {
			c.Outcome = ledger.OutsideWindow
			return c
		}
	}
	if slot > 0 && slot <= j.trimmedTo { // R9
		c.Outcome = ledger.OutsideRetention
		return c
	}
	force := req.IgnorePause
	if slot > 0 { // R1
		if cur, ok := j.occ[id]; ok {
			rerun := cur.Status == "missed" && req.Trigger != ledger.TriggerSchedule ||
				cur.Status == "skipped" && req.Trigger == ledger.TriggerBackfill && (cur.Reason != ledger.SkipStateLost || force) ||
				cur.Status == "unknown" && req.Trigger == ledger.TriggerBackfill && force
			if rerun && cur.Status == "missed" && j.lostAt > 0 && ms <= j.lostAt+w.Early.Milliseconds() && !force {
				c.Outcome = ledger.StateLost // R5: the missed record may stand for a lost run
				return c
			}
			if !rerun {
				c.Outcome, c.Status, c.Reason = ledger.ClaimedElsewhere, cur.Status, cur.Reason
				return c
			}
		} else if slot <= j.floor && (req.Trigger != ledger.TriggerBackfill || !force) {
			// Claimed before the last restart: whether it ran is not kept.
			c.Outcome, c.Status, c.Reason = ledger.ClaimedElsewhere, "claimed", "before the last restart"
			return c
		} else if j.lostAt > 0 && ms <= j.lostAt+w.Early.Milliseconds() {
			if req.Trigger == ledger.TriggerSchedule {
				decide("skipped", ledger.SkipStateLost)
				c.Outcome = ledger.StateLost
				return c
			}
			if !req.IgnorePause {
				c.Outcome = ledger.StateLost
				return c
			}
		}
	}
	if req.MaxRuns > 0 { // R6: successes, claims in flight, runs of unknown outcome
		if j.runs+int64(len(j.inflight))+j.unknown >= req.MaxRuns {
			decide("skipped", ledger.SkipMaxRuns)
			c.Outcome = ledger.MaxRunsReached
			return c
		}
	}
	if !req.IgnorePause && j.paused {
		decide("skipped", ledger.SkipPaused)
		c.Outcome = ledger.Paused
		return c
	}
	if req.Lease {
		if j.owner != "" && now.Before(j.expires) {
			c.Holder = j.owner
			if req.Queue {
				if c.Pending = j.queued; j.queued == 0 {
					j.queued = slot
					decide("queued", "")
					c.Outcome = ledger.Queued
					return c
				}
			}
			decide("skipped", ledger.SkipOverlap)
			c.Outcome = ledger.Overlap
			return c
		}
		j.owner, j.expires = req.Owner(), now.Add(req.TTL.Truncate(time.Millisecond))
		if req.Queue && j.queued > 0 { // R7
			if p := j.queued; p < slot && nowMs-p*1000 <= w.Catchup.Milliseconds() {
				c.Takes = p
			} else {
				c.Expired, j.queued = p, 0
				j.put(ledger.Occurrence{ID: strconv.FormatInt(p, 10), Slot: p, Status: "skipped", Reason: ledger.SkipExpired,
					Node: req.Node, Trigger: string(ledger.TriggerQueued), Claimed: nowMs})
			}
		}
	}
	c.Outcome, c.Token = ledger.Claimed, j.mint(now.UnixMicro())
	wrote = true
	if c.Takes > 0 {
		j.queued = slot
		j.put(ledger.Occurrence{ID: strconv.FormatInt(c.Takes, 10), Slot: c.Takes, Status: "claimed", Node: req.Node,
			Token: c.Token, Trigger: string(ledger.TriggerQueued), RunID: req.RunID, Claimed: nowMs})
		j.inflight[strconv.FormatInt(c.Takes, 10)] = nowMs
		decide("queued", "")
		return c
	}
	if slot == 0 {
		id = ledger.OccurrenceID(0, c.Token)
	}
	j.put(rec("claimed", "", c.Token, req.Trigger, req.RunID))
	j.inflight[id] = nowMs
	return c
}

// Finish writes the occurrence's final record, releases the lease and
// hands it to the pending slot, as finishScript does.
func (m *Memory) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	if err := errors.Join(req.Validate(), ctx.Err()); err != nil {
		return ledger.Finished{}, fmt.Errorf("finish %q: %w", req.Job, err)
	}
	now := time.Now()
	m.mu.Lock()
	j := m.job(req.Job)
	f := ledger.Finished{Now: time.UnixMilli(now.UnixMilli())}
	if req.Owner != "" && j.owner == req.Owner {
		j.owner, f.Released = "", true
	}
	o := req.Record.Occurrence()
	o.Output = ledger.Tail(o.Output)
	conflict := false
	if req.OwnRecordOnly {
		j.settleUnanswered(o)
	} else if cur, ok := j.occ[o.ID]; ok && cur.RunID != o.RunID {
		conflict = true
	} else {
		counted := ok && cur.Status == "ran"
		if ok && cur.Status == "unknown" {
			j.unknown-- // the audit gave up on it; its finish came after all
		}
		delete(j.inflight, o.ID)
		j.put(o)
		if o.Status == "ran" && o.Result == ledger.ResultSuccess && !counted {
			j.runs++
		}
		if o.Status == "ran" {
			last := o
			j.last = &last
		}
	}
	if f.Released && j.queued > 0 {
		p := j.queued
		f.Pending = p
		node, runID := ledger.SplitOwner(req.Next)
		switch {
		case req.MaxRuns > 0 && j.runs >= req.MaxRuns:
			j.queued = 0
			j.put(ledger.Occurrence{ID: strconv.FormatInt(p, 10), Slot: p, Status: "skipped", Reason: ledger.SkipMaxRuns,
				Node: node, Trigger: string(ledger.TriggerQueued), Claimed: now.UnixMilli()})
		case req.Next != "" && j.fence < math.MaxInt64:
			j.handedTo, j.handedSlot, j.queued = req.Next, p, 0
			j.owner, j.expires = req.Next, now.Add(req.TTL.Truncate(time.Millisecond))
			f.Token = j.mint(now.UnixMicro())
			j.put(ledger.Occurrence{ID: strconv.FormatInt(p, 10), Slot: p, Status: "claimed", Node: node, Token: f.Token,
				Trigger: string(ledger.TriggerQueued), RunID: runID, Claimed: now.UnixMilli()})
			j.inflight[strconv.FormatInt(p, 10)] = now.UnixMilli()
		default:
			f.Left = true
		}
	}
	f.Runs, f.Seq = j.runs, j.seq
	m.mu.Unlock()
	if conflict {
		return ledger.Finished{}, fmt.Errorf("finish %q: %w", req.Job, ledger.ErrRecordConflict)
	}
	if err := m.commit(ctx, req.Job); err != nil {
		return ledger.Finished{}, fmt.Errorf("finish %q: %w", req.Job, err)
	}
	return f, nil
}

// Audit records missed occurrences as auditScript does (R8).
func (m *Memory) Audit(ctx context.Context, req ledger.AuditRequest) (ledger.Audited, error) {
	if err := ctx.Err(); err != nil || req.Job == "" {
		return ledger.Audited{}, fmt.Errorf("audit %q: %w", req.Job, errors.Join(err, errEmptyJob(req.Job)))
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(req.Job)
	a := ledger.Audited{Now: time.UnixMilli(now.UnixMilli())}
	if req.SeenSeq > j.seq { // R5, as in the claim
		j.seq, j.lostAt, a.Repaired = req.SeenSeq, now.UnixMilli(), true
	}
	if j.auditedTo == 0 {
		j.auditedTo = now.Unix()
		if j.since == 0 {
			j.since = now.UnixMilli()
		}
	}
	gone := now.UnixMilli() - (req.LockTTL + req.Window + req.Grace).Milliseconds()
	for _, id := range slices.Sorted(maps.Keys(j.inflight)) {
		cur, ok := j.occ[id]
		switch {
		case j.inflight[id] >= gone:
		case !ok || cur.Status != "claimed":
			delete(j.inflight, id)
		case j.owner != cur.Node+":"+cur.RunID || !now.Before(j.expires):
			cur.Status, cur.Reason = "unknown", "no result within lock_ttl and the answer window: its node died or its finish was lost; it may have run"
			j.put(cur)
			delete(j.inflight, id)
			j.unknown++
			a.Unknown = append(a.Unknown, id)
		}
	}
	a.From, a.To = j.auditedTo, j.auditedTo
	defer func() { a.Seq, a.Runs = j.seq, j.runs }()
	if len(req.Slots) == 0 {
		return a, nil
	}
	if req.From != j.auditedTo {
		a.Stale = true
		return a, nil
	}
	wrote := 0
	for _, s := range req.Slots {
		if s*1000+(req.Window+req.Grace).Milliseconds() >= now.UnixMilli() {
			break
		}
		if s <= a.To {
			continue
		}
		id := strconv.FormatInt(s, 10)
		if _, ok := j.occ[id]; !ok && s > j.floor {
			wrote++
			o := ledger.Occurrence{ID: id, Slot: s, Status: "missed", Reason: req.Reason, Node: req.Node,
				Trigger: string(ledger.TriggerSchedule), Claimed: now.UnixMilli()}
			switch {
			case j.lostAt > 0 && s*1000 <= j.lostAt+req.Early.Milliseconds():
				o.Status, o.Reason = "skipped", ledger.SkipStateLost
			case req.MaxRuns > 0 && j.runs >= req.MaxRuns:
				o.Status, o.Reason = "skipped", ledger.SkipMaxRuns
			default:
				a.Missed = append(a.Missed, s)
			}
			j.put(o)
		}
		a.To = s
	}
	j.auditedTo = a.To
	if wrote > 0 {
		j.trim(now, req.Retention, wrote+10, req.Window+req.Grace, 0)
	}
	return a, nil
}

func errEmptyJob(job string) error {
	if job == "" {
		return errors.New("empty job name")
	}
	return nil
}

// Occurrences returns the job's records with index score in [from, to],
// oldest first, as Redis.Occurrences does.
func (m *Memory) Occurrences(ctx context.Context, job string, from, to int64) ([]ledger.Occurrence, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("occurrences %q: %w", job, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(job)
	var out []ledger.Occurrence
	for id, o := range j.occ {
		if s := j.score(id); s >= from && s <= to {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b ledger.Occurrence) int {
		return int(j.score(a.ID) - j.score(b.ID))
	})
	return out, nil
}

// History returns up to n of the job's most recent runs, newest first.
func (m *Memory) History(ctx context.Context, job string, n int) ([]ledger.RunRecord, error) {
	if n <= 0 {
		return nil, nil
	}
	occ, err := m.Occurrences(ctx, job, 0, 1<<53)
	if err != nil {
		return nil, err
	}
	return ledger.RunsOf(occ, n), nil
}

var _ ledger.Unhander = (*Memory)(nil)

// Unhand is Redis.Unhand in memory.
func (m *Memory) Unhand(ctx context.Context, job, owner string) (slot int64, held bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("unhand %q: %w", job, err)
	}
	m.mu.Lock()
	j := m.job(job)
	if j.owner != owner {
		m.mu.Unlock()
		return 0, false, nil
	}
	j.owner = ""
	if j.handedTo == owner && j.queued == 0 {
		j.queued, slot = j.handedSlot, j.handedSlot
	}
	m.mu.Unlock()
	if slot > 0 {
		if err := m.commit(ctx, job); err != nil {
			return 0, true, fmt.Errorf("unhand %q: %w", job, err)
		}
	}
	return slot, true, nil
}

// settleUnanswered is a finish with OwnRecordOnly (docs/protocol.md, R6):
// each record of o's run still claimed (o's slot, or a pending slot its
// claim took) or declared unknown becomes skipped redis_error; none is
// created.
func (j *memJob) settleUnanswered(o ledger.Occurrence) {
	ids := []string{o.ID}
	for id := range j.inflight {
		ids = append(ids, id)
	}
	for _, id := range ids {
		cur, ok := j.occ[id]
		if !ok || cur.RunID != o.RunID || cur.Status != "claimed" && cur.Status != "unknown" {
			continue
		}
		if cur.Status == "unknown" {
			j.unknown--
		}
		delete(j.inflight, id)
		cur.Status, cur.Reason = "skipped", ledger.SkipRedisError
		j.put(cur)
	}
}
