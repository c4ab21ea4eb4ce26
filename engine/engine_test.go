package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// TestMain checks for leaked goroutines. rueidis's cluster client, when it
// fails to connect, leaves a singleflight goroutine sleeping out its retry
// delay (under a second); it ends by itself and is not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

func parseConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "yaml", config.Options{Purpose: config.ForStart, Hostname: "test", Euid: os.Geteuid()})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// notifyLog records sd_notify states in order.
type notifyLog struct {
	mu     sync.Mutex
	states []string
	ch     chan string
}

func newNotifyLog() *notifyLog { return &notifyLog{ch: make(chan string, 256)} }

func (n *notifyLog) notify(s string) {
	n.mu.Lock()
	n.states = append(n.states, s)
	n.mu.Unlock()
	select {
	case n.ch <- s:
	default:
	}
}

// waitPrefix waits (bounded) for a state starting with prefix.
func (n *notifyLog) waitPrefix(t *testing.T, prefix string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case s := <-n.ch:
			if strings.HasPrefix(s, prefix) {
				return
			}
		case <-deadline:
			t.Fatalf("no sd_notify state %q within 10s; got %q", prefix, n.states)
		}
	}
}

type testEngine struct {
	e       *Engine
	reg     *prometheus.Registry
	notes   *notifyLog
	signals chan os.Signal
	done    chan error
}

func startEngine(t *testing.T, cfg *config.Config, reload func() (*config.Config, error), environ ...string) *testEngine {
	t.Helper()
	return launchEngine(t, context.Background(), cfg, Options{Reload: reload, Environ: environ,
		ExitNow: func() { t.Error("ExitNow called") }})
}

// launchEngine runs an engine on cfg with opts (Reload, Environ, ExitNow as
// given; Log, Notify, Signals and Registry filled in) until ctx ends or a
// signal stops it, and waits for READY=1.
func launchEngine(t *testing.T, ctx context.Context, cfg *config.Config, opts Options) *testEngine {
	t.Helper()
	te := &testEngine{reg: prometheus.NewRegistry(), notes: newNotifyLog(), signals: make(chan os.Signal, 4),
		done: make(chan error, 1)}
	opts.Log = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	opts.Notify, opts.Signals, opts.Registry = te.notes.notify, te.signals, te.reg
	e, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	te.e = e
	go func() { te.done <- e.Run(ctx) }()
	te.notes.waitPrefix(t, "READY=1")
	return te
}

