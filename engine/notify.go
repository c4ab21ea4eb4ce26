package engine

import (
	"context"

	"github.com/cronlock/cronlock/ledger/memory"
	"github.com/cronlock/cronlock/notify"
	"github.com/cronlock/cronlock/redislock"
)

var (
	_ notify.Outcomes = (*redislock.Redis)(nil)
	_ notify.Outcomes = (*memory.Memory)(nil)
	_ notify.Outcomes = (*lazyRedis)(nil)
)

// newNotifier builds the alert notifier (docs/alerts.md) on the backend,
// which decides failing and recovered once in the cluster.
func (e *Engine) newNotifier() *notify.Notifier {
	out, _ := e.backend.Backend.(notify.Outcomes) // every backend has it (above)
	return notify.New(notify.Options{Log: e.log, Outcomes: out, Registry: e.reg, Webhooks: e.cfg.Notify.Webhooks})
}

// RecordOutcome records a run's outcome for alerts once a client exists.
func (l *lazyRedis) RecordOutcome(ctx context.Context, job string, slot int64, runID string, ok bool) (string, error) {
	r, err := l.client()
	if err != nil {
		return "", err
	}
	return r.RecordOutcome(ctx, job, slot, runID, ok)
}
