// Package memory is the process-local backend of the exactly-once
// protocol (docs/protocol.md, "The memory backend"): the rules of
// ledger.Locker in a mutex-guarded map, optionally persisted to one file
// of the state directory. It coordinates the callers of one process only.
package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cronlock/cronlock/ledger"
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
	mu   sync.Mutex
	jobs map[string]*memJob

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

	notify notifyTable // each job's last outcome, for alerts (notify.go)
}

type memJob struct {
	slot       int64 // the highest slot claimed (persisted; a floor after a restart)
	floor      int64 // slots up to it were claimed before the state file was loaded
	fence      int64
	seq, runs  int64
	since      int64 // Unix ms the ledger began
	lostAt     int64
	auditedTo  int64 // Unix seconds; 0 = not started
	trimmedTo  int64
	queued     int64  // the pending slot (overlap queue, replace); 0 = none
	handedTo   string // the owner the last finish handed the pending slot handedSlot to (Unhand)
	handedSlot int64
	paused     bool
	owner      string    // lease holder, "" when none
	expires    time.Time // lease expiry; valid when owner != ""
	occ        map[string]ledger.Occurrence
	inflight   map[string]int64 // claims not finished: occurrence id → claim time, Unix ms
	unknown    int64            // runs the audit declared unknown (count toward max_runs)
	last       *ledger.Occurrence

	durable    memDurable // what the state file holds for the job
	pending    memDurable // what snapshot pendingSeq holds for the job
	pendingSeq uint64
}

// NewMemory returns an empty Memory backend.
func NewMemory() *Memory {
	return &Memory{jobs: make(map[string]*memJob), saved: make(chan struct{})}
}

// job returns the job's entry, creating it, with an expired lease cleared.
// m.mu must be held.
func (m *Memory) job(name string) *memJob {
	j := m.jobs[name]
	if j == nil {
		j = &memJob{occ: map[string]ledger.Occurrence{}, inflight: map[string]int64{}}
		m.jobs[name] = j
	}
	if j.owner != "" && !time.Now().Before(j.expires) {
		j.owner = ""
	}
	return j
}

// Renew resets the lease TTL if owner holds it and returns the pending
// slot; see Redis.Renew.
func (m *Memory) Renew(ctx context.Context, job, owner string, ttl time.Duration) (pending int64, err error) {
	if err := errors.Join(ledger.CheckLease(job, owner, ttl), ctx.Err()); err != nil {
		return 0, fmt.Errorf("renew %q: %w", job, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(job)
	switch j.owner {
	case owner:
	case "": // held by nobody: taken again, as renewScript does
		j.owner = owner
		j.expires = time.Now().Add(ttl.Truncate(time.Millisecond))
		return j.queued, fmt.Errorf("renew %q: %w", job, ledger.ErrRetaken)
	default:
		return 0, fmt.Errorf("renew %q: %w", job, ledger.ErrNotHeld)
	}
	j.expires = time.Now().Add(ttl.Truncate(time.Millisecond))
	return j.queued, nil
}

// Release deletes the lease if owner holds it; see Redis.Release.
func (m *Memory) Release(ctx context.Context, job, owner string) (released bool, err error) {
	if err := errors.Join(ledger.CheckLease(job, owner, -1), ctx.Err()); err != nil {
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

// State returns the job's state; see Redis.State.
func (m *Memory) State(ctx context.Context, job string) (ledger.JobState, error) {
	if err := ctx.Err(); err != nil {
		return ledger.JobState{}, fmt.Errorf("state %q: %w", job, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.job(job)
	st := ledger.JobState{Fence: j.fence, Seq: j.seq, Paused: j.paused, LeaseHolder: j.owner, Runs: j.runs, Pending: j.queued}
	if j.owner != "" {
		st.LeaseTTL = time.Until(j.expires).Truncate(time.Millisecond)
	}
	if j.last != nil {
		last := j.last.RunRecord()
		last.OutputTail = ""
		st.Last = &last
	}
	st.Slot = j.slot
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

// CheckReady answers ready: the backend is in this process, so a claim
// succeeds whenever the daemon runs.
func (m *Memory) CheckReady(context.Context, []string) ledger.Readiness {
	return ledger.Readiness{Ready: true, State: "up"}
}

// Close does nothing; Memory holds no resources.
func (m *Memory) Close() {}

var (
	_ ledger.Locker           = (*Memory)(nil)
	_ ledger.ReadinessChecker = (*Memory)(nil)
)
