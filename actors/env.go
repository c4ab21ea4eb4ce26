package actors

import (
	"strconv"
	"time"

	"github.com/cronlock/cronlock/config"
)

// This file builds the environment of a run's command and of its hooks, in
// one place for both (docs/architecture.md, "Processes and environment").

// commandEnv is the environment of one attempt: the daemon's environment,
// then the job's env, then the run variables (later entries win).
func commandEnv(environ []string, job config.Job, info RunInfo, attempt int) []string {
	return appendRunVars(baseEnv(environ, job, 7), info, attempt)
}

// hookEnv is the environment of a hook: the command's environment of the
// final attempt plus the result variables. file is the path of the output
// tail file ("" when it could not be written).
func hookEnv(environ []string, fin RunFinished, tail, file string) []string {
	env := appendRunVars(baseEnv(environ, fin.Cfg, 7+7), fin.RunInfo, fin.Attempts)
	return append(env, "CRONLOCK_RESULT="+fin.Result, "CRONLOCK_EXIT_CODE="+strconv.Itoa(fin.ExitCode),
		"CRONLOCK_DURATION_MS="+strconv.FormatInt(fin.Finished.Sub(fin.Started).Milliseconds(), 10),
		"CRONLOCK_STARTED_AT="+fin.Started.UTC().Format(time.RFC3339Nano),
		"CRONLOCK_FINISHED_AT="+fin.Finished.UTC().Format(time.RFC3339Nano),
		"CRONLOCK_OUTPUT_TAIL="+tail, "CRONLOCK_OUTPUT_FILE="+file)
}

// baseEnv is environ plus the job's env, with room for extra more entries.
func baseEnv(environ []string, job config.Job, extra int) []string {
	env := make([]string, 0, len(environ)+len(job.Env)+extra)
	env = append(env, environ...)
	for k, v := range job.Env {
		env = append(env, k+"="+v)
	}
	return env
}

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
