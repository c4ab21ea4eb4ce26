package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/redis/rueidis"
)

// redisClient is a plain rueidis client for inspecting keys; a cleanup
// closes it.
func redisClient(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatalf("redis client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// leaseKey is the lease key of job under the default key prefix.
func leaseKey(job string) string { return "cronlock:job:" + job }

// pttl returns PTTL of key in milliseconds (-2: no such key).
func pttl(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ms, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return ms
}

// get returns the value of key, "" when absent.
func get(t *testing.T, c rueidis.Client, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// waitKeyGone polls until key no longer exists (the release follows the
// "run finished" log by one round trip).
func waitKeyGone(t *testing.T, c rueidis.Client, key string) {
	t.Helper()
	waitFor(t, 2*time.Second, key+" to be deleted", func() bool { return pttl(t, c, key) == -2 })
}

func TestLease_KeyGoneAfterRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := redisClient(t, srv.Addr())
	_, sched := nextSecondWithin(2 * time.Second)
	// "long" outlives its lock_ttl: its lease exists throughout only if it
	// is renewed.
	cfg := redisConfig(srv.Addr(),
		map[string]any{"name": "quick", "schedule": sched, "command": "true", "lock_ttl": "3s"},
		map[string]any{"name": "long", "schedule": sched, "command": "sleep 4", "lock_ttl": "3s"})
	cfg["node"] = map[string]any{"id": "solo", "shutdown_timeout": "10s"}
	n := startNode(t, writeConfig(t, cfg))

	n.WaitLog(10*time.Second, `"run finished" of quick`, func(e logEntry) bool { return e.is("run finished", "quick") })
	waitKeyGone(t, c, leaseKey("quick"))

	started := n.WaitLog(time.Second, `"run started" of long`, func(e logEntry) bool { return e.is("run started", "long") })
	samples, minTTL := 0, int64(3000)
	var lastSample time.Time
	for {
		ms, value, at := pttl(t, c, leaseKey("long")), get(t, c, leaseKey("long")), time.Now()
		if hasLog(n, "run finished", "long") {
			break // the sample may be from after the run
		}
		samples, minTTL, lastSample = samples+1, min(minTTL, ms), at
		if ms <= 0 || ms > 3000 {
			t.Fatalf("lease of long %v after run started: got PTTL %d ms, want 0 < PTTL ≤ lock_ttl 3000 ms", at.Sub(started.Time()).Round(time.Millisecond), ms)
		}
		if !strings.HasPrefix(value, "solo:") {
			t.Errorf("lease value of long: got %q, want \"solo:<uuid>\"", value)
		}
		time.Sleep(100 * time.Millisecond) // the sampling period
	}
	if held := lastSample.Sub(started.Time()); held < 3500*time.Millisecond {
		t.Errorf("lease of long sampled until %v after run started: got %v, want past lock_ttl 3s (renewed)", held, held)
	}
	waitKeyGone(t, c, leaseKey("long"))
	t.Logf("long: %d samples during the run, min PTTL %d ms", samples, minTTL)
	stopAll(t, 10*time.Second, n)
}

func hasLog(n *node, msg, job string) bool {
	for _, e := range n.Logs() {
		if e.is(msg, job) {
			return true
		}
	}
	return false
}

func TestShutdown_WaitsForRunningJob(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := redisClient(t, srv.Addr())
	ledger := filepath.Join(t.TempDir(), "ledger")
	slot, sched := nextSecondWithin(2 * time.Second)
	cfg := redisConfig(srv.Addr(), map[string]any{"name": "sleeper", "schedule": sched, "command": ledgerCommand(ledger, "sleep 3")})
	n := startNode(t, writeConfig(t, cfg), withNodeID("solo"))

	n.WaitLog(10*time.Second, `"run started"`, func(e logEntry) bool { return e.is("run started", "sleeper") })
	n.Signal(syscall.SIGTERM)
	if code := n.Wait(15 * time.Second); code != 0 {
		t.Errorf("exit code after SIGTERM during a run: got %d, want 0", code)
	}

	runs := readLedger(t, ledger)
	if len(runs) != 1 || runs[0].Slot != slot || runs[0].End.Sub(runs[0].Start) < 3*time.Second {
		t.Errorf("ledger after shutdown: got %+v, want one completed 3 s run of slot %d", runs, slot)
	}
	if !hasLog(n, "run finished", "sleeper") || !hasLog(n, "shutdown complete", "") {
		t.Errorf("logs: got run finished %v, shutdown complete %v; want both", hasLog(n, "run finished", "sleeper"), hasLog(n, "shutdown complete", ""))
	}
	for _, e := range n.Logs() {
		if e.is("run finished", "sleeper") && e.Str("result") != "success" {
			t.Errorf("run result: got %q, want success", e.Str("result"))
		}
	}
	// The daemon releases the lease before it exits: no polling.
	if ms := pttl(t, c, leaseKey("sleeper")); ms != -2 {
		t.Errorf("lease key after exit: got PTTL %d, want -2 (no key)", ms)
	}
}

func TestShutdown_KillsAfterShutdownTimeout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := redisClient(t, srv.Addr())
	_, sched := nextSecondWithin(2 * time.Second)
	// The whole run ignores SIGTERM, so only the SIGKILL after kill_grace
	// ends it: the daemon needs shutdown_timeout + kill_grace.
	cfg := redisConfig(srv.Addr(), map[string]any{"name": "sleeper", "schedule": sched,
		"command": "trap '' TERM; sleep 100", "kill_grace": "1s"})
	cfg["node"] = map[string]any{"id": "solo", "shutdown_timeout": "1s"}
	n := startNode(t, writeConfig(t, cfg))

	started := n.WaitLog(10*time.Second, `"run started"`, func(e logEntry) bool { return e.is("run started", "sleeper") })
	sent := time.Now()
	n.Signal(syscall.SIGTERM)
	code := n.Wait(10 * time.Second)
	took := time.Since(sent)

	if code != 0 {
		t.Errorf("exit code: got %d, want 0", code)
	}
	if took < time.Second || took > 5*time.Second {
		t.Errorf("SIGTERM to exit: got %v, want between shutdown_timeout 1s and 1s + kill_grace 1s + 3s slack", took.Round(time.Millisecond))
	}
	if live := liveGroupMembers(t, int(started.Int("pid"))); len(live) > 0 {
		t.Errorf("run's process group after exit: got live members %v, want none", live)
	}
	if ms := pttl(t, c, leaseKey("sleeper")); ms != -2 {
		t.Errorf("lease key after exit: got PTTL %d, want -2 (no key)", ms)
	}
	t.Logf("SIGTERM to exit: %v", took.Round(time.Millisecond))
}
