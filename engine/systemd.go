package engine

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// watchdogInterval returns half of WATCHDOG_USEC when the watchdog is
// enabled for this process (WATCHDOG_PID unset or ours), else 0
// (sd_watchdog_enabled(3)).
func watchdogInterval(environ []string) time.Duration {
	var usec, pid string
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "WATCHDOG_USEC="); ok {
			usec = v
		} else if v, ok := strings.CutPrefix(kv, "WATCHDOG_PID="); ok {
			pid = v
		}
	}
	n, err := strconv.ParseInt(usec, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	if pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0
	}
	return time.Duration(n) * time.Microsecond / 2
}

// watchdog sends WATCHDOG=1 every interval, but only after the scheduler
// loop has answered a liveness probe: a stuck engine gets no ping and
// systemd restarts it.
func (e *Engine) watchdog(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, interval/2)
		err := e.ticker.Probe(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				e.log.Error("scheduler loop did not answer the liveness probe; withholding watchdog ping", zap.Error(err))
			}
			continue
		}
		e.opts.Notify("WATCHDOG=1")
	}
}
