package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// TestMain checks for leaked goroutines. rueidis's cluster client, when it
// fails to connect, leaves a singleflight goroutine sleeping out its retry
// delay (under a second), and after a shard dies it closes the connections
// a topology refresh removed 5 s later (cluster.go, _refresh); both end by
// themselves and are not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"))
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

func (n *notifyLog) snapshot() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.states)
}

// count returns how many states sent were exactly state.
func (n *notifyLog) count(state string) int {
	c := 0
	for _, s := range n.snapshot() {
		if s == state {
			c++
		}
	}
	return c
}

// kinds returns the first line ("READY=1", "RELOADING=1", …) of each state
// sent from index from on whose first line is one of keep, in order.
func (n *notifyLog) kinds(from int, keep ...string) []string {
	var out []string
	for _, s := range n.snapshot()[from:] {
		first, _, _ := strings.Cut(s, "\n")
		if slices.Contains(keep, first) {
			out = append(out, first)
		}
	}
	return out
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
			t.Fatalf("no sd_notify state %q within 10s; got %q", prefix, n.snapshot())
		}
	}
}

type testEngine struct {
	e       *Engine
	reg     *prometheus.Registry
	notes   *notifyLog
	logs    *observer.ObservedLogs // info and above
	signals chan os.Signal
	done    chan struct{} // closed once Run has returned
	err     error         // what Run returned; read after done
}

// runEngine builds an engine on cfg with opts (Log, Notify, Signals and
// Registry filled in) and runs it on a goroutine until ctx ends or a signal
// stops it. It does not wait for anything.
func runEngine(t *testing.T, ctx context.Context, cfg *config.Config, opts Options) *testEngine {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	te := &testEngine{reg: prometheus.NewRegistry(), notes: newNotifyLog(), logs: logs,
		signals: make(chan os.Signal, 4), done: make(chan struct{})}
	opts.Log = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel),
		zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) })))
	opts.Notify, opts.Signals, opts.Registry = te.notes.notify, te.signals, te.reg
	e, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	te.e = e
	go func() {
		defer close(te.done)
		te.err = e.Run(ctx)
	}()
	return te
}

// launchEngine runs an engine with real processes (outside a bubble) and
// waits (bounded) for READY=1.
func launchEngine(t *testing.T, ctx context.Context, cfg *config.Config, opts Options) *testEngine {
	t.Helper()
	te := runEngine(t, ctx, cfg, opts)
	te.notes.waitPrefix(t, "READY=1")
	return te
}

// stop sends SIGTERM and waits (bounded; on the fake clock inside a
// bubble) for Run to return nil.
func (te *testEngine) stop(t *testing.T) {
	t.Helper()
	te.signals <- syscall.SIGTERM
	select {
	case <-te.done:
		if te.err != nil {
			t.Fatalf("Run: got %v, want nil", te.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("engine did not stop within 15s of SIGTERM")
	}
}

func (te *testEngine) runs(t testing.TB, job, result string) float64 {
	return promtest.Value(t, te.e.metrics, "cronlock_runs_total", "job", job, "result", result)
}

func (te *testEngine) running(t testing.TB, job string) float64 {
	return promtest.Value(t, te.e.metrics, "cronlock_job_running", "job", job)
}

// logged counts the log entries (info and above) with message msg.
func (te *testEngine) logged(msg string) int { return te.logs.FilterMessage(msg).Len() }

// wantRuns checks the number of successful runs of job.
func (te *testEngine) wantRuns(t *testing.T, job string, want float64, why string) {
	t.Helper()
	if got := te.runs(t, job, "success"); got != want {
		t.Errorf("successful runs of %s: got %v, want %v (%s)", job, got, want, why)
	}
}

const oneJob = `
node: {shutdown_timeout: 5s}
jobs:
  - name: a
    schedule: "* * * * * *"
    command: "exit 0"
`

// READY=1 comes first; STOPPING=1 is sent when the shutdown begins
// (sd_notify(3)), while a run is still going, not when the process ends.
func TestEngine_NotifyReadyFirstStoppingWhenShutdownBegins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, `
node: {shutdown_timeout: 10s}
jobs:
  - name: a
    schedule: "* * * * * *"
    command: "sleep 2s"
`)
		te := startInBubble(t, context.Background(), cfg, Options{})
		advance(1250 * time.Millisecond) // the slot at 1s started a run that lasts until 3s
		if got := te.running(t, "a"); got != 1 {
			t.Fatalf("job_running of a at 1.25s: got %v, want 1", got)
		}
		te.signals <- syscall.SIGTERM
		synctest.Wait()
		const stopping = "STOPPING=1\nSTATUS=shutting down"
		if got := te.notes.count(stopping); got != 1 {
			t.Fatalf("%q sent %d times once the shutdown began, want 1; states %q", stopping, got, te.notes.snapshot())
		}
		advance(1500 * time.Millisecond) // 2.75s: the run still going
		if te.returned() {
			t.Fatal("Run returned before the run ended; want the shutdown to wait for it")
		}
		advance(500 * time.Millisecond) // 3.25s: the run ended at 3s
		if !te.returned() {
			t.Fatal("Run had not returned 0.25s after the last run ended")
		}
		if te.err != nil {
			t.Fatalf("Run: got %v, want nil", te.err)
		}
		te.wantRuns(t, "a", 1, "the shutdown waits for the run")
		if got := te.notes.count(stopping); got != 1 {
			t.Errorf("%q sent %d times in all, want 1", stopping, got)
		}
		if first := te.notes.snapshot()[0]; !strings.HasPrefix(first, "READY=1") {
			t.Errorf("first state: got %q, want READY=1", first)
		}
	})
}

