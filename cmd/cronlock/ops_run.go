package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/engine"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// runUsage is the usage line of `cronlock run`, with the rules an operator
// needs to know.
const runUsage = `[-config FILE] [-force] [-local] [-wait] [-timeout 30s] [-reason TEXT] JOB

Asks the cluster to run JOB now: a run request goes to Redis and exactly
one live daemon that has the job (configured and enabled, and its
node.tags matching the job's nodes:) takes it and
runs it exactly like a scheduled run: through the cluster lease (but no
slot: the schedule is unaffected), as the job's user in its work_dir with
its env, with its retries and on_success / on_failure hooks (they see
CRONLOCK_TRIGGER=manual), and a history record with trigger manual and
the requester (user@host). A request is never run twice. If no daemon
takes it within -timeout (default 30s, at most 10m) it is withdrawn and
the command fails (exit 1). With -wait (the default when stdout is a
terminal) the command follows the run and exits with its exit code,
printing the end of its output; otherwise it exits 0 once a daemon took
the request. Interrupting a wait leaves the run going on the cluster.

With the memory backend the daemon started with the config file runs it
(reached on its control socket, as its user or root), the same way; when
no daemon runs with the file the command runs JOB here, as with -local.

-local runs JOB in this process instead (as when no live daemon has the
job): the same run path, the command's output
copied to this terminal, the exit code the command's (128+N when killed
by signal N; 1 when it could not start); SIGINT/SIGTERM terminates it and
releases the lease. With the memory backend the run is local to this
machine: while no daemon runs it uses the node's state file
(node.state_dir), so its fencing token follows the daemon's; while the
daemon runs it is not consulted, and a warning says so.

A paused or disabled job is refused (exit 1) unless -force is given, and
so is a run here of a job whose nodes: does not match this host's
node.tags. If
the lease is held (the job is running on some node) nothing starts and
the exit code is 1.`

// runFlags are the flags of `cronlock run`.
type runFlags struct {
	force, local, wait bool
	timeout            time.Duration
	reason             string
}

