// Command cronlock is the cronlock daemon and its command-line tools (see
// README.md). All flags use the standard flag package, so the seed's
// `-config x`, `--config x` and `-config=x` forms all work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/process"
	"github.com/google/uuid"
)

// defaultConfig is -config's default.
const defaultConfig = "cronlock.yaml"

// Set at link time: go build -ldflags "-X main.version=v1.2.3 -X main.commit=abc1234".
var (
	version string
	commit  string
)

// main is the program's only subscriber to signals: the daemon receives
// them on a channel (shutdown, second signal, reload), the other commands
// as the cancellation of their context.
func main() {
	// Every child of this program is started by process.Start, so its
	// reaper may wait for all of them: as a child subreaper it also reaps
	// the orphans of runs, which makes the daemon a correct PID 1 in a
	// container. Kept until exit.
	if _, err := process.AdoptOrphans(); err != nil {
		fmt.Fprintf(os.Stderr, "cronlock: warning: %v; orphans of runs go to init\n", err)
	}
	// Run ids (a random UUID per run) are cut from a buffer of random bytes
	// read from crypto/rand 16 UUIDs at a time, not read one by one;
	// called before any UUID is made, as the package requires.
	uuid.EnableRandPool()
	raw := make(chan os.Signal, 4)
	signal.Notify(raw, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	sigs := make(chan os.Signal)
	go relaySignals(raw, sigs)
	code := runIn(context.Background(), &runEnv{environ: os.Environ(), stdout: os.Stdout, stderr: os.Stderr, signals: sigs}, os.Args[1:])
	signal.Stop(raw)
	os.Exit(code)
}

// relaySignals passes the signals from in to out, reading in at once:
// os/signal drops a signal when its channel is full (signal.Notify: "the
// caller must ensure that c has sufficient buffer space"), and the daemon
// reads one signal at a time, reloading on SIGHUP (50–150 ms for thousands
// of jobs): a SIGHUP storm filled the channel and a SIGTERM after it was
// lost, the daemon running on. Here a SIGTERM or SIGINT is never dropped
// (at most 2 wait: the daemon acts on the first and the second), and a
// SIGHUP that comes while one waits is merged into it (the reload reads
// the file as it is when it runs). Signals go out in the order they came.
// It returns when in is closed.
func relaySignals(in <-chan os.Signal, out chan<- os.Signal) {
	var queue []os.Signal
	for {
		var send chan<- os.Signal
		var next os.Signal
		if len(queue) > 0 {
			send, next = out, queue[0]
		}
		select {
		case sig, ok := <-in:
			if !ok {
				return
			}
			hup, waiting := sig == syscall.SIGHUP, 0 // waiting: of its kind, SIGHUP or not
			for _, q := range queue {
				if (q == syscall.SIGHUP) == hup {
					waiting++
				}
			}
			if hup && waiting > 0 || waiting >= 2 {
				continue
			}
			queue = append(queue, sig)
		case send <- next:
			queue = queue[1:]
		}
	}
}

// subcommand runs one `cronlock NAME …` form; args exclude NAME. It returns
// the exit code.
type subcommand func(ctx context.Context, args []string, env *runEnv) int

// subcommands maps names to their implementation. Adding a subcommand is
// one entry here.
func subcommands() map[string]subcommand {
	return map[string]subcommand{
		"next":       runNext,
		"status":     runStatus,
		"history":    runHistory,
		"logs":       runLogs,
		"nodes":      runNodes,
		"run":        runManual,
		"backfill":   runBackfill,
		"pause":      runPause,
		"resume":     runResume,
		"notify":     runNotify,
		"completion": runCompletion,
		"help":       runHelp,
	}
}

// runEnv is what run hands to every mode: the process environment, output
// streams and signals (no globals).
type runEnv struct {
	environ        []string
	stdout, stderr io.Writer
	signals        <-chan os.Signal // nil: no signals (tests)
	// now is the reference time of -validate's DST warnings; nil means
	// time.Now (tests fix it so that the warnings do not depend on today).
	now func() time.Time
}

// clockNow returns e.now(), or time.Now() when e.now is nil.
func (e *runEnv) clockNow() time.Time {
	if e.now == nil {
		return time.Now()
	}
	return e.now()
}

// machineIDFile holds the machine id (machine-id(5)), the seed of the
// default node.id.
const machineIDFile = "/etc/machine-id"

// loadOptions returns config options for purpose, from the process. A
// missing or unreadable machine id leaves MachineID empty (config then
// uses the node-id file of the state directory).
func (e *runEnv) loadOptions(purpose config.Purpose, flags map[string]string) config.Options {
	host, _ := os.Hostname()
	mid, _ := os.ReadFile(machineIDFile)
	return config.Options{Environ: e.environ, Flags: flags, Purpose: purpose, Euid: os.Geteuid(), Hostname: host,
		MachineID: string(mid)}
}

// run is the whole program: args are the command-line arguments without the
// program name, environ the KEY=VALUE environment, sigs the process's
// SIGTERM/SIGINT/SIGHUP (nil: none). It returns the exit code (0 success,
// 1 failure, 2 usage error).
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	return runIn(ctx, &runEnv{environ: environ, stdout: stdout, stderr: stderr, signals: sigs}, args)
}

