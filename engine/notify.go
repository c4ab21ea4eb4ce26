package engine

import (
	"github.com/cronlock/cronlock/ledger/memory"
	"github.com/cronlock/cronlock/notify"
	"github.com/cronlock/cronlock/redislock"
)

var (
	_ notify.Outcomes = (*redislock.Redis)(nil)
	_ notify.Outcomes = (*memory.Memory)(nil)
	_ notify.Outcomes = (*redislock.Backend)(nil)
)

// newNotifier builds the alert notifier (docs/alerts.md) on the backend,
// which decides failing and recovered once in the cluster.
func (e *Engine) newNotifier() *notify.Notifier {
	out, _ := e.backend.Backend.(notify.Outcomes) // every backend has it (above)
	return notify.New(notify.Options{Log: e.log, Outcomes: out, Registry: e.reg, Webhooks: e.cfg.Notify.Webhooks})
}
