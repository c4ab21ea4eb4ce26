package actors_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/cronlock/cronlock/process"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// hookStarts records every hook the runner starts (fakeproc underneath, on
// the bubble's clock): the run id of the hook's run, in start order.
type hookStarts struct {
	mu   sync.Mutex
	runs []string
}

func (s *hookStarts) start(spec process.Spec) (Proc, error) {
	s.mu.Lock()
	for _, kv := range spec.Env {
		if id, ok := strings.CutPrefix(kv, "CRONLOCK_RUN_ID="); ok {
			s.runs = append(s.runs, id)
		}
	}
	s.mu.Unlock()
	return fakeproc.Start(spec)
}

// of returns the started run ids with prefix (one job's), in order.
func (s *hookStarts) of(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range s.runs {
		if strings.HasPrefix(id, prefix) {
			out = append(out, id)
		}
	}
	return out
}

type hookHarness struct {
	runner  *HookRunner
	metrics *Metrics
	starts  *hookStarts
	logs    *observer.ObservedLogs
	kill    chan struct{}
	done    chan error
}

// startHooks runs a hook runner in the current bubble.
func startHooks(t *testing.T, jobs ...string) *hookHarness {
	core, logs := observer.New(zap.InfoLevel)
	h := &hookHarness{metrics: NewMetrics(nil), starts: &hookStarts{}, logs: logs, kill: make(chan struct{}),
		done: make(chan error, 1)}
	for _, j := range jobs {
		h.metrics.InitJob(j)
	}
	h.runner = NewHookRunner(zap.New(core), h.metrics, nil, h.starts.start, h.kill, nil)
	go func() { h.done <- h.runner.Run(context.Background()) }()
	return h
}

// finished is a result of job's run id whose job has the given hooks.
func finished(job, id, result, onSuccess, onFailure string, hookTimeout time.Duration) RunFinished {
	return RunFinished{RunInfo: RunInfo{Job: job, RunID: id, Node: "n1", Trigger: ledger.TriggerSchedule},
		Cfg: config.Job{Name: job, Shell: "/bin/sh", OnSuccess: onSuccess, OnFailure: onFailure,
			HookTimeout: hookTimeout, KillGrace: time.Second},
		Result: result, Attempts: 1}
}

func (h *hookHarness) fails(t *testing.T, job, hook, reason string) float64 {
	return promtest.Value(t, h.metrics, "cronlock_hook_failures_total", "job", job, "hook", hook, "reason", reason)
}

// closeAndWait closes the inbox and waits for Run to return nil.
func (h *hookHarness) closeAndWait(t *testing.T) {
	t.Helper()
	h.runner.Close()
	if err := <-h.done; err != nil {
		t.Fatalf("Run: got %v, want nil", err)
	}
}

// A job whose hook hangs has at most one hook running and hookQueueSize (4)
// waiting: a fifth waiting one drops the oldest waiting hook of that job
// (logged and counted as dropped). Another job's hooks run at once the
// whole time, and the hanging job's waiting hooks run in order once its
// hook ends.
func TestHookRunner_FullQueueDropsOldestOfThatJobOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHooks(t, "hang", "quick")
		for i := range 7 { // a0 runs; a1..a4 wait; a5 and a6 drop a1 and a2
			h.runner.Inbox() <- finished("hang", fmt.Sprintf("a%d", i), ledger.ResultFailure, "", "sleep 1h", 2*time.Hour)
			h.runner.Inbox() <- finished("quick", fmt.Sprintf("b%d", i), ledger.ResultSuccess, "exit 0", "", time.Minute)
			synctest.Wait() // quick's hook has ended: one result of each job at a time
		}
		synctest.Wait()
		want := []string{"b0", "b1", "b2", "b3", "b4", "b5", "b6"}
		if got := h.starts.of("b"); !slices.Equal(got, want) {
			t.Errorf("hooks of quick started at once: got %v, want %v", got, want)
		}
		if got := h.starts.of("a"); !slices.Equal(got, []string{"a0"}) {
			t.Errorf("hooks of hang started at once: got %v, want [a0]", got)
		}
		if got := h.fails(t, "hang", "on_failure", HookFailDropped); got != 2 {
			t.Errorf("dropped hooks of hang: got %v, want 2", got)
		}
		if got := h.fails(t, "quick", "on_success", HookFailDropped); got != 0 {
			t.Errorf("dropped hooks of quick: got %v, want 0", got)
		}
		const dropMsg = "hook dropped: the job's hook queue is full; its oldest waiting hook is not run"
		dropped := h.logs.FilterMessage(dropMsg)
		if got := dropped.Len(); got != 1 || dropped.All()[0].ContextMap()["run_id"] != "a1" {
			t.Errorf("drop lines within the first minute: got %d (%v), want 1, of a1 (the second is summarised)",
				got, dropped.All())
		}

		time.Sleep(4 * time.Hour) // each waiting hook of hang runs its hour in turn
		synctest.Wait()
		if got, want := h.starts.of("a"), []string{"a0", "a3", "a4", "a5", "a6"}; !slices.Equal(got, want) {
			t.Errorf("hooks of hang started after 4h: got %v, want %v", got, want)
		}
		h.closeAndWait(t)
		if got := h.logs.FilterMessage("hook succeeded").Len(); got != 7+5 {
			t.Errorf("hooks succeeded: got %d, want 12", got)
		}
		last := h.logs.FilterMessage(dropMsg).All()
		if len(last) != 2 || last[1].ContextMap()["run_id"] != "a2" {
			t.Errorf("drop lines once hang's queue emptied: got %v, want a1's, then a2's written when the queue drained", last)
		}
	})
}