// runIn is run with its environment made.
func runIn(ctx context.Context, env *runEnv, args []string) int {
	stderr := env.stderr
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, ok := subcommands()[args[0]]
		if !ok {
			unknownCommand(stderr, args[0])
			return 2
		}
		ctx, stop := cancelOnSignal(ctx, env.signals)
		defer stop()
		return sub(ctx, args[1:], env)
	}
	return runMain(ctx, args, env)
}

// cancelOnSignal returns a context cancelled by the first SIGTERM or SIGINT
// on sigs (SIGHUP is ignored). stop ends the watch and waits for it.
func cancelOnSignal(ctx context.Context, sigs <-chan os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	if sigs == nil {
		return ctx, cancel
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-sigs:
				if sig != syscall.SIGHUP {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, func() { cancel(); <-done }
}

// mainFlags are the daemon form's flags.
type mainFlags struct {
	fs                                    *flag.FlagSet
	path                                  *string
	validate, strict, showVersion, asJSON *bool
	allNotices                            *bool
}

// newMainFlags returns the daemon form's flag set, printing to w. Its
// Usage is silent: runMain prints the overview for -h and a hint for an
// error (the flag package has printed the error itself).
func newMainFlags(w io.Writer) *mainFlags {
	fs := flag.NewFlagSet("cronlock", flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {}
	f := &mainFlags{fs: fs}
	f.path = fs.String("config", defaultConfig, "path to the configuration file (.yaml, .yml, .toml or .json)")
	f.validate = fs.Bool("validate", false, "validate the configuration and exit (0 valid, 1 invalid)")
	f.strict = fs.Bool("strict", false, "with -validate: warnings fail validation too (exit 1)")
	f.allNotices = fs.Bool("all-notices", false, fmt.Sprintf("with -validate: list every DST notice (more than %d are summarised by zone and transition)", dstListMax))
	f.showVersion = fs.Bool("version", false, "print the version and exit")
	f.asJSON = fs.Bool("json", false, "with -version: print {\"version\", \"commit\", \"go_version\"} as JSON;\n"+
		"with -validate: print {\"valid\", \"config\", \"problems\"} as JSON on stdout, also when invalid")
	fs.String("log-level", "", "log level: debug, info, warn or error (overrides log.level)")
	fs.String("log-format", "", "log format: json or console (overrides log.format)")
	return f
}

// runMain handles the daemon form: cronlock [-config FILE]
// [-validate [-strict] [-json]] [-version [-json]] [-log-level L]
// [-log-format F].
func runMain(ctx context.Context, args []string, env *runEnv) int {
	mf := newMainFlags(env.stderr)
	fs, path, validate := mf.fs, mf.path, mf.validate
	// Flags may follow a positional argument (cronlock -validate FILE
	// -strict): parse what is left after each one.
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printOverview(env.stdout, func(w io.Writer) { newMainFlags(w).fs.PrintDefaults() })
				return 0
			}
			fmt.Fprintln(env.stderr, "Run 'cronlock -h' for the flags and commands.")
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if code := mainArgs(mf, rest, env); code >= 0 {
		return code
	}
	if *mf.asJSON && !*mf.showVersion && !*validate {
		fmt.Fprintln(env.stderr, "cronlock: -json goes with -version or -validate (e.g. cronlock -validate -json)")
		return 2
	}
	if *mf.strict && !*validate {
		fmt.Fprintln(env.stderr, "cronlock: -strict goes with -validate (e.g. cronlock -validate -strict)")
		return 2
	}
	if *mf.allNotices && !*validate {
		fmt.Fprintln(env.stderr, "cronlock: -all-notices goes with -validate (e.g. cronlock -validate -all-notices -config FILE)")
		return 2
	}
	if *mf.showVersion {
		return printVersion(env.stdout, *mf.asJSON)
	}
	flags := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "log-level":
			flags["log.level"] = f.Value.String()
		case "log-format":
			flags["log.format"] = f.Value.String()
		}
	})
	if *validate {
		return runValidate(*path, flags, validateMode{strict: *mf.strict, asJSON: *mf.asJSON, allNotices: *mf.allNotices}, env)
	}
	cfg, code := loadConfig(*path, config.ForStart, flags, env)
	if cfg == nil {
		return code
	}
	reload := func() (*config.Config, error) { return config.Load(*path, env.loadOptions(config.ForStart, flags)) }
	return runDaemon(ctx, cfg, daemonOptions{Environ: env.environ, Stdout: env.stdout, Stderr: env.stderr,
		Version: versionString(currentBuild().Version, currentBuild().Commit), Reload: reload, Signals: env.signals})
}

