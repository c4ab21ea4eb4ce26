package actors_test

import (
	"context"
	"errors"
	"github.com/cronlock/cronlock/ledger/memory"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"github.com/cronlock/cronlock/internal/promtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Tests of what runs log and record: levels, fields, run metrics, and the
// summarising of repeated warnings (repeats.go).

// loggedJob is a job actor in the current bubble whose log lines (debug
// and above) are observed and whose results nobody reads (10 fit).
type loggedJob struct {
	*jobHarness
	logs *observer.ObservedLogs
}

func startLoggedJob(t *testing.T, cfg config.Job, locker ledger.Locker) *loggedJob {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	h := &jobHarness{name: cfg.Name, metrics: NewMetrics(nil), results: make(chan RunFinished, 10),
		kill: make(chan struct{}), done: make(chan error, 1)}
	h.metrics.InitJob(cfg.Name)
	h.job = NewJob(cfg, JobDeps{MaxSkew: testMaxSkew, Log: zap.New(core), Metrics: h.metrics, Locker: locker, NodeID: "n1",
		Results: h.results, Phantoms: make(chan Phantom, 1000), Kill: h.kill, Start: fakeproc.Start})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.job.Run(ctx) }()
	return &loggedJob{jobHarness: h, logs: logs}
}

// stop ends the job actor (killing a run still going) and waits for it.
func (h *loggedJob) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	close(h.kill)
	if err := <-h.done; err != nil {
		t.Fatalf("Run: got %v, want nil", err)
	}
}

// fireEverySecond fires slots 1s..ns after now, one a second, waiting
// until the bubble is idle after each.
func (h *loggedJob) fireEverySecond(n int) {
	for range n {
		time.Sleep(time.Second)
		h.job.Inbox() <- Fire{Job: h.name, Slot: time.Now()}
		synctest.Wait()
	}
}

// The run metrics are recorded where the run ends, before its result
// reaches the hook runner: here no hook runner reads the results at all,
// and cronlock_runs_total and the last success still count the run.
func TestJob_RunMetricsRecordedWhereTheRunEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startLoggedJob(t, testJob(t, "m", "exit 0"), memory.NewMemory())
		h.job.Inbox() <- Fire{Job: "m", Slot: time.Now()}
		synctest.Wait()
		if got := promtest.Value(t, h.metrics, "cronlock_runs_total", "job", "m", "result", ledger.ResultSuccess); got != 1 {
			t.Errorf("runs_total{success}: got %v, want 1 with no hook runner reading", got)
		}
		if got := promtest.Value(t, h.metrics, "cronlock_last_success_timestamp_seconds", "job", "m"); got == 0 {
			t.Error("last_success: got 0, want the run's end")
		}
		h.stop(t)
	})
}

// "run finished" is logged at info for a success and at warn for a
// failure or a timeout; every line of a run carries node_id, trigger and
// attempt.
func TestJob_RunLinesLevelsAndFields(t *testing.T) {
	for _, c := range []struct {
		command string
		timeout time.Duration
		result  string
		level   zapcore.Level
	}{
		{"exit 0", 0, ledger.ResultSuccess, zapcore.InfoLevel},
		{"exit 3", 0, ledger.ResultFailure, zapcore.WarnLevel},
		{"sleep 1h", time.Minute, ledger.ResultTimeout, zapcore.WarnLevel},
	} {
		t.Run(c.result, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := testJob(t, "j", c.command)
				cfg.Timeout, cfg.Retries = c.timeout, 1
				h := startLoggedJob(t, cfg, memory.NewMemory())
				h.job.Inbox() <- Fire{Job: "j", Slot: time.Now()}
				time.Sleep(time.Hour)
				synctest.Wait()
				finished := h.logs.FilterMessage("run finished").All()
				want := 2 // both attempts
				if c.result == ledger.ResultSuccess {
					want = 1
				}
				if len(finished) != want {
					t.Fatalf("run finished lines: got %d, want %d", len(finished), want)
				}
				for i, e := range finished {
					if e.Level != c.level || e.ContextMap()["result"] != c.result {
						t.Errorf("run finished of attempt %d: got level %v result %v, want %v %s",
							i+1, e.Level, e.ContextMap()["result"], c.level, c.result)
					}
					if got := e.ContextMap()["attempt"]; got != int64(i+1) {
						t.Errorf("run finished attempt field: got %v, want %d", got, i+1)
					}
				}
				for _, e := range h.logs.FilterFieldKey("run_id").All() {
					m := e.ContextMap()
					if m["node_id"] != "n1" || m["trigger"] != string(ledger.TriggerSchedule) {
						t.Errorf("%q: got node_id %v trigger %v, want n1 schedule", e.Message, m["node_id"], m["trigger"])
					}
					if _, ok := m["attempt"]; !ok {
						t.Errorf("%q: no attempt field (%v)", e.Message, m)
					}
				}
				h.stop(t)
			})
		})
	}
}

