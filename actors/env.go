package actors

import (
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/process"
)

// This file builds the environment of a run's command and of its hooks, in
// one place for both (docs/architecture.md, "Processes and environment").

// daemonVars are variables of the daemon's own that never reach a job or a
// hook: systemd's notify, watchdog and socket-activation interface (a job
// could otherwise send STATUS= or WATCHDOG=1 for the daemon), its per-unit
// internals, its credentials directory, and GOMAXPROCS (set for the
// daemon's own Go runtime: README.md "Install", "CPU"; a job that wants
// it sets it in its env).
var daemonVars = map[string]bool{
	"GOMAXPROCS":    true,
	"NOTIFY_SOCKET": true, "WATCHDOG_USEC": true, "WATCHDOG_PID": true,
	"LISTEN_FDS": true, "LISTEN_PID": true, "LISTEN_FDNAMES": true,
	"INVOCATION_ID": true, "JOURNAL_STREAM": true, "SYSTEMD_EXEC_PID": true,
	"MAINPID": true, "MANAGERPID": true, "CREDENTIALS_DIRECTORY": true,
	"MEMORY_PRESSURE_WATCH": true, "MEMORY_PRESSURE_WRITE": true,
}

// JobEnviron returns the part of the daemon's environment jobs and hooks
// inherit: everything but daemonVars and every CRONLOCK_* variable (the
// daemon's own configuration, e.g. CRONLOCK_REDIS_PASSWORD; a job sees only
// the CRONLOCK_* run variables it is given), and the variables named in
// secrets (those a `${…}` in redis.password referenced: config.SecretEnv).
// It returns a new slice.
func JobEnviron(environ []string, secrets ...string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if daemonVars[name] || strings.HasPrefix(name, "CRONLOCK_") || slices.Contains(secrets, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// envSpec is what of a job's configuration its environment is built
// from: inherit_env, shell, user and env (the map is the job's, shared and
// never modified).
type envSpec struct {
	inherit     bool
	shell, user string
	env         map[string]string
}

func envSpecOf(job config.Job) envSpec {
	return envSpec{inherit: job.InheritEnv, shell: job.Shell, user: job.User, env: job.Env}
}

// commandEnv is the environment of one attempt: the inherited (or minimal)
// environment, the run user's identity, the job's env, then the run
// variables (later entries win).
func commandEnv(environ []string, job config.Job, info RunInfo, attempt int) []string {
	return appendRunVars(baseEnv(environ, envSpecOf(job), 7), info, attempt)
}

// jobBaseEnv is the part of a job's command environment that every run
// shares (baseEnv: the inherited or minimal environment and the job's env),
// built once per configuration by the job actor. It is nil for a job with a
// user: that user's HOME, USER and LOGNAME are looked up at each run, as
// process.Start looks up the user's credential.
func jobBaseEnv(environ []string, job config.Job) []string {
	if job.User != "" {
		return nil
	}
	return baseEnv(environ, envSpecOf(job), 0)
}

// runEnv is commandEnv on a base from jobBaseEnv (copied, then the run
// variables); a nil base is built now.
func runEnv(base, environ []string, job config.Job, info RunInfo, attempt int) []string {
	if base == nil {
		return commandEnv(environ, job, info, attempt)
	}
	env := make([]string, len(base), len(base)+7)
	copy(env, base)
	return appendRunVars(env, info, attempt)
}

// hookEnv is the environment of a hook: the command's environment of the
// final attempt plus the result variables. file is the path of the output
// tail file ("" when it could not be written).
func hookEnv(environ []string, t *hookTask, tail, file string) []string {
	env := appendRunVars(baseEnv(environ, t.env, 7+7), t.run, t.attempts)
	return append(env, "CRONLOCK_RESULT="+t.result, "CRONLOCK_EXIT_CODE="+strconv.Itoa(t.exitCode),
		"CRONLOCK_DURATION_MS="+strconv.FormatInt(t.finished.Sub(t.started).Milliseconds(), 10),
		"CRONLOCK_STARTED_AT="+t.started.UTC().Format(time.RFC3339Nano),
		"CRONLOCK_FINISHED_AT="+t.finished.UTC().Format(time.RFC3339Nano),
		"CRONLOCK_OUTPUT_TAIL="+tail, "CRONLOCK_OUTPUT_FILE="+file)
}

// baseEnv is the start of a run's environment, with room for extra more
// entries: environ (already filtered by jobEnviron), or cron's minimal
// environment when inherit_env is false (PATH=/usr/bin:/bin, SHELL, and
// HOME, USER, LOGNAME, LANG and TZ when the daemon has them); then the run
// user's HOME, USER, LOGNAME and SHELL (the job's shell, as cron sets
// SHELL to the shell it runs) from its passwd entry: the job's user, or
// without one and with inherit_env false the daemon's own user, as cron(8)
// sets LOGNAME, USER and HOME from the crontab owner's passwd entry
// (crontab(5)); then the job's env.
func baseEnv(environ []string, job envSpec, extra int) []string {
	env := make([]string, 0, len(environ)+len(job.env)+6+extra)
	if job.inherit {
		env = append(env, environ...)
	} else {
		env = append(env, "PATH=/usr/bin:/bin", "SHELL="+job.shell)
		for _, kv := range environ {
			name, _, _ := strings.Cut(kv, "=")
			switch name {
			case "HOME", "USER", "LOGNAME", "LANG", "TZ":
				env = append(env, kv)
			}
		}
	}
	switch {
	case job.user != "":
		env = append(env, userVars(job.user, job.shell)...)
	case !job.inherit:
		env = append(env, daemonUserVars()...)
	}
	for k, v := range job.env {
		env = append(env, k+"="+v)
	}
	return env
}

// userVars are HOME, USER, LOGNAME and SHELL for a run as name (a user name
// or numeric uid, resolved as process.Start does). An unknown user yields
// none: the start then fails with the lookup error.
func userVars(name, shell string) []string {
	u, err := process.LookupUser(name)
	if err != nil {
		return nil
	}
	return []string{"HOME=" + u.HomeDir, "USER=" + u.Username, "LOGNAME=" + u.Username, "SHELL=" + shell}
}

// daemonUserVars are HOME, USER and LOGNAME from the passwd entry of the
// daemon's own user (its effective uid), looked up once; none when it has
// no entry (a container's arbitrary uid): the daemon's own HOME, USER and
// LOGNAME, when it has them, then stand.
var daemonUserVars = sync.OnceValue(func() []string {
	u, err := user.LookupId(strconv.Itoa(os.Geteuid()))
	if err != nil {
		return nil
	}
	return []string{"HOME=" + u.HomeDir, "USER=" + u.Username, "LOGNAME=" + u.Username}
})

// appendRunVars appends the CRONLOCK_* run variables. A manual run has no
// slot: its CRONLOCK_SCHEDULED_TIME is empty.
func appendRunVars(env []string, info RunInfo, attempt int) []string {
	sched := ""
	if !info.Slot.IsZero() {
		sched = info.Slot.UTC().Format(time.RFC3339)
	}
	return append(env, "CRONLOCK_JOB="+info.Job, "CRONLOCK_NODE_ID="+info.Node,
		"CRONLOCK_RUN_ID="+info.RunID, "CRONLOCK_SCHEDULED_TIME="+sched,
		"CRONLOCK_FENCING_TOKEN="+strconv.FormatInt(info.Fence, 10),
		"CRONLOCK_ATTEMPT="+strconv.Itoa(attempt), "CRONLOCK_TRIGGER="+string(info.Trigger))
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