// mainArgs handles the daemon form's positional arguments: -validate FILE
// is -validate -config FILE (sets mf.path); anything else is a usage error
// that says where the file goes. It returns the exit code when the command
// must stop, else -1.
func mainArgs(mf *mainFlags, rest []string, env *runEnv) int {
	if len(rest) == 0 {
		return -1
	}
	configSet := false
	mf.fs.Visit(func(f *flag.Flag) { configSet = configSet || f.Name == "config" })
	switch {
	case *mf.validate && len(rest) == 1 && !configSet:
		*mf.path = rest[0]
		return -1
	case *mf.validate && configSet:
		fmt.Fprintf(env.stderr, "cronlock: unexpected argument %q: -config already names the file to validate "+
			"(cronlock -validate -config FILE, or cronlock -validate FILE)\n", rest[0])
	case *mf.validate:
		fmt.Fprintf(env.stderr, "cronlock: %d arguments %q: -validate checks one file (cronlock -validate -config FILE)\n",
			len(rest), rest)
	default:
		fmt.Fprintf(env.stderr, "cronlock: unexpected argument %q: give the config file with -config "+
			"(cronlock -config FILE to run the daemon, cronlock -validate -config FILE to check it)\n", rest[0])
	}
	return 2
}

// usageExit maps a flag parse error to an exit code: 0 for -h, else 2 (the
// flag package has already printed the error and usage).
func usageExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// versionString renders the seed's version text: "cronlock v1.2.3 (abc1234)"
// for a tagged build, "cronlock abc1234" otherwise.
func versionString(version, commit string) string {
	switch {
	case version != "" && commit != "":
		return fmt.Sprintf("cronlock %s (%s)", version, commit)
	case version != "":
		return "cronlock " + version
	case commit != "":
		return "cronlock " + commit
	}
	return "cronlock (development build)"
}