// A run longer than its interval makes every slot overlap_local: the first
// skip is logged, then one line per minute with the count of the others;
// when a run starts again, the last left-out skip is written with its
// count. Every skip is counted in the metric.
func TestJob_OverlapLocalSummarised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startLoggedJob(t, testJob(t, "long", "sleep 149500ms"), memory.NewMemory())
		h.job.Inbox() <- Fire{Job: "long", Slot: time.Now()}
		h.fireEverySecond(149) // 149 slots skipped overlap_local; the run ends at 149.5s
		lines := h.logs.FilterMessage("slot skipped").Filter(notDebug).All()
		if got := suppressedCounts(lines); !slices.Equal(got, []int64{0, 59, 59}) {
			t.Errorf("skip lines during the run: got suppressed counts %v, want [0 59 59] (at 1s, 61s, 121s)", got)
		}
		h.fireEverySecond(1) // 150s: the run has ended; a new run starts, the summary ends
		lines = h.logs.FilterMessage("slot skipped").Filter(notDebug).All()
		if got := suppressedCounts(lines); !slices.Equal(got, []int64{0, 59, 59, 27}) {
			t.Errorf("skip lines after a run started again: got suppressed counts %v, want [0 59 59 27]", got)
		}
		if got := h.skips(t, ledger.SkipOverlapLocal); got != 149 {
			t.Errorf("overlap_local skips counted: got %v, want 149", got)
		}
		h.stop(t)
	})
}

// During an outage every claim fails: "claim failed; not run" and the
// redis_error skip are each logged once, then once a minute with a count,
// never once per slot; a claim that succeeds again ends the summary.
func TestJob_ClaimFailuresSummarised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locker := &downLocker{Memory: memory.NewMemory()}
		locker.down.Store(true)
		h := startLoggedJob(t, testJob(t, "j", "exit 0"), locker)
		h.fireEverySecond(130)
		claim := h.logs.FilterMessage("claim failed; not run").All()
		skip := h.logs.FilterMessage("slot skipped").Filter(notDebug).All()
		if got := suppressedCounts(claim); !slices.Equal(got, []int64{0, 59, 59}) {
			t.Errorf("claim failed lines over 130 slots: got suppressed counts %v, want [0 59 59]", got)
		}
		if got := suppressedCounts(skip); !slices.Equal(got, []int64{0, 59, 59}) {
			t.Errorf("redis_error skip lines over 130 slots: got suppressed counts %v, want [0 59 59]", got)
		}
		locker.down.Store(false)
		h.fireEverySecond(1)
		if got := suppressedCounts(h.logs.FilterMessage("claim failed; not run").All()); !slices.Equal(got, []int64{0, 59, 59, 8}) {
			t.Errorf("claim failed lines once claims succeed: got suppressed counts %v, want [0 59 59 8]", got)
		}
		if got := h.skips(t, ledger.SkipRedisError); got != 130 {
			t.Errorf("redis_error skips counted: got %v, want 130", got)
		}
		if got := promtest.Value(t, h.metrics, "cronlock_runs_total", "job", "j", "result", ledger.ResultSuccess); got != 1 {
			t.Errorf("runs once Redis answers: got %v, want 1", got)
		}
		h.stop(t)
	})
}

// suppressedCounts returns the suppressed field of each line (0 when
// absent).
func suppressedCounts(lines []observer.LoggedEntry) []int64 {
	out := []int64{}
	for _, e := range lines {
		n, _ := e.ContextMap()["suppressed"].(int64)
		out = append(out, n)
	}
	return out
}

var errDown = errors.New("redis down")

// downLocker wraps Memory; while down, every claim fails.
type downLocker struct {
	*memory.Memory
	down atomic.Bool
}

func (d *downLocker) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	if d.down.Load() {
		return ledger.Claim{}, errDown
	}
	return d.Memory.Claim(ctx, req)
}

// notDebug keeps the lines written above debug level: the summariser also
// writes every left-out occurrence at debug.
func notDebug(e observer.LoggedEntry) bool { return e.Level > zapcore.DebugLevel }