// runManual implements `cronlock run`: it parses flags, opens the backend
// and either asks the cluster (runOnCluster) or hands the run to
// engine.RunJob in this process.
func runManual(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("run", runUsage, env)
	var rf runFlags
	f.fs.BoolVar(&rf.force, "force", false, "run even if the job is paused or disabled, or (run here) its nodes: does not match this host's node.tags")
	f.fs.BoolVar(&rf.local, "local", false, "run the job in this process, not on a daemon of the cluster")
	f.fs.BoolVar(&rf.wait, "wait", isTerminal(env.stdout), "follow the run on the cluster and exit with its exit code (default: when stdout is a terminal)")
	f.fs.DurationVar(&rf.timeout, "timeout", 30*time.Second, "fail when no daemon takes the request within this long (at most 10m)")
	f.fs.StringVar(&rf.reason, "reason", "", "why the run is requested (in the job's event stream)")
	if code := f.parse(args); code >= 0 {
		return code
	}
	if code := f.oneJob(); code >= 0 {
		return code
	}
	if err := api.CheckText("-reason", rf.reason); err != nil {
		return opsFail(env, "run", 2, err)
	}
	if rf.timeout <= 0 || rf.timeout > api.MaxRunTimeout {
		return opsFail(env, "run", 2, fmt.Errorf("-timeout %v: want more than 0 and at most %v", rf.timeout, api.MaxRunTimeout))
	}
	// Output and log lines come from several goroutines: serialise writes.
	out := zapcore.Lock(zapcore.AddSync(env.stdout))
	errw := zapcore.Lock(zapcore.AddSync(env.stderr))
	env = &runEnv{environ: env.environ, stdout: out, stderr: errw}
	use := memoryDaemon
	if rf.local {
		use = memoryLocal
	}
	s, code, err := openOps("run", f.config, use, env)
	if s == nil {
		return opsFail(env, "run", code, err)
	}
	defer s.close()
	job, err := s.job(f.args[0])
	if err != nil {
		return opsFail(env, "run", 1, err)
	}
	if s.kind == "redis" && !rf.local {
		if code, asked := s.runOnCluster(ctx, env, *job, rf); asked {
			return code
		}
	}
	if s.daemon != nil {
		if code, asked := s.runOnDaemon(ctx, env, *job, rf); asked {
			return code
		}
		// No daemon runs with the file: run here, on its state file.
		m, dir, note, err := openManualMemory(s.cfg)
		if err != nil {
			return opsFail(env, "run", 1, err)
		}
		s.daemon, s.backend, s.state, s.note = nil, m, dir, note
	}
	if !rf.force && !cluster.Matches(job.Nodes, s.cfg.Node.Tags) {
		return opsFail(env, "run", 1, fmt.Errorf("job %q runs only on nodes whose node.tags have %s, and this host's are %v: "+
			"run it on such a node, or give -force", job.Name, strings.Join(job.Nodes, ", "), s.cfg.Node.Tags))
	}
	log, err := manualLogger(s.cfg.Log, out, errw)
	if err != nil {
		return opsFail(env, "run", 1, fmt.Errorf("log: %w", err))
	}
	if s.note != "" {
		log.Warn(s.note)
	}
	ran := engine.RunJob(ctx, s.cfg, *job, engine.ManualOptions{Log: log, Environ: env.environ,
		Locker: s.backend, Force: rf.force, Requester: requester(env)})
	if ran.Skip != "" {
		return opsFail(env, "run", 1, s.refusal(ctx, job.Name, ran))
	}
	return exitCode(ran.Finished)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// refusal explains why a manual run did not start, with the fix.
func (s *opsSession) refusal(ctx context.Context, job string, ran actors.Ran) error {
	switch ran.Skip {
	case ledger.SkipPaused:
		return fmt.Errorf("job %s is paused; not started (cronlock resume %s, or -force to run it anyway)", job, job)
	case ledger.SkipDisabled:
		return fmt.Errorf("job %s is disabled (enabled: false); not started (-force runs it anyway)", job)
	case ledger.SkipOverlap:
		return fmt.Errorf("job %s is running on %s (lease held); not started", job, s.holder(ctx, job))
	case ledger.SkipShuttingDown:
		return fmt.Errorf("job %s: interrupted before it started; not started", job)
	case ledger.SkipRedisError:
		return s.redisHint(ran.Err)
	}
	if ran.Err != nil && ran.Err.Error() != "" {
		return fmt.Errorf("job %s: not started (%s: %v)", job, ran.Skip, ran.Err)
	}
	return fmt.Errorf("job %s: not started (%s)", job, ran.Skip)
}

// holder names the node holding the job's lease, or "another node".
func (s *opsSession) holder(ctx context.Context, job string) string {
	cctx, cancel := s.call(ctx)
	defer cancel()
	if s.daemon != nil {
		if rows, err := s.daemon.jobs(cctx, []string{job}); err == nil && len(rows) == 1 && rows[0].LeaseHolder != "" {
			return ownerNode(rows[0].LeaseHolder)
		}
		return "another node"
	}
	st, err := s.backend.State(cctx, job)
	if err != nil || st.LeaseHolder == "" {
		return "another node"
	}
	return ownerNode(st.LeaseHolder)
}

// exitCode is the process exit code for a finished manual run: the
// command's exit code (128+N when killed by signal N, as shells report it),
// 1 when it could not start or ended with exit code 0 but not as success.
func exitCode(fin actors.RunFinished) int {
	switch {
	case fin.Signal != 0:
		return 128 + int(fin.Signal)
	case fin.ExitCode > 0:
		return fin.ExitCode
	case fin.Result != ledger.ResultSuccess:
		return 1
	}
	return 0
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
