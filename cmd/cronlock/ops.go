package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/cronlock/cronlock/ledger/memory"
	"io"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/engine"
	"github.com/cronlock/cronlock/redislock"
	"github.com/cronlock/cronlock/statedir"
)

// opsCallTimeout bounds every backend call of the operator commands
// (status, history, run, pause, resume): rueidis retries forever without a
// deadline.
const opsCallTimeout = 5 * time.Second

// opsBackend is what the operator commands need from a lock backend.
// Implemented by *redislock.Redis and *memory.Memory.
type opsBackend interface {
	Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error)
	Renew(ctx context.Context, job, owner string, ttl time.Duration) (int64, error)
	Release(ctx context.Context, job, owner string) (bool, error)
	Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error)
	History(ctx context.Context, job string, n int) ([]ledger.RunRecord, error)
	State(ctx context.Context, job string) (ledger.JobState, error)
	Occurrences(ctx context.Context, job string, from, to int64) ([]ledger.Occurrence, error)
	Audit(ctx context.Context, req ledger.AuditRequest) (ledger.Audited, error)
	Close()
}

var (
	_ opsBackend = (*redislock.Redis)(nil)
	_ opsBackend = (*memory.Memory)(nil)
)

// opsFlags are the flags shared by the operator commands; args are the
// positional arguments (job names), which may come before or after flags.
type opsFlags struct {
	fs     *flag.FlagSet
	config string
	args   []string
}

// newOpsFlags returns the flag set of `cronlock NAME` with -config. The
// caller adds its own flags before calling parse.
func newOpsFlags(name, usage string, env *runEnv) *opsFlags {
	f := &opsFlags{fs: flag.NewFlagSet("cronlock "+name, flag.ContinueOnError)}
	f.fs.SetOutput(env.stderr)
	f.fs.StringVar(&f.config, "config", defaultConfig, "configuration file")
	f.fs.Usage = func() {
		fmt.Fprintf(env.stderr, "usage: cronlock %s %s\n", name, usage)
		f.fs.PrintDefaults()
	}
	return f
}

// parse parses args, letting flags and positional arguments interleave. It
// returns a non-negative exit code when the command must stop (-h, or a
// usage error, already printed).
func (f *opsFlags) parse(args []string) int {
	for {
		if err := f.fs.Parse(args); err != nil {
			return usageExit(err)
		}
		if f.fs.NArg() == 0 {
			return -1
		}
		f.args = append(f.args, f.fs.Arg(0))
		args = f.fs.Args()[1:]
	}
}

// oneJob checks that exactly one JOB was given; otherwise it prints the
// usage and returns exit code 2.
func (f *opsFlags) oneJob() int {
	if len(f.args) != 1 {
		fmt.Fprintf(f.fs.Output(), "%s: want exactly one JOB, got %d argument(s)\n", f.fs.Name(), len(f.args))
		f.fs.Usage()
		return 2
	}
	return -1
}

// opsSession is a loaded config plus an open backend.
type opsSession struct {
	cfg     *config.Config
	backend opsBackend       // nil when daemon is set
	kind    string           // "redis" | "memory"
	state   *statedir.Dir    // the memory backend's state directory, when used
	note    string           // why the memory backend is not the daemon's, "" when it is
	redis   *redislock.Redis // the backend when kind is "redis"
	daemon  *daemonClient    // the running daemon, for memoryDaemon sessions on the memory backend
}

// memoryUse is how a command uses a config of the memory backend.
type memoryUse int

const (
	// memoryLocal: the command works on the backend itself, in this
	// process (run, backfill; openManualMemory).
	memoryLocal memoryUse = iota
	// memoryDaemon: the command reads or changes the running daemon's
	// state through its control socket (status, history, pause, resume,
	// nodes; daemonClient).
	memoryDaemon
)

// openOps loads path with -validate leniency (as `next` does), printing
// config problems itself (then it returns nil and code 1), and opens the
// configured backend; op names the command in errors. With the memory
// backend, memory says what the session uses: the daemon's control socket
// (nothing is contacted yet), or a backend openManualMemory chooses.
// Creating a Redis client does not contact Redis; the first call does.
func openOps(op, path string, memory memoryUse, env *runEnv) (*opsSession, int, error) {
	cfg, code := loadConfig(path, config.ForValidate, nil, env)
	if cfg == nil {
		return nil, code, nil
	}
	if cfg.Lock.Backend != "redis" {
		if memory == memoryDaemon {
			return &opsSession{cfg: cfg, kind: "memory", daemon: newDaemonClient(cfg)}, 0, nil
		}
		m, dir, note, err := openManualMemory(cfg)
		if err != nil {
			return nil, 1, err
		}
		return &opsSession{cfg: cfg, backend: m, kind: "memory", state: dir, note: note}, 0, nil
	}
	opts, err := engine.RedisOptions(cfg)
	if err != nil {
		return nil, 1, err
	}
	r, err := redislock.New(opts)
	if err != nil {
		return nil, 1, fmt.Errorf("redis client: %w", err)
	}
	return &opsSession{cfg: cfg, backend: r, kind: "redis", redis: r}, 0, nil
}

