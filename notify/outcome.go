package notify

import (
	"context"
	"sync"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/ledger"
	"go.uber.org/zap"
)

// transition is an outcome recorded by recordOutcomes that makes a
// failing or recovered alert (kind).
type transition struct {
	fin  actors.RunFinished
	kind string
}

// recordOutcomes records each finished run of q in the backend
// (RecordOutcome, bounded by outcomeTimeout) and hands the transitions it
// makes to the loop through out. It records one at a time, in the order
// the runs finished, so each job's outcomes reach the backend in order. A
// failed call is logged and counted as "outcome". It returns when ctx ends;
// it runs beside the loop so that a slow backend delays no other alert.
func (n *Notifier) recordOutcomes(ctx context.Context, q <-chan actors.RunFinished, out chan<- transition) {
	for {
		select {
		case <-ctx.Done():
			return
		case fin := <-q:
			kind, ok := n.record(ctx, fin)
			if !ok || kind == "" {
				continue
			}
			select {
			case out <- transition{fin: fin, kind: kind}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// record makes one RecordOutcome call; ok is false when it failed (logged,
// counted).
func (n *Notifier) record(ctx context.Context, fin actors.RunFinished) (kind string, ok bool) {
	cctx, cancel := context.WithTimeout(ctx, outcomeTimeout)
	defer cancel()
	kind, err := n.recorder.RecordOutcome(cctx, fin.Job, fin.Slot.Unix(), fin.RunID, fin.Result == ledger.ResultSuccess)
	if err != nil {
		n.failures.WithLabelValues("outcome").Inc()
		n.log.Warn("run outcome not recorded for alerts: a failing or recovered alert may be missing", zap.String("job", fin.Job),
			zap.Int64("slot", fin.Slot.Unix()), zap.String("run_id", fin.RunID), zap.Error(err))
		return "", false
	}
	return kind, true
}

// lostRuns holds the run ids of finishes the full inbox did not take until
// the loop takes them (forgetLost): the one path of a finish that is never
// dropped, so a finished run gets no running_long alert. It holds one id
// per such finish for as long as the loop is behind. Safe for concurrent
// use.
type lostRuns struct {
	mu  sync.Mutex
	ids []string
}

func (l *lostRuns) add(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, id)
}

// take returns the ids added since the last take.
func (l *lostRuns) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := l.ids
	l.ids = nil
	return ids
}
