package actors

import (
	"fmt"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/process"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// outcome is the result of one attempt.
type outcome struct {
	process.Result
	result string
}

// attempt starts the command once and waits for it, terminating its process
// group on timeout, lease loss (with on_lock_lost: kill) or shutdown kill
// (docs/architecture.md, "Processes and environment"). It blocks until the process group is
// gone.
func (r *run) attempt(attempt int, lost <-chan LeaseLost, replaced <-chan int64) outcome {
	spec := process.Spec{Shell: r.job.Shell, Command: r.job.Command, Dir: r.job.WorkDir,
		Env: runEnv(r.env, r.deps.Environ, *r.job, r.info, attempt), User: r.job.User, KillGrace: r.job.KillGrace,
		Log: r.logger()}
	r.out.apply(&spec)
	p, err := r.startProcess(spec)
	if err != nil {
		r.logger().Error("run could not start", zap.Error(err))
		now := time.Now()
		return outcome{Result: process.Result{ExitCode: -1, Started: now, Finished: now, Err: err}, result: ledger.ResultError}
	}
	// The timeout and the lease-loss kill are armed (below) before the
	// state-directory write, which runs beside them (docs/protocol.md, R3).
	recorded := r.recordGroupAsync(attempt, p)
	fields := []zap.Field{zap.Int("pid", p.Pid())}
	if attempt == 1 && r.info.Trigger == ledger.TriggerSchedule {
		delay := p.Started().Sub(r.info.Slot)
		r.deps.Metrics.ObserveFireDelay(r.job.Name, delay)
		fields = append(fields, zap.Int64("fire_delay_us", delay.Microseconds()))
		if !r.redisNow.IsZero() { // when Redis decided the claim, after the slot (make bench's herd reads it)
			fields = append(fields, zap.Int64("claimed_us", r.redisNow.Sub(r.info.Slot).Microseconds()))
		}
	}
	var timeout <-chan time.Time
	if r.job.Timeout > 0 {
		t := time.NewTimer(r.job.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	r.logger().Info("run started", fields...)
	kill, killNow, result := r.deps.Kill, r.deps.KillNow, ""
	for {
		select {
		case <-p.Done():
			r.awaitRecord(recorded)
			return r.finish(p.Wait(), result)
		case rec := <-recorded:
			recorded = nil
			r.recordedGroup(rec)
		case <-timeout:
			timeout, result = nil, ledger.ResultTimeout
			r.logger().Warn("run timed out; terminating its process group", zap.Duration("timeout", r.job.Timeout))
			p.Terminate(r.job.KillGrace)
		case slot := <-replaced:
			replaced = nil
			r.onReplaced(slot)
			if result == "" {
				result = ledger.ResultReplaced
			}
			p.Terminate(r.job.KillGrace)
		case l := <-lost:
			lost = nil
			r.onLost(l)
			if r.job.OnLockLost == config.LockLostKill {
				result = ledger.ResultLockLost
				r.logger().Error("lease lost; terminating the run before the lease can expire",
					zap.Duration("grace", min(r.job.KillGrace, l.Grace)))
				p.Terminate(min(r.job.KillGrace, l.Grace))
			} else {
				r.logger().Error("lease lost; on_lock_lost is continue, the run goes on")
			}
		case <-killNow:
			killNow, kill = nil, nil
			if result == "" {
				result = ledger.ResultFailure
			}
			r.logger().Warn("second signal: killing the run at once")
			p.Terminate(0)
		case <-kill:
			kill = nil
			if isClosed(killNow) {
				continue // a second signal: the killNow case handles it
			}
			if result == "" {
				result = ledger.ResultFailure
			}
			r.logger().Warn("shutdown timeout passed; terminating the run")
			p.Terminate(r.job.KillGrace)
		}
	}
}

// StartTimeout bounds a process start (docs/protocol.md, R3): a start
// that has not returned by then (a hung user lookup, a work_dir on a hung
// NFS mount) is abandoned with an error, so that the run ends and its
// lease is released.
const StartTimeout = 10 * time.Second

// startProcess starts spec, abandoning the start after StartTimeout. The
// goroutine of an abandoned start stays until the start returns; a
// process it then started is killed at once (it may have run briefly: the
// fork had happened, the exec had not).
func (r *run) startProcess(spec process.Spec) (Proc, error) {
	type started struct {
		p   Proc
		err error
	}
	// Unbuffered: a start that returns after it was abandoned can hand its
	// process over only to a receiver; with no one receiving, the select
	// below can only see abandoned and kill it (a buffered channel took it
	// half the time, and the process ran on unsupervised).
	ch := make(chan started)
	abandoned := make(chan struct{})
	go func() {
		p, err := r.deps.Start(spec)
		select {
		case ch <- started{p, err}:
		case <-abandoned:
			if err == nil {
				p.Terminate(0)
				p.Wait()
			}
		}
	}()
	t := time.NewTimer(StartTimeout)
	defer t.Stop()
	select {
	case s := <-ch:
		return s.p, s.err
	case <-t.C:
		close(abandoned)
		select { // it may have returned as the timer fired
		case s := <-ch:
			return s.p, s.err
		default:
		}
		return nil, fmt.Errorf("process start did not return within %v (a hung user lookup, or a work_dir on a "+
			"hung file system?); abandoned", StartTimeout)
	}
}

func (r *run) finish(res process.Result, result string) outcome {
	switch {
	case r.lostErr != nil:
		result = ledger.ResultLockLost
	case result != "":
	case res.Err != nil:
		result = ledger.ResultError
	case res.ExitCode == 0:
		result = ledger.ResultSuccess
	default:
		result = ledger.ResultFailure
	}
	r.logger().Log(finishedLevel(result), "run finished", zap.String("result", result),
		zap.Int("exit_code", res.ExitCode), zap.Duration("duration", res.Finished.Sub(res.Started)))
	return outcome{Result: res, result: result}
}

// finishedLevel is the level of a "run finished" line: info for success
// and for a run replaced by a newer slot (the overlap policy asked for it),
// error for an error result (the command could not run as configured),
// warn for any other failure.
func finishedLevel(result string) zapcore.Level {
	switch result {
	case ledger.ResultSuccess, ledger.ResultReplaced:
		return zapcore.InfoLevel
	case ledger.ResultError:
		return zapcore.ErrorLevel
	}
	return zapcore.WarnLevel
}