// job returns the configured job named name, or an error naming it and
// listing the known jobs.
func (s *opsSession) job(name string) (*config.Job, error) {
	all := make([]string, 0, len(s.cfg.Jobs))
	for i := range s.cfg.Jobs {
		if s.cfg.Jobs[i].Name == name {
			return &s.cfg.Jobs[i], nil
		}
		all = append(all, s.cfg.Jobs[i].Name)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("unknown job %q: %s defines no jobs", name, s.cfg.Path)
	}
	return nil, fmt.Errorf("unknown job %q in %s (jobs: %s)", name, s.cfg.Path, shortList(all))
}

// call returns a context for one backend call, bounded by opsCallTimeout.
func (s *opsSession) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, opsCallTimeout)
}

// close closes the backend's connections and the state directory.
func (s *opsSession) close() {
	if s.backend != nil {
		s.backend.Close()
	}
	if s.state != nil {
		s.state.Close()
	}
}

// redisHint names the Redis read in an error from a Redis call, with the
// usual causes of an error reaching it: an unreachable server or wrong
// credentials. Other errors (the daemon's, on the memory backend) are
// returned as they are.
func (s *opsSession) redisHint(err error) error {
	if s.kind != "redis" || err == nil {
		return err
	}
	if !fromReachingRedis(err) {
		return fmt.Errorf("%w (reading %s)", err, s.cfg.Redis.Where())
	}
	return fmt.Errorf("%w (reading %s: is it reachable, and are redis.username/password right?)", err, s.cfg.Redis.Where())
}

// header is the first line of a table: where the command read it, the
// Redis (addresses, db, key prefix) or the memory-backend daemon
// (cluster: its node list, when the command read it).
func (s *opsSession) header(cluster *api.Cluster) string {
	if s.daemon != nil {
		return s.daemon.describe(cluster)
	}
	return s.cfg.Redis.Where() + " (from " + s.cfg.Path + ")"
}

// jobStatus returns the status of jobs (the named ones, in order).
func (s *opsSession) jobStatus(ctx context.Context, jobs []config.Job, named bool) ([]api.JobStatus, error) {
	if s.daemon != nil {
		var names []string
		if named {
			for _, j := range jobs {
				names = append(names, j.Name)
			}
		}
		return s.daemon.jobs(ctx, names)
	}
	rows, err := api.Jobs(ctx, s.redis, jobs, time.Now())
	return rows, s.redisHint(err)
}

// runs returns job's last n runs, newest first (output tails when tail;
// always from a daemon).
func (s *opsSession) runs(ctx context.Context, job string, n int, tail bool) ([]*api.Run, error) {
	if s.daemon != nil {
		return s.daemon.runs(ctx, job, n)
	}
	rows, err := api.Runs(ctx, s.redis, job, n, tail)
	return rows, s.redisHint(err)
}

// occurrences returns job's ledger records that q selects, newest first.
func (s *opsSession) occurrences(ctx context.Context, job string, q api.OccurrenceQuery) ([]ledger.Occurrence, error) {
	if s.daemon != nil {
		return s.daemon.occurrences(ctx, job, q)
	}
	rows, err := api.Occurrences(ctx, s.redis, job, q)
	return rows, s.redisHint(err)
}

// events returns job's last n events, newest first.
func (s *opsSession) events(ctx context.Context, job string, n int) ([]api.Event, error) {
	if s.daemon != nil {
		return s.daemon.events(ctx, job, n)
	}
	rows, err := api.Events(ctx, s.redis, job, n, time.Now())
	return rows, s.redisHint(err)
}

// nodes returns the node list.
func (s *opsSession) nodes(ctx context.Context) (*api.Cluster, error) {
	if s.daemon != nil {
		return s.daemon.nodes(ctx)
	}
	v, err := api.Nodes(ctx, s.redis, time.Now())
	return v, s.redisHint(err)
}

// fromReachingRedis reports whether err may come from reaching Redis or
// logging in (a timeout, a network error, the connection closed, an error
// reply such as WRONGPASS or NOPERM), not from reading what it holds.
func fromReachingRedis(err error) bool {
	var ne net.Error
	_, isReply := redislock.ServerReply(err)
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || redislock.IsClosing(err) ||
		errors.As(err, &ne) || isReply
}

