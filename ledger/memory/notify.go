package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/cronlock/cronlock/ledger"
)

// notifyTable is the memory backend's record of each job's last outcome
// for alerts: what P notify:J holds on Redis. Its zero value is ready; it
// is safe for concurrent use.
type notifyTable struct {
	mu   sync.Mutex
	jobs map[string]ledger.LastOutcome
}

// RecordOutcome is ledger.OutcomeRecorder for this process's jobs, by the
// rule of ledger.Transition. The records are not persisted: after a
// restart every job starts as one with no previous result.
func (m *Memory) RecordOutcome(ctx context.Context, job string, slot int64, runID string, ok bool) (string, error) {
	if job == "" || slot <= 0 || runID == "" {
		return "", fmt.Errorf("record outcome %q: %w", job, ledger.ErrOutcome)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	t := &m.notify
	t.mu.Lock()
	defer t.mu.Unlock()
	last, set := t.jobs[job]
	ev, record := ledger.Transition(last, set, slot, runID, ok)
	if record {
		if t.jobs == nil {
			t.jobs = map[string]ledger.LastOutcome{}
		}
		t.jobs[job] = ledger.LastOutcome{Slot: slot, Run: runID, OK: ok}
	}
	return ev, nil
}
