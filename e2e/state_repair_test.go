package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// scrapeSeries reads one sample of /metrics at listen: the value of the
// line `series value`, -1 when absent.
func scrapeSeries(t *testing.T, listen, series string) float64 {
	t.Helper()
	_, body := httpGet(t, "http://"+listen+"/metrics")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %q: %v", series, v, err)
			}
			return f
		}
	}
	return -1
}

// TestStateRepair_NodeJoinsAfterRedisLostState: two nodes run a job every
// 5 s with catchup_window; Redis loses its state (FLUSHALL) and a third
// node starts at once. Its catch-up of the latest slot has nothing to
// compare against (it remembers nothing, Redis holds no record, and the
// other nodes have not claimed since), so it is refused
// (outside_claim_window: the ledger began after that slot,
// docs/protocol-v2.md R2) instead of running that slot a second time.
func TestStateRepair_NodeJoinsAfterRedisLostState(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	// Every 5 s: the third node must start and send its catch-up claim
	// before the others' next claim writes the state again. With a slot
	// every second it had 0.7 s for that, which a loaded 2-core machine
	// did not always give it (the test then waited for a skip that could
	// not come any more).
	job := map[string]any{"name": "tick", "schedule": "*/5 * * * * *", "command": ledgerCommand(ledger, ""),
		"catchup_window": "30s"}
	cfg := writeConfig(t, redisConfig(srv.Addr(), job))
	nodes, ready := startNodes(t, cfg, nodeSpec{id: "n1"}, nodeSpec{id: "n2"})
	// 300 ms after a slot that came at least 5.7 s after both were ready:
	// it ran, and the next is 4.7 s away.
	flushAt := nextPhaseOf(ready.Add(6*time.Second), 5*time.Second, 300*time.Millisecond)
	sleepUntil(flushAt)
	srv.Do("FLUSHALL")
	joined, _ := startNodes(t, cfg, nodeSpec{id: "n3"})
	n3 := joined[0]
	caught := n3.WaitLog(10*time.Second, "n3's catch-up claim", func(e logEntry) bool {
		return e.Msg() == "catch-up: claiming the latest missed slot"
	})
	sleepUntil(time.Now().Add(2 * time.Second))
	all := append(nodes, n3)
	stopAll(t, 10*time.Second, all...)

	ran := slotsByJob(readLedger(t, ledger))["tick"]
	checkOncePerSlot(t, all, "tick", ran, nil)
	if by := ran[caught.Slot()]; len(by) != 1 {
		t.Errorf("slot %d (caught up by n3 after the flush): got runs on %v, want exactly one (before the flush)", caught.Slot(), by)
	}
	refused := false
	for _, e := range logsOf(n3, "slot skipped", "tick") {
		refused = refused || e.Slot() == caught.Slot() && e.Str("reason") == "outside_claim_window"
	}
	if !refused {
		t.Errorf("n3: no outside_claim_window skip of the caught-up slot %d%s", caught.Slot(), describeSlot(all, "tick", caught.Slot()))
	}
}
