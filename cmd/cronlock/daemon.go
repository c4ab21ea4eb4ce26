package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/engine"
	"github.com/cronlock/cronlock/statedir"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"
)

// daemonOptions is what the daemon mode gets besides the config.
type daemonOptions struct {
	Environ []string
	Stdout  io.Writer
	Stderr  io.Writer
	Version string
	// Reload loads the config file again (SIGHUP).
	Reload func() (*config.Config, error)
	// Signals delivers SIGTERM, SIGINT and SIGHUP (from main).
	Signals <-chan os.Signal
	// OwnProcess: the daemon is the process's only program (main), so it
	// sets the process-wide runtime settings (daemonProcs).
	OwnProcess bool
}

// procsPerP is how many of the CPUs the Go runtime would use (GOMAXPROCS'
// default: the machine's, or the cgroup's CPU limit, read once at the
// start: setting GOMAXPROCS stops the runtime from following later changes
// of the limit) the daemon gives one P, at least one: GOMAXPROCS is 1 up
// to 7 CPUs, 2 on 8, 16 on 64.
//
// The daemon waits on Redis, timers and its children nearly all the time,
// and a run is a chain of goroutine hand-offs (fire, claim, the Redis
// client's writer and reader, fork, output readers, exit, finish). With
// one P the runtime runs a woken goroutine on the thread that woke it
// instead of waking an idle thread (futex wake-ups, threads spinning for
// work). Measured by make bench on a 2-core machine (README.md
// "Performance", "Fewer Ps"): one invocation with the build before this
// change as the baseline gave 0.64× its CPU per run at 3 nodes × 50 jobs
// a second and 0.78× at × 200, start latency unchanged.
//
// What fewer Ps cost. Each fork holds its P until the child has exec'd
// (vfork), so the forks of one instant run one at a time per P (more CPUs
// get more Ps for a herd's forks), and a child that hangs before its exec
// (the chdir to a work_dir on a hung network file system) holds the only
// P: the whole daemon stops until it returns (the systemd watchdog then
// restarts it). CPU-bound work delays the ticker and the runs' goroutines
// by up to the scheduler's 10 ms time slice: a reload of a 10,000-job
// config every 200 ms gave a fire delay p50 of 4.6–6.5 ms against 0.8 ms
// with two Ps; a /metrics scrape or an API listing of thousands of jobs
// does the same for a moment. The children themselves are not limited.
const procsPerP = 4

// setProcs sets GOMAXPROCS to the default CPUs / procsPerP (at least 1)
// unless the environment sets GOMAXPROCS to a number ≥ 1 (which the
// runtime has applied; it ignores any other value) or the daemon runs
// inside another program (own false: tests). It returns the GOMAXPROCS in
// effect and where it came from, for the start-up line.
func setProcs(environ []string, own bool) (int, string) {
	if v, ok := envValue(environ, "GOMAXPROCS"); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 {
			return runtime.GOMAXPROCS(0), "environment"
		}
	}
	if !own {
		return runtime.GOMAXPROCS(0), "go runtime (daemon inside another program)"
	}
	n := max(1, runtime.GOMAXPROCS(0)/procsPerP)
	runtime.GOMAXPROCS(n)
	return n, "default (a quarter of the CPUs, at least 1)"
}

// clockOffsetEnv is an internal, test-only knob: a Go duration added to the
// daemon's clock so that tests can run nodes with skewed clocks. It is not
// a config key and not documented for users.
const clockOffsetEnv = "CRONLOCK_INTERNAL_CLOCK_OFFSET"