func (te *testEngine) stop(t *testing.T) {
	t.Helper()
	te.signals <- syscall.SIGTERM
	select {
	case err := <-te.done:
		if err != nil {
			t.Fatalf("Run: got %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("engine did not stop within 15s of SIGTERM")
	}
}

func (te *testEngine) runs(t testing.TB, job, result string) float64 {
	return promtest.Value(t, te.e.metrics, "cronlock_runs_total", "job", job, "result", result)
}

// waitRuns waits (bounded) until job has at least n successful runs.
func (te *testEngine) waitRuns(t *testing.T, job string, n float64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if te.runs(t, job, "success") >= n {
			return
		}
	}
	t.Fatalf("job %s: got %v successful runs within 10s, want >= %v", job, te.runs(t, job, "success"), n)
}

const oneJob = `
node: {shutdown_timeout: 5s}
jobs:
  - name: a
    schedule: "* * * * * *"
    command: "true"
`

// READY=1 comes first; STOPPING=1 is sent when the shutdown begins
// (sd_notify(3)), while a run is still going, not when the process ends.
func TestEngine_NotifyReadyFirstStoppingWhenShutdownBegins(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	cfg := parseConfig(t, `
node: {shutdown_timeout: 10s}
jobs:
  - name: a
    schedule: "* * * * * *"
    command: "echo $$ > `+pidFile+`; sleep 2"
`)
	te := launchEngine(t, context.Background(), cfg, Options{ExitNow: func() { t.Error("ExitNow called") }})
	waitPIDFile(t, pidFile)
	te.signals <- syscall.SIGTERM
	te.notes.waitPrefix(t, "STOPPING=1")
	select {
	case <-te.done:
		t.Fatal("Run returned before STOPPING=1 was seen; want STOPPING=1 while the run is still going")
	default:
	}
	if err := <-te.done; err != nil {
		t.Fatalf("Run: got %v, want nil", err)
	}
	if got := te.runs(t, "a", "success"); got != 1 {
		t.Errorf("successful runs of a: got %v, want 1 (the shutdown waits for the run)", got)
	}
	te.notes.mu.Lock()
	defer te.notes.mu.Unlock()
	if first := te.notes.states[0]; !strings.HasPrefix(first, "READY=1") {
		t.Errorf("first state: got %q, want READY=1", first)
	}
}

// SIGHUP with a broken config keeps the old jobs running; with a new job
// added, that job starts firing. RELOADING=1 then READY=1 each time.
func TestEngine_ReloadKeepsOldConfigOnErrorAndAddsJobs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	reload := func() (*config.Config, error) {
		return config.Load(path, config.Options{Purpose: config.ForStart, Hostname: "test", Euid: os.Geteuid()})
	}
	te := startEngine(t, parseConfig(t, oneJob), reload)
	defer te.stop(t)
	te.waitRuns(t, "a", 1)

	if err := os.WriteFile(path, []byte(oneJob+"    timeout: 300\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	te.signals <- syscall.SIGHUP
	te.notes.waitPrefix(t, "RELOADING=1")
	te.notes.waitPrefix(t, "READY=1")
	before := te.runs(t, "a", "success")
	te.waitRuns(t, "a", before+2)

	added := oneJob + "  - name: b\n    schedule: \"* * * * * *\"\n    command: \"true\"\n"
	if err := os.WriteFile(path, []byte(added), 0o600); err != nil {
		t.Fatal(err)
	}
	te.signals <- syscall.SIGHUP
	te.notes.waitPrefix(t, "RELOADING=1")
	te.notes.waitPrefix(t, "READY=1")
	te.waitRuns(t, "b", 1)
	te.waitRuns(t, "a", te.runs(t, "a", "success")+1)
}

// Removing a job on reload stops its firing and drops its series.
func TestEngine_ReloadRemovesJob(t *testing.T) {
	two := oneJob + "  - name: b\n    schedule: \"* * * * * *\"\n    command: \"true\"\n"
	te := startEngine(t, parseConfig(t, two), func() (*config.Config, error) { return parseConfig(t, oneJob), nil })
	defer te.stop(t)
	te.waitRuns(t, "b", 1)
	te.signals <- syscall.SIGHUP
	te.notes.waitPrefix(t, "RELOADING=1")
	te.notes.waitPrefix(t, "READY=1")
	te.waitRuns(t, "a", te.runs(t, "a", "success")+2)
	mfs, err := te.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "job" && l.GetValue() == "b" {
					t.Fatalf("series %s{job=b} still exported after b was removed", mf.GetName())
				}
			}
		}
	}
}

// The watchdog pings only after the scheduler loop answered a probe.
func TestEngine_WatchdogPingsWhileSchedulerAlive(t *testing.T) {
	te := startEngine(t, parseConfig(t, oneJob), nil, "WATCHDOG_USEC=200000")
	te.notes.waitPrefix(t, "WATCHDOG=1")
	te.notes.waitPrefix(t, "WATCHDOG=1")
	te.stop(t)
}

func TestWatchdogInterval(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want time.Duration
	}{
		{nil, 0},
		{[]string{"WATCHDOG_USEC=30000000"}, 15 * time.Second},
		{[]string{"WATCHDOG_USEC=30000000", "WATCHDOG_PID=1"}, 0},
		{[]string{"WATCHDOG_USEC=abc"}, 0},
		{[]string{"WATCHDOG_USEC=0"}, 0},
	} {
		if got := watchdogInterval(c.env); got != c.want {
			t.Errorf("watchdogInterval(%q): got %v, want %v", c.env, got, c.want)
		}
	}
}

// Every job's series exist from the start, so "never ran" can be alerted on.
func TestEngine_SeriesExistFromStart(t *testing.T) {
	cfg := parseConfig(t, `
jobs:
  - name: never
    schedule: "0 0 1 1 *"
    command: "true"
`)
	te := startEngine(t, cfg, nil)
	defer te.stop(t)
	for _, name := range []string{"cronlock_runs_total", "cronlock_skips_total", "cronlock_last_success_timestamp_seconds",
		"cronlock_job_running", "cronlock_lease_lost_total", "cronlock_hook_failures_total"} {
		if n, err := testutil.GatherAndCount(te.reg, name); err != nil || n == 0 {
			t.Errorf("%s: got %d series (err %v), want > 0 before any run", name, n, err)
		}
	}
}