// SIGHUP with a broken config keeps the old jobs running; with a new job
// added, that job starts firing. RELOADING=1 then READY=1 each time.
func TestEngine_ReloadKeepsOldConfigOnErrorAndAddsJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		te := startInBubble(t, context.Background(), parseConfig(t, oneJob), Options{Reload: reloadFromFile(path)})
		defer te.stop(t)
		advance(1250 * time.Millisecond)
		te.wantRuns(t, "a", 1, "the slot at 1s")

		if err := os.WriteFile(path, []byte(oneJob+"    timeout: 300\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		mark := len(te.notes.snapshot())
		te.signals <- syscall.SIGHUP
		synctest.Wait()
		if got := te.notes.kinds(mark, "RELOADING=1", "READY=1"); !slices.Equal(got, []string{"RELOADING=1", "READY=1"}) {
			t.Errorf("states around the rejected reload: got %q, want RELOADING=1 then READY=1", got)
		}
		if got := te.logged("reload rejected; keeping the running configuration"); got != 1 {
			t.Errorf("reload rejections logged: got %d, want 1", got)
		}
		advance(2 * time.Second) // 3.25s
		te.wantRuns(t, "a", 3, "the slots at 2s and 3s, after the rejected reload")

		added := oneJob + "  - name: b\n    schedule: \"* * * * * *\"\n    command: \"exit 0\"\n"
		if err := os.WriteFile(path, []byte(added), 0o600); err != nil {
			t.Fatal(err)
		}
		mark = len(te.notes.snapshot())
		te.signals <- syscall.SIGHUP
		synctest.Wait()
		if got := te.notes.kinds(mark, "RELOADING=1", "READY=1"); !slices.Equal(got, []string{"RELOADING=1", "READY=1"}) {
			t.Errorf("states around the reload: got %q, want RELOADING=1 then READY=1", got)
		}
		if got := te.logged("configuration reloaded"); got != 1 {
			t.Errorf("reloads logged: got %d, want 1", got)
		}
		te.wantRuns(t, "b", 0, "b's first slot is at 4s")
		advance(time.Second) // 4.25s
		te.wantRuns(t, "b", 1, "its slot at 4s")
		te.wantRuns(t, "a", 4, "a keeps firing through the reload")
	})
}

// Removing a job on reload stops its firing and drops its series.
func TestEngine_ReloadRemovesJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		two := oneJob + "  - name: b\n    schedule: \"* * * * * *\"\n    command: \"exit 0\"\n"
		te := startInBubble(t, context.Background(), parseConfig(t, two),
			Options{Reload: func() (*config.Config, error) { return parseConfig(t, oneJob), nil }})
		defer te.stop(t)
		advance(1250 * time.Millisecond)
		te.wantRuns(t, "b", 1, "the slot at 1s")
		mark := len(te.notes.snapshot())
		te.signals <- syscall.SIGHUP
		synctest.Wait()
		if got := te.notes.kinds(mark, "RELOADING=1", "READY=1"); !slices.Equal(got, []string{"RELOADING=1", "READY=1"}) {
			t.Errorf("states around the reload: got %q, want RELOADING=1 then READY=1", got)
		}
		advance(2 * time.Second) // 3.25s
		te.wantRuns(t, "a", 3, "a keeps firing: slots at 1s, 2s, 3s")
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
	})
}

