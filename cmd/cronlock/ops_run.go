package main

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/process"
	"github.com/cronlock/cronlock/redislock"
	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// runUsage is the usage line of `cronlock run`, with the rules an operator
// needs to know.
const runUsage = `[-config FILE] JOB

Runs JOB now through the cluster lease: a manual run takes the lease but
no slot (the schedule is unaffected) and ignores pause. If the lease is
held (the job is running on some node) nothing starts and the exit code
is 1. The command's output is copied to this terminal and the run is
recorded in the job's history. The exit code is the command's (128+N when
killed by signal N; 1 when it could not start).

timeout, kill_grace, lock_ttl and on_lock_lost apply; retries,
grace_period and hooks (on_success, on_failure) do not: hooks run only
for scheduled runs. SIGINT/SIGTERM terminates the command's process group
and releases the lease. With the memory backend the run is local to this
process: a running daemon is not consulted.`

// runManual implements `cronlock run [-config FILE] JOB`.
func runManual(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("run", runUsage, env)
	if code := f.parse(args); code >= 0 {
		return code
	}
	if code := f.oneJob(); code >= 0 {
		return code
	}
	// Output and log lines come from several goroutines: serialise writes.
	out := zapcore.Lock(zapcore.AddSync(env.stdout))
	errw := zapcore.Lock(zapcore.AddSync(env.stderr))
	env = &runEnv{environ: env.environ, stdout: out, stderr: errw}
	s, code, err := openOps("run", f.config, true, env)
	if s == nil {
		return opsFail(env, "run", code, err)
	}
	defer s.close()
	job, err := s.job(f.args[0])
	if err != nil {
		return opsFail(env, "run", 1, err)
	}
	log, err := manualLogger(s.cfg.Log, out, errw)
	if err != nil {
		return opsFail(env, "run", 1, fmt.Errorf("log: %w", err))
	}
	if s.kind == "memory" {
		log.Warn("memory backend: this run takes a lease local to this process; a running daemon is not consulted")
	}
	m := &manualRun{s: s, job: *job, environ: env.environ, id: uuid.NewString()}
	m.owner = s.cfg.Node.ID + ":" + m.id
	m.log = log.With(zap.String("job", job.Name), zap.String("run_id", m.id))
	code, err = m.execute(ctx)
	if err != nil {
		return opsFail(env, "run", code, err)
	}
	return code
}

// manualRun is one `cronlock run JOB`: claim (slot 0) → lease renewed by an
// actors.Lease → one attempt → release → history record.
type manualRun struct {
	s         *opsSession
	job       config.Job
	environ   []string
	id, owner string
	fence     int64
	log       *zap.Logger
	sig       syscall.Signal // the signal that killed the command, or 0
}

// execute runs the job once and returns the exit code, or exit code 1 and
// an error when the run could not be started (lease held, Redis error).
// Cancelling ctx (SIGINT/SIGTERM) terminates the run; release and record
// still happen on a fresh context.
func (m *manualRun) execute(ctx context.Context) (int, error) {
	sent := time.Now()
	if err := m.claim(ctx); err != nil {
		return 1, err
	}
	lease := actors.NewLease(m.log, m.s.backend, m.job.Name, m.owner, m.job.LockTTL, sent)
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); _ = lease.Run(lctx) }()
	rec := m.attempt(ctx, lease.Lost())
	cancel()
	<-done
	m.end(ctx, rec)
	m.log.Info("run finished", zap.String("result", rec.Result), zap.Int("exit_code", rec.ExitCode),
		zap.Duration("duration", rec.End.Sub(rec.Start)))
	return exitCode(rec, m.sig), nil
}

