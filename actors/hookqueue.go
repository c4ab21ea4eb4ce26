package actors

import (
	"time"

	"github.com/cronlock/cronlock/ledger"

	"go.uber.org/zap"
)

// hookQueueSize is how many hooks of one job may wait while one of its
// hooks runs; a further one drops the oldest waiting (README.md, "Hooks").
const hookQueueSize = 4

// hookTask is one hook to run, as queued: only what running it needs, not
// the job's whole configuration. Its largest part is tail, the run's
// output tail (at most the 64 KiB a run keeps), so one job's queue holds at
// most (1 + hookQueueSize) × 64 KiB.
type hookTask struct {
	hook      string // "on_success" or "on_failure"
	command   string
	shell     string
	dir       string // work_dir
	user      string
	timeout   time.Duration // hook_timeout; 0 = no limit
	killGrace time.Duration
	env       envSpec

	run      RunInfo
	attempts int
	result   string
	exitCode int
	started  time.Time
	finished time.Time
	tail     []byte
}

// newHookTask returns the hook fin calls for (on_success after a success,
// else on_failure), or nil when the job has none.
func newHookTask(fin RunFinished) *hookTask {
	hook, cmd := "on_failure", fin.Cfg.OnFailure
	if fin.Result == ledger.ResultSuccess {
		hook, cmd = "on_success", fin.Cfg.OnSuccess
	}
	if cmd == "" {
		return nil
	}
	c := fin.Cfg
	return &hookTask{hook: hook, command: cmd, shell: c.Shell, dir: c.WorkDir, user: c.User,
		timeout: c.HookTimeout, killGrace: c.KillGrace, env: envSpecOf(c),
		run: fin.RunInfo, attempts: fin.Attempts, result: fin.Result, exitCode: fin.ExitCode,
		started: fin.Started, finished: fin.Finished, tail: lastBytes(fin.Tail, maxRunTail)}
}

// maxRunTail is the most of a run's output a hook gets
// (CRONLOCK_OUTPUT_FILE): the 64 KiB tail a run keeps.
const maxRunTail = 64 << 10

// fields identify the hook's run in its log lines: every run line carries
// job, run_id, node_id, trigger and attempt (here the run's last attempt).
func (t *hookTask) fields() []zap.Field {
	f := []zap.Field{zap.String("job", t.run.Job), zap.String("run_id", t.run.RunID),
		zap.String("node_id", t.run.Node), zap.String("trigger", string(t.run.Trigger)),
		zap.Int("attempt", t.attempts), zap.String("hook", t.hook)}
	if !t.run.Slot.IsZero() {
		f = append(f, slotField(t.run.Slot))
	}
	return f
}

// hookQueue is one job's hooks while one of them runs: the waiting ones,
// oldest first, at most max. It is owned by the hook runner's goroutine.
type hookQueue struct {
	max     int
	pending []*hookTask
}

// push appends t; when the queue was full it drops the oldest waiting hook
// and returns it (nil otherwise).
func (q *hookQueue) push(t *hookTask) (dropped *hookTask) {
	if len(q.pending) >= q.max {
		dropped = q.pending[0]
		q.pending[0] = nil
		q.pending = q.pending[1:]
	}
	q.pending = append(q.pending, t)
	return dropped
}

// pop removes and returns the oldest waiting hook, or nil.
func (q *hookQueue) pop() *hookTask {
	if len(q.pending) == 0 {
		return nil
	}
	t := q.pending[0]
	q.pending[0] = nil
	q.pending = q.pending[1:]
	return t
}

// clear removes and returns every waiting hook.
func (q *hookQueue) clear() []*hookTask {
	out := q.pending
	q.pending = nil
	return out
}
