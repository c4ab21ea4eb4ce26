package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestReload_BrokenConfigKeepsJobsNewJobFires is issue 4, item 5: SIGHUP
// with a config that fails validation, then with one that is not even JSON,
// keeps the daemon running its jobs on the old config (every problem
// logged); SIGHUP with a valid config that adds a job makes that job fire.
// Throughout, the existing job runs every slot exactly once: reloads never
// disturb it.
func TestReload_BrokenConfigKeepsJobsNewJobFires(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	tick := map[string]any{"name": "tick", "schedule": "* * * * * *", "command": ledgerCommand(ledger, "")}
	tock := map[string]any{"name": "tock", "schedule": "* * * * * *", "command": ledgerCommand(ledger, "")}
	cfgPath := filepath.Join(t.TempDir(), "cronlock.json")
	writeConfigAt(t, cfgPath, redisConfig(srv.Addr(), tick))
	nodes, ready := startNodes(t, cfgPath, nodeSpec{id: "solo"})
	n := nodes[0]
	waitLedgerSlotAfter(t, ledger, "tick", time.Now().Add(time.Second))

	// Two problems: an unknown key and a bad schedule in the added job.
	broken := redisConfig(srv.Addr(), tick, map[string]any{"name": "tock", "schedule": "61 * * * * *", "command": "true"})
	broken["jbos"] = []any{}
	writeConfigAt(t, cfgPath, broken)
	rejectedReload(t, n, 2)
	waitLedgerSlotAfter(t, ledger, "tick", time.Now().Add(time.Second))

	data, _ := os.ReadFile(cfgPath)
	writeFileAtomic(t, cfgPath, data[:len(data)/2]) // truncated: not JSON
	rejectedReload(t, n, 0)
	waitLedgerSlotAfter(t, ledger, "tick", time.Now().Add(time.Second))

	writeConfigAt(t, cfgPath, redisConfig(srv.Addr(), tick, tock))
	hupAt := time.Now()
	n.Signal(syscall.SIGHUP)
	reloaded := n.WaitLog(5*time.Second, `"configuration reloaded"`, func(e logEntry) bool { return e.Msg() == "configuration reloaded" }).Time()
	waitLedgerSlotAfter(t, ledger, "tock", time.Now().Add(2*time.Second))
	stopAt := time.Now()
	stopAll(t, 10*time.Second, n)

	byJob := slotsByJob(readLedger(t, ledger))
	checkOncePerSlot(t, nodes, "tick", byJob["tick"], slotsBetween(ceilSecond(ready)+1, stopAt.Unix()-1, 1))
	checkOncePerSlot(t, nodes, "tock", byJob["tock"], slotsBetween(ceilSecond(reloaded), stopAt.Unix()-1, 1))
	for s := range byJob["tock"] {
		if s <= hupAt.Unix() {
			t.Errorf("tock ran slot %d, want only slots after the SIGHUP that added it (%s)", s, hupAt.Format("15:04:05.000"))
		}
	}
	t.Logf("tick ran %d slots, tock %d (added at %s)", len(byJob["tick"]), len(byJob["tock"]), reloaded.Format("15:04:05.000"))
}

// rejectedReload sends SIGHUP and waits for the rejection, logged as one
// error line that lists every problem; it checks that the line lists at
// least problems problems and that the daemon lives, and returns them.
func rejectedReload(t *testing.T, n *node, problems int) []string {
	t.Helper()
	const rejected = "reload rejected; keeping the running configuration"
	before := len(logsOf(n, rejected, ""))
	n.Signal(syscall.SIGHUP)
	waitFor(t, 5*time.Second, `"reload rejected"`, func() bool { return len(logsOf(n, rejected, "")) > before })
	e := logsOf(n, rejected, "")[before]
	list, _ := e["problems"].([]any)
	got := make([]string, 0, len(list))
	for _, p := range list {
		s, _ := p.(string)
		got = append(got, s)
	}
	if len(got) < problems || e.Str("level") != "error" {
		t.Errorf("rejected reload logged at %q with problems %q, want error with at least %d", e.Str("level"), got, problems)
	}
	t.Logf("reload rejected; problems: %s", strings.Join(got, "; "))
	checkNotExited(t, "after a rejected reload", n)
	return got
}

// waitLedgerSlotAfter waits until job has run a slot later than after.
func waitLedgerSlotAfter(t *testing.T, ledger, job string, after time.Time) {
	t.Helper()
	waitFor(t, time.Until(after)+5*time.Second, job+" to run a slot after "+after.Format("15:04:05.000"), func() bool {
		for _, r := range readLedger(t, ledger) {
			if r.Job == job && r.Slot > after.Unix() {
				return true
			}
		}
		return false
	})
}

// TestReload_StormThenTermStops: a SIGHUP storm at a daemon with thousands
// of jobs (each reload takes tens of ms), then SIGTERM: the daemon shuts
// down cleanly. os/signal drops a signal when its channel is full, and the
// SIGTERM after a storm that filled it was lost (the daemon ran on).
func TestReload_StormThenTermStops(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	jobs := make([]map[string]any, 3000)
	for i := range jobs {
		jobs[i] = map[string]any{"name": fmt.Sprintf("idle%04d", i), "schedule": "0 0 0 1 1 *", "command": "true"}
	}
	cfgPath := filepath.Join(t.TempDir(), "cronlock.json")
	writeConfigAt(t, cfgPath, redisConfig(srv.Addr(), jobs...))
	nodes, _ := startNodes(t, cfgPath, nodeSpec{id: "solo"})
	n := nodes[0]
	for range 40 {
		n.Signal(syscall.SIGHUP)
		time.Sleep(5 * time.Millisecond)
	}
	n.Signal(syscall.SIGTERM)
	if code := n.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after the storm and SIGTERM, want 0", code)
	}
	reloads := 0
	for _, e := range n.Logs() {
		if e.Msg() == "configuration reloaded" {
			reloads++
		}
	}
	if reloads == 0 {
		t.Error("no reload for 40 SIGHUPs, want at least the first")
	}
	t.Logf("%d reloads for 40 SIGHUPs", reloads)
}