// runPause implements `cronlock pause [-config FILE] [-for D | -until
// RFC3339] [-note TEXT] JOB`: the job is paused cluster-wide (its slots
// are skipped with reason "paused") until resumed, or until its end. The
// pause records who (user@host), when, why and until, and the job's event
// stream gets a pause event. Errors print one line and return 1 (2 for
// usage).
func runPause(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("pause", "[-config FILE] [-for D | -until RFC3339] [-note TEXT] JOB", env)
	forD := f.fs.Duration("for", 0, "lift the pause by itself after this long, e.g. 2h")
	until := f.fs.String("until", "", "lift the pause by itself at this instant, RFC 3339, e.g. 2026-12-01T18:00:00Z")
	note := f.fs.String("note", "", "why the job is paused (shown by status and history -events)")
	if code := f.parse(args); code >= 0 {
		return code
	}
	if code := f.oneJob(); code >= 0 {
		return code
	}
	spec := api.PauseSpec{For: *forD, Note: *note}
	f.fs.Visit(func(fl *flag.Flag) { spec.ForSet = spec.ForSet || fl.Name == "for" })
	if spec.ForSet && *until != "" {
		return opsFail(env, "pause", 2, errors.New("-for and -until both set: give one end"))
	}
	if *until != "" {
		t, err := time.Parse(time.RFC3339, *until)
		if err != nil {
			return opsFail(env, "pause", 2, fmt.Errorf("-until %q: want RFC 3339, e.g. 2026-12-01T18:00:00Z", *until))
		}
		spec.Until = t
	}
	p, err := spec.Pause(requester(env), time.Now())
	if err != nil {
		return opsFail(env, "pause", 2, fmt.Errorf("-%w", err))
	}
	s, code, err := openOps("pause", f.config, memoryDaemon, env)
	if s == nil {
		return opsFail(env, "pause", code, err)
	}
	defer s.close()
	if _, err := s.job(f.args[0]); err != nil {
		return opsFail(env, "pause", 1, err)
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	if s.daemon != nil {
		p, err = s.daemon.pause(cctx, f.args[0], spec) // the daemon's record: its clock, its name for the requester
	} else {
		err = s.redisHint(s.redis.PauseFor(cctx, f.args[0], p))
	}
	if err != nil {
		return opsFail(env, "pause", 1, err)
	}
	fmt.Fprintf(env.stdout, "paused %s%s\n", f.args[0], pauseText(&p))
	return 0
}

// runResume implements `cronlock resume [-config FILE] JOB`: the pause is
// lifted and the job's event stream gets a resume event naming who.
func runResume(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("resume", "[-config FILE] JOB", env)
	if code := f.parse(args); code >= 0 {
		return code
	}
	if code := f.oneJob(); code >= 0 {
		return code
	}
	s, code, err := openOps("resume", f.config, memoryDaemon, env)
	if s == nil {
		return opsFail(env, "resume", code, err)
	}
	defer s.close()
	if _, err := s.job(f.args[0]); err != nil {
		return opsFail(env, "resume", 1, err)
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	var old *ledger.Pause
	if s.daemon != nil {
		old, err = s.daemon.resume(cctx, f.args[0])
	} else {
		old, err = s.redis.ResumeBy(cctx, f.args[0], requester(env), time.Now().UTC())
		err = s.redisHint(err)
	}
	if err != nil {
		return opsFail(env, "resume", 1, err)
	}
	if old == nil {
		fmt.Fprintf(env.stdout, "resumed %s (it was not paused)\n", f.args[0])
		return 0
	}
	fmt.Fprintf(env.stdout, "resumed %s (paused%s)\n", f.args[0], pauseText(old))
	return 0
}

// pauseText is " by ops@web1 at …, until …: note" (the parts that are set).
func pauseText(p *ledger.Pause) string {
	s := ""
	if p.By != "" {
		s += " by " + p.By
	}
	if !p.At.IsZero() {
		s += " at " + p.At.UTC().Format(time.RFC3339)
	}
	if !p.Until.IsZero() {
		s += ", until " + p.Until.UTC().Format(time.RFC3339)
	}
	if p.Note != "" {
		s += ": " + p.Note
	}
	return s
}

// requester names the operator: user@host, the user from USER or LOGNAME
// (else the process's uid), the host from os.Hostname.
func requester(env *runEnv) string {
	name := ""
	for _, kv := range env.environ {
		if v, ok := strings.CutPrefix(kv, "USER="); ok && v != "" {
			name = v
		} else if v, ok := strings.CutPrefix(kv, "LOGNAME="); ok && v != "" && name == "" {
			name = v
		}
	}
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		} else {
			name = "uid" + strconv.Itoa(os.Getuid())
		}
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return name + "@" + host
}

// opsFail prints "cronlock OP: ERR" when err is set (config problems are
// already printed) and returns code.
func opsFail(env *runEnv, op string, code int, err error) int {
	if err != nil {
		fmt.Fprintf(env.stderr, "cronlock %s: %v\n", op, err)
	}
	return code
}
