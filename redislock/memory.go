package redislock

import (
	"context"
	"errors"
	"fmt"
	"github.com/cronlock/cronlock/actors"
	"math"
	"sync"
	"time"
)

// Memory is the process-local backend (docs/protocol.md, "The memory backend"): the same
// protocol and method set as Redis, in a mutex-guarded map. It coordinates
// the callers of ONE process only; on several nodes every node would run
// every slot (the engine logs a startup warning).
//
// Lease expiry is checked against time.Now() on each access, and Memory owns
// no goroutines or timers, so it works inside testing/synctest bubbles.
// Methods are safe for concurrent use. Without a state store (NewMemory)
// they never block beyond the mutex and ignore ctx (they return ctx.Err()
// only if ctx is already done); with one (OpenMemory) Claim, Pause and
// Resume also wait, at most until ctx ends, for the state file write.
type Memory struct {
	mu         sync.Mutex
	jobs       map[string]*memJob
	historyLen int

	// Persistence (memory_state.go), guarded by mu. store is nil when
	// nothing is persisted. Snapshots are numbered 1, 2, … in the order
	// they are taken; at most one is being written at a time.
	store   StateStore
	saving  bool          // a snapshot is being written
	taken   uint64        // snapshots taken
	written uint64        // the newest snapshot written successfully
	failed  uint64        // the newest snapshot whose write failed
	failErr error         // that write's error
	saved   chan struct{} // closed (and replaced) when a write ends
}

type memJob struct {
	slot, fence int64
	missedTo    int64  // the latest slot reported missed (ReportMissed)
	queued      int64  // the pending slot (overlap queue, replace); 0 = none
	handedTo    string // the owner the last finish handed the pending slot handedSlot to (Unhand)
	handedSlot  int64
	backfilled  map[int64]bool // slots claimed by a backfill
	runs        int64          // successful runs (max_runs)
	paused      bool
	owner       string    // lease holder, "" when none
	expires     time.Time // lease expiry; valid when owner != ""
	last        *actors.RunRecord
	history     []actors.RunRecord // oldest first, at most historyLen

	durable    memDurable // what the state file holds for the job
	pending    memDurable // what snapshot pendingSeq holds for the job
	pendingSeq uint64
}

// NewMemory returns an empty Memory backend whose history keeps
// DefaultHistoryLen records per job.
func NewMemory() *Memory {
	return &Memory{jobs: make(map[string]*memJob), historyLen: DefaultHistoryLen, saved: make(chan struct{})}
}

// job returns the job's entry, creating it, with an expired lease cleared.
// m.mu must be held.
func (m *Memory) job(name string) *memJob {
	j := m.jobs[name]
	if j == nil {
		j = &memJob{}
		m.jobs[name] = j
	}
	if j.owner != "" && !time.Now().Before(j.expires) {
		j.owner = ""
	}
	return j
}

// Claim runs the claim step (docs/protocol.md) as Redis.Claim does: the
// state repair from req.MinSlot/MinFence first, then steps 1–4. With a
// state store it returns only once the job's slot and fence, as the claim
// left them, are in the state file (at once when they already were); an
// error then means the outcome is unknown, as with Redis: the caller does
// not run the slot.
func (m *Memory) Claim(ctx context.Context, req actors.ClaimRequest) (actors.Claim, error) {
	c, err := m.claim(ctx, req)
	if err != nil {
		return c, err
	}
	if err := m.commit(ctx, req.Job); err != nil {
		return actors.Claim{}, fmt.Errorf("claim %q: %w", req.Job, err)
	}
	return c, nil
}

