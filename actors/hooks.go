package actors

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cronlock/cronlock/process"
	"go.uber.org/zap"
)

// envTailSize is the output tail put in CRONLOCK_OUTPUT_TAIL and in
// history records (SPEC.md §7, §8).
const envTailSize = 4 << 10

// HookRunner is the fan-in of run results (SPEC.md §10): it updates run
// metrics and runs on_success / on_failure hooks on at most `workers`
// goroutines, each hook bounded by hook_timeout. (The history record is
// written by the run itself, together with the lease release, so that a run
// costs one claim and one release round trip: SPEC.md §9.)
type HookRunner struct {
	log     *zap.Logger
	metrics *Metrics
	environ []string
	inbox   chan RunFinished
	sem     chan struct{}
	wg      sync.WaitGroup
}

// NewHookRunner returns a hook runner whose inbox holds up to queue results.
func NewHookRunner(log *zap.Logger, metrics *Metrics, environ []string, queue, workers int) *HookRunner {
	return &HookRunner{log: log, metrics: metrics, environ: environ,
		inbox: make(chan RunFinished, queue), sem: make(chan struct{}, workers)}
}

// Inbox is where runs send their results.
func (h *HookRunner) Inbox() chan<- RunFinished { return h.inbox }

// Close says no more results will come. The caller must ensure that no
// sender is left (all job actors have returned).
func (h *HookRunner) Close() { close(h.inbox) }

// Run handles results until the inbox is closed and drained, waits for
// running hooks, and returns nil. Hooks already started finish (bounded by
// their hook_timeout) even after ctx ends.
func (h *HookRunner) Run(ctx context.Context) error {
	for fin := range h.inbox {
		h.handle(fin)
	}
	h.wg.Wait()
	return nil
}

func (h *HookRunner) handle(fin RunFinished) {
	job := fin.Job.Name
	h.metrics.RunFinished(job, fin.Result, fin.Finished.Sub(fin.Started), fin.Finished)
	hook, cmd := "on_failure", fin.Job.OnFailure
	if fin.Result == ResultSuccess {
		hook, cmd = "on_success", fin.Job.OnSuccess
	}
	if cmd == "" {
		return
	}
	h.sem <- struct{}{}
	h.wg.Add(1)
	go func() {
		defer func() { <-h.sem; h.wg.Done() }()
		h.runHook(fin, hook, cmd)
	}()
}

// runHook runs one hook through the job's shell in work_dir with the
// environment of SPEC.md §7; failures and timeouts are logged with the
// hook's output and counted, never silent.
func (h *HookRunner) runHook(fin RunFinished, hook, cmd string) {
	log := h.log.With(zap.String("job", fin.Job.Name), zap.String("run_id", fin.RunID), zap.String("hook", hook))
	file, cleanup := h.tailFile(fin, log)
	defer cleanup()
	p, err := process.Start(process.Spec{Shell: fin.Job.Shell, Command: cmd, Dir: fin.Job.WorkDir,
		Env: h.env(fin, file), User: fin.Job.User, KillGrace: fin.Job.KillGrace, Log: log, TailSize: envTailSize})
	if err != nil {
		h.metrics.HookFailed(fin.Job.Name, hook)
		log.Error("hook could not start", zap.Error(err))
		return
	}
	t := time.NewTimer(fin.Job.HookTimeout)
	defer t.Stop()
	timedOut := false
	select {
	case <-p.Done():
	case <-t.C:
		timedOut = true
		p.Terminate(fin.Job.KillGrace)
	}
	res := p.Wait()
	if timedOut || res.ExitCode != 0 || res.Err != nil {
		h.metrics.HookFailed(fin.Job.Name, hook)
		log.Error("hook failed", zap.Bool("timed_out", timedOut), zap.Int("exit_code", res.ExitCode),
			zap.ByteString("output", res.Tail), zap.Error(res.Err))
		return
	}
	log.Info("hook succeeded", zap.Duration("duration", res.Finished.Sub(res.Started)))
}

// tailFile writes the run's output tail (64 KiB) to a temporary file for
// CRONLOCK_OUTPUT_FILE; cleanup removes it after the hook.
func (h *HookRunner) tailFile(fin RunFinished, log *zap.Logger) (string, func()) {
	f, err := os.CreateTemp("", "cronlock-output-*")
	if err != nil {
		log.Warn("output file for hook not created", zap.Error(err))
		return "", func() {}
	}
	defer f.Close()
	if _, err := f.Write(fin.Tail); err != nil {
		log.Warn("output file for hook not written", zap.Error(err))
	}
	return f.Name(), func() { _ = os.Remove(f.Name()) }
}

func (h *HookRunner) env(fin RunFinished, file string) []string {
	env := make([]string, 0, len(h.environ)+len(fin.Job.Env)+14)
	env = append(env, h.environ...)
	for k, v := range fin.Job.Env {
		env = append(env, k+"="+v)
	}
	sched := ""
	if !fin.Slot.IsZero() {
		sched = fin.Slot.UTC().Format(time.RFC3339)
	}
	tail := strings.ReplaceAll(string(lastBytes(fin.Tail, envTailSize)), "\x00", "")
	return append(env, "CRONLOCK_JOB="+fin.Job.Name, "CRONLOCK_NODE_ID="+fin.Node,
		"CRONLOCK_RUN_ID="+fin.RunID, "CRONLOCK_SCHEDULED_TIME="+sched,
		"CRONLOCK_FENCING_TOKEN="+strconv.FormatInt(fin.Fence, 10),
		"CRONLOCK_ATTEMPT="+strconv.Itoa(fin.Attempts),
		"CRONLOCK_RESULT="+fin.Result, "CRONLOCK_EXIT_CODE="+strconv.Itoa(fin.ExitCode),
		"CRONLOCK_DURATION_MS="+strconv.FormatInt(fin.Finished.Sub(fin.Started).Milliseconds(), 10),
		"CRONLOCK_STARTED_AT="+fin.Started.UTC().Format(time.RFC3339Nano),
		"CRONLOCK_FINISHED_AT="+fin.Finished.UTC().Format(time.RFC3339Nano),
		"CRONLOCK_OUTPUT_TAIL="+tail, "CRONLOCK_OUTPUT_FILE="+file)
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
