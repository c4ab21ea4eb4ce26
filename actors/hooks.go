package actors

import (
	"context"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cronlock/cronlock/process"
	"go.uber.org/zap"
)

// HookRunner is the fan-in of run results: it updates run metrics and runs
// on_success / on_failure hooks on at most `workers` goroutines, each hook
// bounded by hook_timeout. (The history record is written by the run
// itself, together with the lease release, so that a winning run costs one
// claim and one release round trip.)
type HookRunner struct {
	log     *zap.Logger
	metrics *Metrics
	environ []string
	start   Starter
	inbox   chan RunFinished
	sem     chan struct{}
	wg      sync.WaitGroup
}

// NewHookRunner returns a hook runner whose inbox holds up to queue results.
// start starts hook processes (nil = process.Start).
func NewHookRunner(log *zap.Logger, metrics *Metrics, environ []string, start Starter, queue, workers int) *HookRunner {
	if start == nil {
		start = startProcess
	}
	return &HookRunner{log: log, metrics: metrics, environ: JobEnviron(environ), start: start,
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
	h.metrics.RunFinished(fin.Job, fin.Result, fin.Finished.Sub(fin.Started), fin.Finished)
	hook, cmd := "on_failure", fin.Cfg.OnFailure
	if fin.Result == ResultSuccess {
		hook, cmd = "on_success", fin.Cfg.OnSuccess
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

// runHook runs one hook through the job's shell in work_dir with the run's
// environment plus the result variables; failures and timeouts are logged
// with the hook's output and counted, never silent.
func (h *HookRunner) runHook(fin RunFinished, hook, cmd string) {
	log := h.log.With(zap.String("job", fin.Job), zap.String("run_id", fin.RunID), zap.String("hook", hook),
		zap.String("trigger", string(fin.Trigger)))
	file, cleanup := h.tailFile(fin, log)
	defer cleanup()
	tail := strings.ReplaceAll(string(lastBytes(fin.Tail, MaxOutputTail)), "\x00", "")
	p, err := h.start(process.Spec{Shell: fin.Cfg.Shell, Command: cmd, Dir: fin.Cfg.WorkDir,
		Env: hookEnv(h.environ, fin, tail, file), User: fin.Cfg.User, KillGrace: fin.Cfg.KillGrace,
		Log: log, TailSize: MaxOutputTail})
	if err != nil {
		h.metrics.HookFailed(fin.Job, hook)
		log.Error("hook could not start", zap.Error(err))
		return
	}
	t := time.NewTimer(fin.Cfg.HookTimeout)
	defer t.Stop()
	timedOut := false
	select {
	case <-p.Done():
	case <-t.C:
		timedOut = true
		p.Terminate(fin.Cfg.KillGrace)
	}
	res := p.Wait()
	if timedOut || res.ExitCode != 0 || res.Err != nil {
		h.metrics.HookFailed(fin.Job, hook)
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