// runDaemon runs the daemon on a loaded (ForStart) config until a shutdown
// signal or ctx ends, and returns the exit code: 0 after a clean shutdown,
// 1 when the engine could not start or an actor failed.
func runDaemon(ctx context.Context, cfg *config.Config, opts daemonOptions) int {
	log, err := newLogger(cfg.Log, opts.Stderr)
	if err != nil {
		fmt.Fprintf(opts.Stderr, "cronlock: log: %v\n", err)
		return 1
	}
	defer func() { _ = log.Sync() }()
	now, err := clock(opts.Environ)
	if err != nil {
		fmt.Fprintf(opts.Stderr, "cronlock: %v\n", err)
		return 1
	}
	for _, w := range cfg.Warnings {
		log.Warn("config warning", zap.String("problem", w.String()))
	}
	procs, procsFrom := setProcs(opts.Environ, opts.OwnProcess)
	log.Info("cronlock starting", zap.String("version", opts.Version), zap.String("config", cfg.Path),
		zap.Int("gomaxprocs", procs), zap.String("gomaxprocs_source", procsFrom))
	state, err := statedir.Open(cfg.Node.StateDir)
	if err != nil {
		log.Error("cannot start", zap.Error(err))
		return 1
	}
	defer state.Close()
	if err := keepNodeID(log, &cfg.Node, state); err != nil {
		log.Error("cannot start", zap.Error(err))
		return 1
	}
	e, err := engine.New(cfg, engine.Options{Log: log, Environ: opts.Environ, Signals: opts.Signals,
		Notify: sdNotify(log), Reload: opts.Reload, Now: now, State: state, Registry: newRegistry(currentBuild()),
		Version: opts.Version, PreciseWake: true,
		ExitNow: func() { _ = log.Sync(); os.Exit(1) }})
	if err != nil {
		log.Error("cannot start", zap.Error(err))
		return 1
	}
	if err := e.Run(ctx); err != nil {
		log.Error("daemon stopped with an error", zap.Error(err))
		return 1
	}
	return 0
}

// keepNodeID writes a newly made default node id to the state directory
// (config.KeepNodeID), so that every later start and reload uses it, and
// logs the node id and where it came from.
func keepNodeID(log *zap.Logger, n *config.Node, state *statedir.Dir) error {
	made := n.IDSource == config.IDNew
	if err := config.KeepNodeID(n, state.WriteFile); err != nil {
		return err
	}
	msg := "node id"
	if made {
		msg = "node id made and kept in the state directory (there is no /etc/machine-id)"
	}
	log.Info(msg, zap.String("node_id", n.ID), zap.String("node_id_source", n.IDSource), zap.String("origin", n.IDOrigin()))
	return nil
}

// sdNotify sends sd_notify states. It never unsets NOTIFY_SOCKET: later
// states (STATUS=, WATCHDOG=1, STOPPING=1) need it.
func sdNotify(log *zap.Logger) func(string) {
	return func(state string) {
		if _, err := daemon.SdNotify(false, state); err != nil {
			log.Warn("sd_notify failed", zap.String("state", state), zap.Error(err))
		}
	}
}

// clock is the daemon's wall clock: time.Now, shifted by clockOffsetEnv
// when that is set.
func clock(environ []string) (func() time.Time, error) {
	if v, ok := envValue(environ, clockOffsetEnv); ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", clockOffsetEnv, err)
		}
		return func() time.Time { return time.Now().Add(d) }, nil
	}
	return time.Now, nil
}

// envValue is the value of the first name=value in environ, as
// os.LookupEnv is for the process's environment.
func envValue(environ []string, name string) (string, bool) {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// newLogger builds the zap logger of log.level/log.format: console on a
// terminal and json otherwise when format is empty; sampling off so no job
// output line is dropped (zap's production config samples by default).
func newLogger(lc config.Log, w io.Writer) (*zap.Logger, error) {
	f, ok := w.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	format := lc.Format
	if format == "" {
		format = "json"
		if tty {
			format = "console"
		}
	}
	level, err := zapcore.ParseLevel(lc.Level)
	if err != nil {
		return nil, err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	if format == "console" {
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		if tty {
			enc.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		encoder = zapcore.NewConsoleEncoder(enc)
	} else {
		encoder = zapcore.NewJSONEncoder(enc)
	}
	core := zapcore.NewCore(encoder, zapcore.Lock(zapcore.AddSync(w)), level)
	return zap.New(core, zap.AddCaller()), nil
}
