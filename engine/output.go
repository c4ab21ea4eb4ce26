package engine

import (
	"fmt"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/memory"
	"github.com/cronlock/cronlock/redislock"
)

var (
	_ ledger.OutputStore = (*redislock.Backend)(nil)
	_ ledger.OutputStore = (*memory.Output)(nil)
	_ ledger.HookStore   = (*redislock.Backend)(nil)
	_ ledger.HookStore   = (*memory.Output)(nil)
)

// outputStore is where runs keep and publish their output: Redis (through
// the lazy client when it is one), or on the memory backend the daemon's
// own memory.Output.
func outputStore(b backend) ledger.OutputStore {
	if s, ok := b.Backend.(ledger.OutputStore); ok {
		return s
	}
	return memory.NewOutput()
}

// output returns the output store for the API and the dashboard.
func (e *Engine) output() (ledger.OutputStore, error) { return e.out, nil }

// outputKeys is the output section as a reload compares it.
func outputKeys(cfg *config.Config) string {
	return fmt.Sprint(cfg.Output.MaxBytes, cfg.Output.Redact)
}
