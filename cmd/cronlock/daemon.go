package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/cronlock/cronlock/actors"
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
}

// clockOffsetEnv is an internal, test-only knob: a Go duration added to the
// daemon's clock so that tests can run nodes with skewed clocks. It is not
// a config key and not documented for users.
const clockOffsetEnv = "CRONLOCK_INTERNAL_CLOCK_OFFSET"

// blockRecordsEnv is an internal, test-only knob: the path of a file
// whose existence blocks every run-record write (a frozen state directory,
// docs/protocol.md R3). Not a config key and not documented for users.
const blockRecordsEnv = "CRONLOCK_INTERNAL_BLOCK_RUN_RECORDS"

// blockingRecords blocks each write while the file path exists.
type blockingRecords struct {
	actors.RunRecords
	path string
}

func (b blockingRecords) wait() {
	for {
		if _, err := os.Stat(b.path); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (b blockingRecords) Put(r statedir.Record) error { b.wait(); return b.RunRecords.Put(r) }
func (b blockingRecords) Replace(old int, r statedir.Record) error {
	b.wait()
	return b.RunRecords.Replace(old, r)
}
func (b blockingRecords) Remove(id string, attempt int) error {
	b.wait()
	return b.RunRecords.Remove(id, attempt)
}

// wrapRecords is the engine's WrapRecords for blockRecordsEnv (nil = none).
func wrapRecords(environ []string) func(actors.RunRecords) actors.RunRecords {
	path, ok := envValue(environ, blockRecordsEnv)
	if !ok || path == "" {
		return nil
	}
	return func(r actors.RunRecords) actors.RunRecords { return blockingRecords{r, path} }
}

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
	log.Info("cronlock starting", zap.String("version", opts.Version), zap.String("config", cfg.Path),
		zap.Int("gomaxprocs", runtime.GOMAXPROCS(0)))
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
		Notify: sdNotify(log), Reload: opts.Reload, Now: now, State: state, Registry: newMetricsRegistry(currentBuild()),
		Version: opts.Version, WrapRecords: wrapRecords(opts.Environ),
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