// claim takes the lease for a manual run. A held lease is an error naming
// the node that holds it.
func (m *manualRun) claim(ctx context.Context) error {
	cctx, cancel := m.s.call(ctx)
	defer cancel()
	c, err := m.s.backend.Claim(cctx, redislock.ClaimRequest{Job: m.job.Name, Owner: m.owner,
		TTL: m.job.LockTTL, Lease: true})
	if err != nil {
		// The outcome is unknown: drop a lease the claim may have set.
		m.release(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("job %s: interrupted before it started; not started", m.job.Name)
		}
		return m.s.redisHint(err)
	}
	switch c.Outcome {
	case redislock.Claimed:
		m.fence = c.Fence
		m.log = m.log.With(zap.Int64("fence", c.Fence))
		return nil
	case redislock.Overlap:
		return fmt.Errorf("job %s is running on %s (lease held); not started", m.job.Name, m.holder(ctx))
	}
	return fmt.Errorf("job %s: unexpected claim outcome %v; not started", m.job.Name, c.Outcome)
}

// holder names the node holding the job's lease, or "another node".
func (m *manualRun) holder(ctx context.Context) string {
	cctx, cancel := m.s.call(ctx)
	defer cancel()
	st, err := m.s.backend.State(cctx, m.job.Name)
	if err != nil || st.LeaseHolder == "" {
		return "another node"
	}
	return ownerNode(st.LeaseHolder)
}

// attempt starts the command and waits for it, terminating its process
// group on timeout, lease loss (on_lock_lost: kill) or ctx cancellation
// (SPEC.md §5). It blocks until the process group is gone.
func (m *manualRun) attempt(ctx context.Context, lost <-chan actors.LeaseLost) redislock.RunRecord {
	rec := redislock.RunRecord{RunID: m.id, Node: m.s.cfg.Node.ID, Attempts: 1, Fence: m.fence}
	p, err := process.Start(process.Spec{Shell: m.job.Shell, Command: m.job.Command, Dir: m.job.WorkDir,
		Env: m.env(), User: m.job.User, KillGrace: m.job.KillGrace, Log: m.log})
	if err != nil {
		m.log.Error("run could not start", zap.Error(err))
		rec.Start, rec.End, rec.Result, rec.ExitCode = time.Now(), time.Now(), actors.ResultError, -1
		return rec
	}
	m.log.Info("run started", zap.Int("pid", p.Pid()))
	var timeout <-chan time.Time
	if m.job.Timeout > 0 {
		t := time.NewTimer(m.job.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	stop, result := ctx.Done(), ""
	for {
		select {
		case <-p.Done():
			return m.finish(rec, p.Wait(), result)
		case <-timeout:
			timeout, result = nil, actors.ResultTimeout
			m.log.Warn("run timed out; terminating its process group", zap.Duration("timeout", m.job.Timeout))
			p.Terminate(m.job.KillGrace)
		case l := <-lost:
			lost = nil
			if m.job.OnLockLost == config.LockLostKill {
				result = actors.ResultLockLost
				m.log.Error("lease lost; terminating the run", zap.Error(l.Err))
				p.Terminate(min(m.job.KillGrace, l.Grace))
			} else {
				m.log.Error("lease lost; on_lock_lost is continue, the run goes on", zap.Error(l.Err))
			}
		case <-stop:
			stop = nil
			if result == "" {
				result = actors.ResultFailure
			}
			m.log.Warn("interrupted; terminating the run's process group", zap.Duration("kill_grace", m.job.KillGrace))
			p.Terminate(m.job.KillGrace)
		}
	}
}

// finish fills rec from the process result; result, if set, wins.
func (m *manualRun) finish(rec redislock.RunRecord, res process.Result, result string) redislock.RunRecord {
	switch {
	case result != "":
	case res.Err != nil:
		m.log.Warn("run ended with an error", zap.Error(res.Err))
		result = actors.ResultError
	case res.ExitCode == 0:
		result = actors.ResultSuccess
	default:
		result = actors.ResultFailure
	}
	rec.Start, rec.End, rec.Result, rec.ExitCode = res.Started, res.Finished, result, res.ExitCode
	m.sig = res.Signal
	tail := res.Tail
	if len(tail) > redislock.MaxOutputTail {
		tail = tail[len(tail)-redislock.MaxOutputTail:]
	}
	rec.OutputTail = string(tail)
	return rec
}

// exitCode is the process exit code for a finished manual run: the
// command's exit code (128+N when killed by signal N, as shells report it),
// 1 when it could not start or ended with exit code 0 but not as success.
func exitCode(rec redislock.RunRecord, sig syscall.Signal) int {
	switch {
	case sig != 0:
		return 128 + int(sig)
	case rec.ExitCode > 0:
		return rec.ExitCode
	case rec.Result != actors.ResultSuccess:
		return 1
	}
	return 0
}

// release deletes the lease if it is still ours, on a fresh context
// (STYLE.md 7: never the cancelled run context).
func (m *manualRun) release(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opsCallTimeout)
	defer cancel()
	if _, err := m.s.backend.Release(rctx, m.job.Name, m.owner); err != nil {
		m.log.Warn("lease release failed; it expires after lock_ttl", zap.Duration("lock_ttl", m.job.LockTTL), zap.Error(err))
	}
}

// end releases the lease and appends the run to the job's history in
// one round trip, on a fresh context (STYLE.md 7).
func (m *manualRun) end(ctx context.Context, rec redislock.RunRecord) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opsCallTimeout)
	defer cancel()
	if _, err := m.s.backend.Finish(rctx, m.job.Name, m.owner, rec); err != nil {
		m.log.Warn("lease release and history record failed; the lease expires after lock_ttl",
			zap.Duration("lock_ttl", m.job.LockTTL), zap.Error(err))
	}
}

