package e2e

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestWindow_FiresOnlyInside is issue 13's active window on two real
// daemons: a per-second job with a 3 s window runs exactly the 3 slots in
// [active_from, active_until), each once in the cluster, and each node
// reports once that the window has no slot left.
func TestWindow_FiresOnlyInside(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := filepath.Join(t.TempDir(), "ledger")
	from := time.Now().Add(4 * time.Second).Truncate(time.Second)
	until := from.Add(3 * time.Second)
	job := map[string]any{"name": "win", "schedule": "* * * * * *", "command": ledgerCommand(ledger, ""), "timeout": "10s",
		"active_from": from.UTC().Format(time.RFC3339), "active_until": until.UTC().Format(time.RFC3339)}
	nodes, _ := startCluster(t, writeConfig(t, redisConfig(srv.Addr(), job)), 0, "n1", "n2")
	const ended = "no fire time left before active_until; the job does not fire any more"
	for _, n := range nodes {
		n.WaitLog(10*time.Second, ended, func(e logEntry) bool { return e.is(ended, "win") })
	}
	time.Sleep(time.Until(until.Add(1500 * time.Millisecond))) // past active_until: nothing more may run
	stopAll(t, 15*time.Second, nodes...)

	ran := slotsByJob(readLedger(t, ledger))["win"]
	want := []int64{from.Unix(), from.Unix() + 1, from.Unix() + 2}
	checkOncePerSlot(t, nodes, "win", ran, want)
	for slot := range ran {
		if !slices.Contains(want, slot) {
			t.Errorf("slot %d ran, outside the window [%d, %d)", slot, from.Unix(), until.Unix())
		}
	}
	for _, n := range nodes {
		count := 0
		for _, e := range n.Logs() {
			if e.is(ended, "win") {
				count++
				if e.Str("level") != "info" {
					t.Errorf("%s: window end logged at %q, want info", n.name, e.Str("level"))
				}
			}
		}
		if count != 1 {
			t.Errorf("%s: window end logged %d times, want once", n.name, count)
		}
	}
}
