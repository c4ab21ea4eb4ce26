package engine

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// supervise handles signals and shutdown until the actor group has
// stopped, and returns the group's error (or errSecondSignal). The first
// SIGTERM/SIGINT, ctx ending or an actor failing begins the shutdown; a
// second SIGTERM/SIGINT SIGKILLs running jobs and exits; SIGHUP reloads
// while not shutting down. Each case is one method.
func (e *Engine) supervise(gctx context.Context, stopClaiming context.CancelFunc, groupDone <-chan error) error {
	gdone := gctx.Done()
	for {
		select {
		case sig := <-e.opts.Signals:
			if exit, err := e.onSignal(gctx, sig, stopClaiming, groupDone); exit {
				return err
			}
		case <-gdone:
			gdone = nil
			e.beginShutdown(context.Cause(gctx).Error(), stopClaiming)
		case <-e.killAfter:
			e.killAfter = nil
			e.onShutdownTimeout()
		case err := <-groupDone:
			return err
		}
	}
}

// onSignal handles one signal; exit says supervise must return err.
func (e *Engine) onSignal(ctx context.Context, sig os.Signal, stopClaiming context.CancelFunc,
	groupDone <-chan error) (exit bool, err error) {
	if sig == syscall.SIGHUP {
		if e.shutdownCause == "" {
			e.reload(ctx)
		}
		return false, nil
	}
	e.signals++
	if e.signals > 1 {
		return true, e.onSecondSignal(groupDone)
	}
	e.beginShutdown(sig.String(), stopClaiming)
	return false, nil
}

// beginShutdown stops claiming, says STOPPING=1 (sd_notify(3): sent when
// the shutdown begins) and starts the shutdown_timeout clock. Idempotent.
func (e *Engine) beginShutdown(cause string, stopClaiming context.CancelFunc) {
	if e.shutdownCause != "" {
		return
	}
	e.shutdownCause = cause
	e.log.Info("shutting down: no new claims; waiting for running jobs",
		zap.String("cause", cause), zap.Duration("shutdown_timeout", e.cfg.Node.ShutdownTimeout))
	e.opts.Notify("STOPPING=1\nSTATUS=shutting down")
	stopClaiming()
	e.killAfter = time.After(e.cfg.Node.ShutdownTimeout)
}

// onShutdownTimeout terminates the runs still going (SIGTERM, SIGKILL
// after kill_grace); they then release their leases.
func (e *Engine) onShutdownTimeout() {
	e.log.Warn("shutdown_timeout passed; terminating running jobs")
	e.killRuns()
}

// onSecondSignal SIGKILLs running jobs at once, lets them release their
// leases (at most secondSignalWait; hooks are not waited for) and exits
// through ExitNow.
func (e *Engine) onSecondSignal(groupDone <-chan error) error {
	e.log.Warn("second signal: killing running jobs at once, releasing their leases, exiting")
	e.killRuns()
	close(e.killNow)
	select {
	case <-groupDone:
		e.hooks.Close() // no sender is left; pending hooks are abandoned by ExitNow
		e.opts.ExitNow()
		return errSecondSignal
	case <-time.After(secondSignalWait):
		e.log.Error("runs not finished after the second signal; exiting anyway", zap.Duration("waited", secondSignalWait))
		e.opts.ExitNow()
		return fmt.Errorf("%w (runs still finishing)", errSecondSignal)
	}
}

func (e *Engine) killRuns() {
	select {
	case <-e.kill:
	default:
		close(e.kill)
	}
}