// env is the child's environment as for scheduled runs (SPEC.md §5), with
// an empty CRONLOCK_SCHEDULED_TIME: a manual run has no slot.
func (m *manualRun) env() []string {
	env := make([]string, 0, len(m.environ)+len(m.job.Env)+6)
	env = append(env, m.environ...)
	for k, v := range m.job.Env {
		env = append(env, k+"="+v)
	}
	return append(env, "CRONLOCK_JOB="+m.job.Name, "CRONLOCK_NODE_ID="+m.s.cfg.Node.ID,
		"CRONLOCK_RUN_ID="+m.id, "CRONLOCK_SCHEDULED_TIME=",
		"CRONLOCK_FENCING_TOKEN="+strconv.FormatInt(m.fence, 10), "CRONLOCK_ATTEMPT=1")
}

// manualLogger logs cronlock's own lines to errw in console format at
// log.level, and copies the command's output lines ("job output" entries)
// verbatim to out (stdout lines) or errw (stderr lines).
func manualLogger(lc config.Log, out, errw zapcore.WriteSyncer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(lc.Level)
	if err != nil {
		return nil, err
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	console := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), errw, level)
	return zap.New(&outputCore{Core: console, out: out, errw: errw}), nil
}

// outputCore passes "job output" entries (from process.Spec.Log) through as
// raw lines and everything else to the embedded console core.
type outputCore struct {
	zapcore.Core
	out, errw zapcore.WriteSyncer
}

// With keeps the pass-through for loggers derived with fields.
func (c *outputCore) With(fields []zapcore.Field) zapcore.Core {
	return &outputCore{Core: c.Core.With(fields), out: c.out, errw: c.errw}
}

// Check routes job output to Write and the rest to the console core.
func (c *outputCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == "job output" {
		return ce.AddCore(e, c)
	}
	return c.Core.Check(e, ce)
}

// Write writes one output line (fields stream, line, partial).
func (c *outputCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if e.Message != "job output" {
		return c.Core.Write(e, fields)
	}
	w, line, nl := c.out, "", "\n"
	for _, f := range fields {
		switch f.Key {
		case "stream":
			if f.String == "stderr" {
				w = c.errw
			}
		case "line":
			line = f.String
		case "partial":
			nl = ""
		}
	}
	_, err := w.Write([]byte(line + nl))
	return err
}