// hook_timeout: 0 means no limit, as timeout does: a hook running 10h is
// not terminated.
func TestHookRunner_HookTimeoutZeroIsNoLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHooks(t, "j")
		h.runner.Inbox() <- finished("j", "r1", ledger.ResultSuccess, "sleep 10h", "", 0)
		time.Sleep(10*time.Hour - time.Second)
		synctest.Wait()
		if got := h.logs.FilterMessage("hook succeeded").Len() + h.logs.FilterMessage("hook failed").Len(); got != 0 {
			t.Fatalf("hook ended before its 10h: got %d end lines, want 0", got)
		}
		time.Sleep(time.Second)
		h.closeAndWait(t)
		if got := h.logs.FilterMessage("hook succeeded").Len(); got != 1 {
			t.Errorf("hook succeeded lines: got %d, want 1 (ran its 10h)", got)
		}
		if got := h.fails(t, "j", "on_success", HookFailTimeout); got != 0 {
			t.Errorf("timed-out hooks: got %v, want 0", got)
		}
	})
}

// A hook longer than a non-zero hook_timeout is terminated at it and
// counted as a timeout.
func TestHookRunner_HookTimeoutTerminates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHooks(t, "j")
		start := time.Now()
		h.runner.Inbox() <- finished("j", "r1", ledger.ResultFailure, "", "sleep 1h", time.Minute)
		h.closeAndWait(t)
		if took := time.Since(start); took != time.Minute {
			t.Errorf("hook ended after %v, want 1m (hook_timeout)", took)
		}
		if got := h.fails(t, "j", "on_failure", HookFailTimeout); got != 1 {
			t.Errorf("timed-out hooks: got %v, want 1", got)
		}
	})
}

// Kill (shutdown_timeout passed) terminates the running hook and starts
// none of the waiting ones nor of later results; each is counted as
// shutdown and Run returns once the inbox is closed.
func TestHookRunner_KillTerminatesRunningAndStartsNoMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHooks(t, "j")
		for i := range 3 {
			h.runner.Inbox() <- finished("j", fmt.Sprintf("r%d", i), ledger.ResultFailure, "", "sleep 1h", 2*time.Hour)
		}
		synctest.Wait()
		close(h.kill)
		h.runner.Inbox() <- finished("j", "late", ledger.ResultFailure, "", "sleep 1h", 2*time.Hour)
		start := time.Now()
		h.closeAndWait(t)
		if took := time.Since(start); took != 0 {
			t.Errorf("Run returned %v after Kill, want at once", took)
		}
		if got := h.starts.of(""); !slices.Equal(got, []string{"r0"}) {
			t.Errorf("hooks started: got %v, want only r0", got)
		}
		if got := h.fails(t, "j", "on_failure", HookFailShutdown); got != 4 {
			t.Errorf("hooks counted shutdown: got %v, want 4 (r0 terminated; r1, r2, late not run)", got)
		}
	})
}
