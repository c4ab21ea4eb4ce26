package engine

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// supervise handles signals and shutdown until the last run and hook have
// ended, and returns the first actor failure (nil after a clean shutdown),
// or errSecondSignal / errShutdownBound once ExitNow has run. The first
// SIGTERM/SIGINT, ctx ending or an actor failing begins the shutdown; a
// second SIGTERM/SIGINT SIGKILLs running jobs and hooks and exits, whatever
// is draining; SIGHUP reloads while not shutting down. runsDone is closed
// once every job actor (and so every run) has returned, hooksDone once the
// hook runner has. Each case is one method.
func (e *Engine) supervise(ctx context.Context, stopClaiming context.CancelFunc,
	runsDone, hooksDone <-chan struct{}) error {
	ctxDone, runs := ctx.Done(), runsDone
	for {
		select {
		case sig := <-e.opts.Signals:
			if exit, err := e.onSignal(ctx, sig, stopClaiming, runsDone, hooksDone); exit {
				return err
			}
		case err := <-e.failed:
			if e.actorErr == nil {
				e.actorErr = err
			}
			e.beginShutdown(err.Error(), stopClaiming)
		case <-ctxDone:
			ctxDone = nil
			e.beginShutdown(context.Cause(ctx).Error(), stopClaiming)
		case <-e.killAfter:
			e.killAfter = nil
			e.onShutdownTimeout()
		case <-e.giveUpAfter:
			return e.onShutdownBound()
		case <-runs:
			runs = nil
			e.closeHooks()
		case <-hooksDone:
			return e.actorErr
		}
	}
}

// onSignal handles one signal; exit says supervise must return err.
func (e *Engine) onSignal(ctx context.Context, sig os.Signal, stopClaiming context.CancelFunc,
	runsDone, hooksDone <-chan struct{}) (exit bool, err error) {
	if sig == syscall.SIGHUP {
		if e.shutdownCause == "" {
			e.reload(ctx)
		} else {
			e.log.Warn("SIGHUP ignored: the daemon is shutting down; the configuration is read at the next start")
		}
		return false, nil
	}
	e.signals++
	if e.signals > 1 {
		return true, e.onSecondSignal(runsDone, hooksDone)
	}
	e.beginShutdown(sig.String(), stopClaiming)
	return false, nil
}

// beginShutdown stops claiming, marks the node not ready (/readyz), says
// STOPPING=1 (sd_notify(3): sent when the shutdown begins) and
// EXTEND_TIMEOUT_USEC with the shutdown's bound (so that a TimeoutStopSec
// shorter than it does not cut the ordered shutdown), and starts the
// shutdown_timeout clock and the bound's. Idempotent.
func (e *Engine) beginShutdown(cause string, stopClaiming context.CancelFunc) {
	if e.shutdownCause != "" {
		return
	}
	e.shutdownCause = cause
	e.stopping.Store(true)
	bound := e.cfg.Node.ShutdownTimeout + e.maxKillGrace + shutdownSlack
	e.log.Info("shutting down: no new claims; waiting for running jobs and hooks",
		zap.String("cause", cause), zap.Duration("shutdown_timeout", e.cfg.Node.ShutdownTimeout),
		zap.Duration("bound", bound))
	e.opts.Notify("STOPPING=1\nSTATUS=shutting down")
	e.opts.Notify(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", bound.Microseconds()))
	stopClaiming()
	e.killAfter = time.After(e.cfg.Node.ShutdownTimeout)
	e.giveUpAfter = time.After(bound)
}

// onShutdownTimeout terminates the runs and hooks still going (SIGTERM,
// SIGKILL after kill_grace); the runs then release their leases. Hooks
// still waiting are not started.
func (e *Engine) onShutdownTimeout() {
	e.log.Warn("shutdown_timeout passed; terminating running jobs and hooks")
	e.opts.Notify("STATUS=shutting down: shutdown_timeout passed, terminating runs and hooks")
	e.killRuns()
}

// onShutdownBound exits when the shutdown has outlasted its bound (a run
// or hook that does not end even after SIGKILL, a release that hangs).
func (e *Engine) onShutdownBound() error {
	e.log.Error("shutdown not finished within shutdown_timeout + kill_grace + slack; exiting anyway",
		zap.Duration("slack", shutdownSlack))
	e.flushSeen()
	e.opts.ExitNow()
	return errShutdownBound
}

// onSecondSignal SIGKILLs running jobs and hooks at once, lets the runs
// release their leases and the hooks end (at most secondSignalWait in all)
// and exits through ExitNow, whatever was still draining.
func (e *Engine) onSecondSignal(runsDone, hooksDone <-chan struct{}) error {
	e.log.Warn("second signal: killing running jobs and hooks at once, releasing leases, exiting")
	close(e.killNow)
	e.killRuns()
	deadline := time.After(secondSignalWait)
	select {
	case <-runsDone:
		e.closeHooks()
		select {
		case <-hooksDone:
			e.flushSeen()
			e.opts.ExitNow()
			return errSecondSignal
		case <-deadline:
		}
	case <-deadline:
	}
	e.log.Error("runs or hooks not finished after the second signal; exiting anyway", zap.Duration("waited", secondSignalWait))
	e.flushSeen()
	e.opts.ExitNow()
	return fmt.Errorf("%w (runs or hooks still finishing)", errSecondSignal)
}

// closeHooks closes the hook runner's inbox once every job actor has
// returned (no sender is left). Idempotent.
func (e *Engine) closeHooks() {
	if !e.hooksClosed {
		e.hooksClosed = true
		e.hooks.Close()
	}
}

func (e *Engine) killRuns() {
	select {
	case <-e.kill:
	default:
		close(e.kill)
	}
}

// flushSeen writes the ledger counts seen since the last write before
// ExitNow ends the process without the writer's last flush: the counts of
// the runs that ended just before are the likeliest to be missing
// (docs/protocol.md, R6). It waits at most seenFlushWait (a hung state
// directory must not hold the exit).
func (e *Engine) flushSeen() {
	if e.seen == nil {
		return
	}
	done := make(chan error, 1)
	go func() { done <- e.seen.Flush() }()
	select {
	case err := <-done:
		if err != nil {
			e.log.Warn("ledger counts not written to the state directory before exiting", zap.Error(err))
		}
	case <-time.After(seenFlushWait):
		e.log.Warn("ledger counts not written to the state directory before exiting: the write did not return",
			zap.Duration("waited", seenFlushWait))
	}
}

// seenFlushWait bounds flushSeen.
const seenFlushWait = time.Second
