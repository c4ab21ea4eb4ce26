package actors

import (
	"cmp"
	"context"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/process"
	"go.uber.org/zap"
)

// hookInboxSize bounds results waiting for the hook runner's loop, which
// never blocks on a hook: it only queues them.
const hookInboxSize = 256

// HookRunner runs the on_success / on_failure hooks of finished runs, each
// job in isolation (README.md, "Hooks"): a job runs at most one hook at a
// time, up to hookQueueSize more wait in that job's queue, and when it is
// full the oldest waiting hook of that job is dropped (logged, counted in
// cronlock_hook_failures_total{reason="dropped"}). So a job whose hooks
// hang delays only its own hooks, never another job's runs, hooks or
// metrics (run metrics are recorded by the run itself). Each hook is
// bounded by its hook_timeout (0 = no limit).
//
// Shutdown: once Kill is closed (shutdown_timeout has passed) no hook
// starts any more — waiting and later ones are logged and counted
// (reason="shutdown") — and running hooks are terminated (SIGTERM,
// SIGKILL after kill_grace); KillNow SIGKILLs them at once.
type HookRunner struct {
	log     *zap.Logger
	metrics *Metrics
	environ []string
	start   Starter
	inbox   chan RunFinished
	kill    <-chan struct{}
	killNow <-chan struct{}
	repeats *repeatLog
	keep    hookKeeping // where results are kept (KeepResults); zero: not kept

	// Owned by Run.
	jobs map[string]*hookQueue // jobs with a hook running; their waiting hooks
	done chan string           // the job of a hook goroutine that ended
	cut  bool                  // Kill or KillNow closed: nothing starts any more
}

// NewHookRunner returns a hook runner. environ is what hooks inherit: the
// daemon's environment filtered by JobEnviron (by the caller, once: the
// job actors share it, see JobDeps.Environ); start starts hook processes (nil =
// process.Start); kill and killNow are closed when running hooks must be
// terminated (SIGTERM then SIGKILL after kill_grace; SIGKILL now). nil
// channels are never closed.
func NewHookRunner(log *zap.Logger, metrics *Metrics, environ []string, start Starter,
	kill, killNow <-chan struct{}) *HookRunner {
	if start == nil {
		start = startProcess
	}
	return &HookRunner{log: log, metrics: metrics, environ: environ, start: start,
		inbox: make(chan RunFinished, hookInboxSize), kill: kill, killNow: killNow,
		repeats: newRepeatLog(repeatEvery), jobs: map[string]*hookQueue{}, done: make(chan string)}
}

// hookKeeping is where a HookRunner keeps hook results (KeepResults).
type hookKeeping struct {
	store    ledger.HookStore
	keep     ledger.Retention
	patterns []*regexp.Regexp
}

// keepTimeout bounds one write of a hook result: it runs after the hook
// has ended, on the hook's goroutine or its own, and never delays a hook.
const keepTimeout = 2 * time.Second

// KeepResults makes the runner keep each hook's result with its run's
// occurrence in s as long as the ledger keeps records (keep), for the
// dashboard's run page, and redact the hooks' output as the runs' is (the
// job's env values, patterns: output.redact). Call it before Run.
func (h *HookRunner) KeepResults(s ledger.HookStore, keep ledger.Retention, patterns []*regexp.Regexp) {
	h.keep = hookKeeping{store: s, keep: keep, patterns: patterns}
}

// record keeps r as t's result, when KeepResults was called. A failed
// write is a warning: the run page then says no result is kept.
func (h *HookRunner) record(t *hookTask, r ledger.HookResult) {
	if h.keep.store == nil {
		return
	}
	r.Hook = t.hook
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	occ := ledger.OccurrenceID(unixOrZero(t.run.Slot), t.run.Fence)
	if err := h.keep.store.StoreHookResult(ctx, t.run.Job, occ, r, h.keep.keep); err != nil {
		h.log.Warn("hook result not kept (the run page shows none; the hook's own log line says how it ended)",
			append(t.fields(), zap.Error(err))...)
	}
}

// Inbox is where runs send their results.
func (h *HookRunner) Inbox() chan<- RunFinished { return h.inbox }

// Close says no more results will come. The caller must ensure that no
// sender is left (all job actors have returned).
func (h *HookRunner) Close() { close(h.inbox) }

// Run queues hooks of the results it receives and runs them until the
// inbox is closed and every hook has ended (or, after Kill, been
// terminated), then returns nil. ctx does not stop it: hooks already
// queued still run after ctx ends; Kill and KillNow cut them short.
func (h *HookRunner) Run(ctx context.Context) error {
	inbox, kill, killNow := (<-chan RunFinished)(h.inbox), h.kill, h.killNow
	for inbox != nil || len(h.jobs) > 0 {
		select {
		case fin, ok := <-inbox:
			if !ok {
				inbox = nil
				continue
			}
			h.accept(fin)
		case job := <-h.done:
			h.next(job)
		case <-kill:
			kill = nil
			h.stopStarting(isClosed(h.killNow))
		case <-killNow:
			killNow = nil
			h.stopStarting(true)
		}
	}
	return nil
}

// accept starts fin's hook, or queues it behind the job's running hook.
func (h *HookRunner) accept(fin RunFinished) {
	t := newHookTask(fin)
	switch {
	case t == nil:
	case h.cut:
		h.notRun(t, "hook not run: the shutdown's drain time has passed")
	case h.jobs[t.run.Job] == nil:
		h.jobs[t.run.Job] = &hookQueue{max: hookQueueSize}
		h.launch(t)
	default:
		if d := h.jobs[t.run.Job].push(t); d != nil {
			h.metrics.HookFailed(d.run.Job, d.hook, HookFailDropped)
			go h.record(d, ledger.HookResult{Result: HookFailDropped})
			fields := append(d.fields(), zap.Int("queue", hookQueueSize)) // not d: the summary may keep it a minute
			h.repeats.Log(d.run.Job, func(extra ...zap.Field) {
				h.log.Warn("hook dropped: the job's hook queue is full; its oldest waiting hook is not run",
					append(fields, extra...)...)
			}, nil)
		}
	}
}