func (m *Memory) claim(ctx context.Context, req actors.ClaimRequest) (actors.Claim, error) {
	if err := errors.Join(req.Validate(), ctx.Err()); err != nil {
		return actors.Claim{}, fmt.Errorf("claim %q: %w", req.Job, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(req.Job)
	c := actors.Claim{FoundSlot: j.slot, FoundFence: j.fence}
	if j.last != nil && !j.last.Start.IsZero() && j.last.End.After(j.last.Start) {
		c.LastRun = j.last.End.Sub(j.last.Start) // as the Redis claim reads state.last_start and last_end
	}
	if req.MinSlot > j.slot {
		j.slot, c.Repaired = req.MinSlot, true
	}
	if req.MinFence > j.fence {
		j.fence, c.Repaired = req.MinFence, true
	}
	slot, owner, expires, queued, backfilled := j.slot, j.owner, j.expires, j.queued, j.backfilled[req.Slot]
	c.Outcome = m.decide(j, req, &c)
	if c.Outcome == actors.Claimed {
		if j.fence == math.MaxInt64 {
			// No token is left to hand out (Redis: HINCRBY fails with
			// "increment or decrement would overflow"). The slot, the
			// lease and the pending slot are left as they were; the repair
			// above stays.
			j.slot, j.owner, j.expires, j.queued = slot, owner, expires, queued
			if req.Backfill && !backfilled {
				delete(j.backfilled, req.Slot)
			}
			return actors.Claim{}, fmt.Errorf("claim %q: the fencing token is at its maximum %d and cannot be incremented", req.Job, j.fence)
		}
		j.fence++
		c.Fence = j.fence
	}
	if c.Outcome == actors.Overlap || c.Outcome == actors.Queued {
		c.Holder = j.owner
	}
	c.StateSlot, c.StateFence = j.slot, j.fence
	return c, nil
}

// decide is claim steps 1–3 and the slot record of step 4 (the caller
// increments the fence of a claimed slot), with the pending slot of a Queue
// request (c.Pending, c.Takes). m.mu must be held.
func (m *Memory) decide(j *memJob, req actors.ClaimRequest, c *actors.Claim) actors.Outcome {
	if req.Backfill {
		return m.decideBackfill(j, req)
	}
	if req.Slot > 0 && j.slot >= req.Slot {
		return actors.ClaimedElsewhere
	}
	if req.NeedRecord && j.slot == 0 {
		return actors.NoRecord
	}
	if req.Early && (req.MaxRuns > 0 && j.runs >= req.MaxRuns || j.paused && !req.IgnorePause || req.Lease && j.owner != "") {
		return actors.NotYet // nothing recorded: decided again at the fire time
	}
	if req.MaxRuns > 0 && j.runs >= req.MaxRuns {
		if req.Slot > 0 {
			j.slot = req.Slot
		}
		return actors.MaxRunsReached
	}
	outcome := actors.Claimed
	switch {
	case j.paused && !req.IgnorePause:
		outcome = actors.Paused
	case req.Lease && j.owner != "" && req.Queue && j.queued == 0:
		outcome, j.queued = actors.Queued, req.Slot
	case req.Lease && j.owner != "":
		outcome = actors.Overlap
		if req.Queue {
			c.Pending = j.queued
		}
	case req.Lease:
		j.owner, j.expires = req.Owner, time.Now().Add(req.TTL.Truncate(time.Millisecond))
		if req.Queue && j.queued > 0 {
			c.Takes, j.queued = j.queued, req.Slot
		}
	}
	if req.Slot > 0 {
		j.slot = req.Slot
	}
	return outcome
}

// decideBackfill is the claim of a backfill slot (ClaimRequest.Backfill).
// m.mu must be held.
func (m *Memory) decideBackfill(j *memJob, req actors.ClaimRequest) actors.Outcome {
	switch {
	case j.backfilled[req.Slot]:
		return actors.AlreadyRun
	case req.MaxRuns > 0 && j.runs >= req.MaxRuns:
		return actors.MaxRunsReached
	case j.paused && !req.IgnorePause:
		return actors.Paused
	case req.Lease && j.owner != "":
		return actors.Overlap
	case req.Lease:
		j.owner, j.expires = req.Owner, time.Now().Add(req.TTL.Truncate(time.Millisecond))
	}
	if j.backfilled == nil {
		j.backfilled = map[int64]bool{}
	}
	j.backfilled[req.Slot] = true
	return actors.Claimed
}

// Renew resets the lease TTL if owner holds it and returns the pending
// slot; see Redis.Renew.
func (m *Memory) Renew(ctx context.Context, job, owner string, ttl time.Duration) (pending int64, err error) {
	if err := errors.Join(validateLease(job, owner, ttl), ctx.Err()); err != nil {
		return 0, fmt.Errorf("renew %q: %w", job, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(job)
	if j.owner != owner {
		return 0, fmt.Errorf("renew %q: %w", job, actors.ErrNotHeld)
	}
	j.expires = time.Now().Add(ttl.Truncate(time.Millisecond))
	return j.queued, nil
}

// Release deletes the lease if owner holds it; see Redis.Release.
func (m *Memory) Release(ctx context.Context, job, owner string) (released bool, err error) {
	if err := errors.Join(validateLease(job, owner, -1), ctx.Err()); err != nil {
		return false, fmt.Errorf("release %q: %w", job, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(job)
	if j.owner != owner {
		return false, nil
	}
	j.owner = ""
	return true, nil
}

// record appends rec to the job's history (capped) and, with setLast, sets
// it as the last run, as Redis.Finish does after the release.
func (m *Memory) record(ctx context.Context, job string, rec actors.RunRecord, setLast bool) error {
	if job == "" {
		return errors.New("record: empty job name")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("record %q: %w", job, err)
	}
	rec = normalise(rec)
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(job)
	j.history = append(j.history, rec)
	if over := len(j.history) - m.historyLen; over > 0 {
		j.history = append([]actors.RunRecord(nil), j.history[over:]...)
	}
	if setLast {
		last := rec
		last.OutputTail = ""
		j.last = &last
	}
	return nil
}

// retryFacts tells a retried finish of rec (as the Redis script does, by
// the records' ends instead of their append times) whether job's history
// holds rec's run already, whether its newest record ended after rec (a
// later run's: the last run stays that one), and whether the capped
// history no longer reaches retryMargin back before rec's end (unsure:
// then recorded is true too, nothing is appended).
func (m *Memory) retryFacts(job string, rec actors.RunRecord) (recorded, newer, unsure bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.job(job).history
	for _, r := range h {
		recorded = recorded || r.RunID == rec.RunID
	}
	if !recorded && len(h) >= m.historyLen && h[0].End.After(rec.End.Add(-retryMargin)) {
		recorded, unsure = true, true
	}
	return recorded, len(h) > 0 && h[len(h)-1].End.After(rec.End), unsure
}

// History returns up to n records, newest first; see Redis.History.
func (m *Memory) History(ctx context.Context, job string, n int) ([]actors.RunRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("history %q: %w", job, err)
	}
	if n <= 0 {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.job(job).history
	out := make([]actors.RunRecord, 0, min(n, len(h)))
	for i := len(h) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, h[i])
	}
	return out, nil
}

// State returns the job's state; see Redis.State.
func (m *Memory) State(ctx context.Context, job string) (JobState, error) {
	if err := ctx.Err(); err != nil {
		return JobState{}, fmt.Errorf("state %q: %w", job, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(job)
	st := JobState{Slot: j.slot, Fence: j.fence, Paused: j.paused, LeaseHolder: j.owner, Runs: j.runs, Pending: j.queued}
	if j.owner != "" {
		st.LeaseTTL = time.Until(j.expires).Truncate(time.Millisecond)
	}
	if j.last != nil {
		last := *j.last
		st.Last = &last
	}
	return st, nil
}

// Pause marks the job paused; see Redis.Pause.
func (m *Memory) Pause(ctx context.Context, job string) error {
	return m.setPaused(ctx, "pause", job, true)
}

// Resume clears the pause mark; see Redis.Resume.
func (m *Memory) Resume(ctx context.Context, job string) error {
	return m.setPaused(ctx, "resume", job, false)
}

func (m *Memory) setPaused(ctx context.Context, op, job string, paused bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %q: %w", op, job, err)
	}
	m.mu.Lock()
	m.job(job).paused = paused
	m.mu.Unlock()
	if err := m.commit(ctx, job); err != nil {
		return fmt.Errorf("%s %q: %w", op, job, err)
	}
	return nil
}

// Time returns time.Now() in UTC: the local clock is the coordinator's clock.
func (m *Memory) Time(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, fmt.Errorf("time: %w", err)
	}
	return time.Now().UTC(), nil
}

// Ping returns nil unless ctx is done.
func (m *Memory) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// Close does nothing; Memory holds no resources.
func (m *Memory) Close() {}

// normalise gives a record the form it has after a Redis round trip: UTC
// times without monotonic readings and a cut output tail.
func normalise(rec actors.RunRecord) actors.RunRecord {
	rec.Start = rec.Start.UTC().Round(0)
	rec.End = rec.End.UTC().Round(0)
	rec.OutputTail = tail(rec.OutputTail)
	return rec
}