// The watchdog pings only after the scheduler loop answered a probe: with
// WATCHDOG_USEC=200ms, every 100ms.
func TestEngine_WatchdogPingsWhileSchedulerAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		te := startInBubble(t, context.Background(), parseConfig(t, oneJob),
			Options{Environ: []string{"WATCHDOG_USEC=200000"}})
		advance(250 * time.Millisecond)
		if got := te.notes.count("WATCHDOG=1"); got != 2 {
			t.Errorf("WATCHDOG=1 sent %d times in 250ms, want 2 (every 100ms)", got)
		}
		advance(time.Second)
		if got := te.notes.count("WATCHDOG=1"); got != 12 {
			t.Errorf("WATCHDOG=1 sent %d times in 1.25s, want 12 (every 100ms)", got)
		}
		te.stop(t)
	})
}

// While the ticker loop is stuck, the watchdog's probes go unanswered: no
// WATCHDOG=1 is sent (each miss is logged), so systemd would restart the
// daemon. Once the loop runs again, the pings resume. The loop is stuck
// through Options.Now (stuckClock), which the ticker reads, and so does
// the job set's audit of missed occurrences (actors.Auditor.Now, every
// second): the probe answers from the ticker loop only, so the stuck
// audit changes nothing the watchdog sees.
func TestEngine_WatchdogWithholdsPingWhileTickerStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const withheld = "scheduler loop did not answer the liveness probe; withholding watchdog ping"
		clock := &stuckClock{}
		// WATCHDOG_USEC=2.6s: a probe every 1.3s with a 650ms timeout, so
		// no probe is due at a whole second, when the ticker wakes.
		te := startInBubble(t, context.Background(), parseConfig(t, oneJob),
			Options{Now: clock.now, Environ: []string{"WATCHDOG_USEC=2600000"}})
		t.Cleanup(clock.unstick) // runs before the engine's cleanup
		advance(1500 * time.Millisecond)
		if got := te.notes.count("WATCHDOG=1"); got != 1 {
			t.Fatalf("WATCHDOG=1 sent %d times by 1.5s, want 1 (the probe at 1.3s)", got)
		}
		te.wantRuns(t, "a", 1, "the slot at 1s")

		clock.stick()
		advance(time.Second) // 2.5s: the ticker woke for the slot at 2s and hangs reading the clock
		if got := clock.blocked(); got != 2 {
			t.Fatalf("callers blocked on the stuck clock at 2.5s: got %d, want 2 (the ticker loop and the job set's audit)", got)
		}
		advance(3900 * time.Millisecond) // 6.4s: probes at 2.6s, 3.9s and 5.2s timed out
		if got := te.notes.count("WATCHDOG=1"); got != 1 {
			t.Errorf("WATCHDOG=1 sent %d times by 6.4s, want still 1: none while the ticker is stuck", got)
		}
		if got := te.logged(withheld); got != 3 {
			t.Errorf("withheld pings logged by 6.4s: got %d, want 3 (probes at 2.6s, 3.9s, 5.2s)", got)
		}
		te.wantRuns(t, "a", 1, "no slot fires while the ticker is stuck")

		clock.unstick()
		synctest.Wait()
		te.wantRuns(t, "a", 2, "the ticker resumes and fires the latest due slot, 6s")
		advance(time.Second) // 7.4s: the probe at 6.5s was answered
		if got := te.notes.count("WATCHDOG=1"); got != 2 {
			t.Errorf("WATCHDOG=1 sent %d times by 7.4s, want 2: pings resume once the ticker runs", got)
		}
		advance(1300 * time.Millisecond) // 8.7s: and the probe at 7.8s
		if got := te.notes.count("WATCHDOG=1"); got != 3 {
			t.Errorf("WATCHDOG=1 sent %d times by 8.7s, want 3", got)
		}
		if got := te.logged(withheld); got != 3 {
			t.Errorf("withheld pings logged by 8.7s: got %d, want still 3", got)
		}
		te.stop(t)
	})
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
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, `
jobs:
  - name: never
    schedule: "0 0 1 1 *"
    command: "exit 0"
`)
		te := startInBubble(t, context.Background(), cfg, Options{})
		defer te.stop(t)
		for _, name := range []string{"cronlock_runs_total", "cronlock_skips_total", "cronlock_last_success_timestamp_seconds",
			"cronlock_job_running", "cronlock_lease_lost_total", "cronlock_hook_failures_total"} {
			if n, err := testutil.GatherAndCount(te.reg, name); err != nil || n == 0 {
				t.Errorf("%s: got %d series (err %v), want > 0 before any run", name, n, err)
			}
		}
	})
}
