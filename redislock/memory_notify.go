package redislock

import (
	"context"
	"fmt"
	"sync"
)

// notifyTable is the memory backend's record of each job's last outcome
// for alerts: what P notify:J holds on Redis (notify.go). Its zero value
// is ready; it is safe for concurrent use.
type notifyTable struct {
	mu   sync.Mutex
	jobs map[string]lastOutcome
}

// lastOutcome is the newest recorded outcome of a job.
type lastOutcome struct {
	slot int64
	run  string
	ok   bool
}

// transition is outcomeScript's rule (notify.go): the transition that the
// outcome (slot, run, ok) makes after last (set: one is recorded), and
// whether it is recorded.
func transition(last lastOutcome, set bool, slot int64, run string, ok bool) (event string, record bool) {
	switch {
	case set && last.run == run, set && last.slot >= slot:
		return "", false
	case !ok && (!set || last.ok):
		return TransitionFailing, true
	case ok && set && !last.ok:
		return TransitionRecovered, true
	}
	return "", true
}

// RecordOutcome is Redis.RecordOutcome for this process's jobs. The
// records are not persisted: after a restart every job starts as one with
// no previous result.
func (m *Memory) RecordOutcome(ctx context.Context, job string, slot int64, runID string, ok bool) (string, error) {
	if job == "" || slot <= 0 || runID == "" {
		return "", fmt.Errorf("record outcome %q: %w", job, errOutcome)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	t := &m.notify
	t.mu.Lock()
	defer t.mu.Unlock()
	last, set := t.jobs[job]
	ev, record := transition(last, set, slot, runID, ok)
	if record {
		if t.jobs == nil {
			t.jobs = map[string]lastOutcome{}
		}
		t.jobs[job] = lastOutcome{slot: slot, run: runID, ok: ok}
	}
	return ev, nil
}