// next starts the job's next waiting hook once its previous one ended.
func (h *HookRunner) next(job string) {
	q := h.jobs[job]
	if t := q.pop(); t != nil && !h.cut {
		h.launch(t)
		return
	}
	delete(h.jobs, job)
	h.repeats.End(job)
}

// stopStarting drops every waiting hook: the shutdown's drain time is over,
// or (second) a second signal cut it short — the log line names which.
// Running hooks see Kill themselves.
func (h *HookRunner) stopStarting(second bool) {
	if h.cut {
		return
	}
	h.cut = true
	msg := "hook not run: shutdown_timeout passed before it could start"
	if second {
		msg = "hook not run: a second shutdown signal ended the drain before it could start"
	}
	for _, q := range h.jobs {
		for _, t := range q.clear() {
			h.notRun(t, msg)
		}
	}
}

func (h *HookRunner) notRun(t *hookTask, msg string) {
	h.metrics.HookFailed(t.run.Job, t.hook, HookFailShutdown)
	h.log.Warn(msg, t.fields()...)
	go h.record(t, ledger.HookResult{Result: HookFailShutdown})
}

// launch runs t on a goroutine that reports its job on done; Run waits for
// it (len(h.jobs) counts running hooks).
func (h *HookRunner) launch(t *hookTask) {
	go func() {
		r := h.runHook(t)
		h.done <- t.run.Job
		h.record(t, r)
	}()
}

// runHook runs one hook through the job's shell in work_dir with the run's
// environment plus the result variables; failures, timeouts and
// terminations are logged with the hook's output and counted, never
// silent. It returns the hook's result.
func (h *HookRunner) runHook(t *hookTask) ledger.HookResult {
	log := h.log.With(t.fields()...)
	file, cleanup := tailFile(t.tail, log)
	defer cleanup()
	tail := strings.ReplaceAll(string(lastBytes(t.tail, ledger.MaxOutputTail)), "\x00", "")
	spec := process.Spec{Shell: t.shell, Command: t.command, Dir: t.dir, User: t.user,
		Env: hookEnv(h.environ, t, tail, file), KillGrace: t.killGrace, Log: log, TailSize: ledger.MaxOutputTail}
	spec.Redact = process.NewRedactor(t.env.env, h.keep.patterns) // as the run's output is
	p, err := h.start(spec)
	if err != nil {
		h.metrics.HookFailed(t.run.Job, t.hook, HookFailStart)
		log.Error("hook could not start", zap.Error(err))
		return ledger.HookResult{Result: HookFailStart, Output: err.Error()}
	}
	reason := h.wait(p, t, log)
	res := p.Wait()
	if reason == "" && (res.ExitCode != 0 || res.Err != nil) {
		reason = HookFailExit
	}
	r := ledger.HookResult{Result: cmp.Or(reason, ledger.ResultSuccess), ExitCode: res.ExitCode, Started: res.Started,
		Finished: res.Finished, Output: string(res.Tail)}
	if reason == "" {
		log.Info("hook succeeded", zap.Duration("duration", res.Finished.Sub(res.Started)))
		return r
	}
	h.metrics.HookFailed(t.run.Job, t.hook, reason)
	log.Error("hook failed", zap.String("reason", reason), zap.Bool("timed_out", reason == HookFailTimeout),
		zap.Int("exit_code", res.ExitCode), zap.ByteString("output", res.Tail), zap.Error(res.Err))
	return r
}

// wait waits until p has ended, terminating it on hook_timeout (reason
// timeout) or Kill / KillNow (reason shutdown); "" when it ended by itself.
func (h *HookRunner) wait(p Proc, t *hookTask, log *zap.Logger) (reason string) {
	var timeout <-chan time.Time
	if t.timeout > 0 {
		tm := time.NewTimer(t.timeout)
		defer tm.Stop()
		timeout = tm.C
	}
	kill, killNow := h.kill, h.killNow
	for {
		select {
		case <-p.Done():
			return reason
		case <-timeout:
			timeout, reason = nil, HookFailTimeout
			p.Terminate(t.killGrace)
		case <-kill:
			kill = nil
			if isClosed(killNow) {
				continue // a second signal: the killNow case handles it
			}
			reason = cmp.Or(reason, HookFailShutdown)
			log.Warn("shutdown_timeout passed; terminating the hook", zap.Duration("kill_grace", t.killGrace))
			p.Terminate(t.killGrace)
		case <-killNow:
			kill, killNow, reason = nil, nil, cmp.Or(reason, HookFailShutdown)
			log.Warn("second signal: killing the hook at once")
			p.Terminate(0)
		}
	}
}

// isClosed reports whether ch is closed (nil: never).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// tailFile writes the run's output tail (64 KiB) to a temporary file for
// CRONLOCK_OUTPUT_FILE; cleanup removes it after the hook.
func tailFile(tail []byte, log *zap.Logger) (string, func()) {
	f, err := os.CreateTemp("", "cronlock-output-*")
	if err != nil {
		log.Warn("output file for hook not created", zap.Error(err))
		return "", func() {}
	}
	defer f.Close()
	if _, err := f.Write(tail); err != nil {
		log.Warn("output file for hook not written", zap.Error(err))
	}
	return f.Name(), func() { _ = os.Remove(f.Name()) }
}
