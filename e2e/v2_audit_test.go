package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// missedWarning is the start of the audit's warning (docs/protocol.md, R8).
const missedWarning = "occurrences missed"

// TestV2_Audit_AllNodesDownAcrossThreeSlots is issue 32, "What it must
// show" 6: both nodes of a cluster are stopped across 3 slots of a
// `*/5 * * * * *` job and started again. The ledger (read from Redis: the
// hash cronlock:occ:JOB) records the 3 slots missed with a reason, the
// slot before and the slot after as ran; cronlock_occurrences_missed_total
// summed over the nodes says 3; one "occurrences missed" warning in the
// whole cluster names the 3; none of them ran.
//
// The nodes come back once the third slot's answer window (1 s:
// node.max_clock_skew) and the audit's grace (2 s) have passed, and 1.7 s
// before the next slot, so that the first audit after the start finds all
// three due: the audit records what has become certain, so nodes back
// sooner would record the last slot in a second call (a second warning).
func TestV2_Audit_AllNodesDownAcrossThreeSlots(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := redisClient(t, srv.Addr())
	out := newLedger(t)
	job := map[string]any{"name": "five", "schedule": "*/5 * * * * *", "command": tokenCommand(out, "")}
	cfg := redisConfig(srv.Addr(), job)
	cfg["node"] = map[string]any{"shutdown_timeout": "10s", "max_clock_skew": "1s"}
	cfgFile := writeConfig(t, cfg)
	listen := map[string]string{"n1": freeAddr(t), "n2": freeAddr(t)}
	specs := []nodeSpec{{id: "n1", env: []string{"CRONLOCK_HTTP_LISTEN=" + listen["n1"]}},
		{id: "n2", env: []string{"CRONLOCK_HTTP_LISTEN=" + listen["n2"]}}}
	nodes, ready := startNodes(t, cfgFile, specs...)
	s0 := ceilSecond(ready) + 1
	s0 += (5 - s0%5) % 5
	waitFor(t, time.Until(time.Unix(s0+3, 0)), "a run of slot "+time.Unix(s0, 0).Format("15:04:05"), func() bool {
		runs := readTokenRuns(t, out)
		return len(runs) > 0 && runs[len(runs)-1].Slot == s0
	})
	stopAll(t, 10*time.Second, nodes...)
	if now := time.Now(); now.Unix() >= s0+5 {
		t.Fatalf("the nodes stopped at %s, after slot %d: the test overslept", now.Format("15:04:05.000"), s0+5)
	}
	missed := []int64{s0 + 5, s0 + 10, s0 + 15}

	sleepUntil(time.Unix(s0+18, 300_000_000)) // down across the three slots: that is the test
	restarted, back := startNodes(t, cfgFile, specs...)
	if back.Unix() >= s0+20 {
		t.Fatalf("the nodes were back at %s, after slot %d: the test overslept", back.Format("15:04:05.000"), s0+20)
	}
	waitFor(t, 8*time.Second, "a run of slot "+time.Unix(s0+20, 0).Format("15:04:05"), func() bool {
		runs := readTokenRuns(t, out)
		return len(runs) > 0 && runs[len(runs)-1].Slot == s0+20
	})
	// The audits after the start (every second on each node) are done.
	sleepUntil(time.Unix(s0+21, 500_000_000))

	occ := readOccurrences(t, c, "five")
	for _, s := range missed {
		o, ok := slotRecord(occ, s)
		if !ok || o.Status != "missed" || o.Reason == "" {
			t.Errorf("slot %d: record %+v (found %v), want missed with a reason%s", s, o, ok, describeRecords(occ))
		}
	}
	for _, s := range []int64{s0, s0 + 20} {
		if o, ok := slotRecord(occ, s); !ok || o.Status != "ran" {
			t.Errorf("slot %d: record %+v (found %v), want ran%s", s, o, ok, describeRecords(occ))
		}
	}

	total := 0.0
	for _, n := range restarted {
		if v := scrapeSeries(t, listen[n.name], `cronlock_occurrences_missed_total{job="five"}`); v > 0 {
			total += v
		}
	}
	if total != 3 {
		t.Errorf("cronlock_occurrences_missed_total{job=\"five\"} summed over the nodes: got %v, want 3", total)
	}
	stopAll(t, 10*time.Second, restarted...)

	var warnings []logEntry
	for _, n := range append(nodes, restarted...) {
		for _, e := range n.Logs() {
			if strings.HasPrefix(e.Msg(), missedWarning) {
				warnings = append(warnings, e)
			}
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("%q warnings in the cluster: got %d %v, want exactly 1", missedWarning, len(warnings), warnings)
	}
	w := warnings[0]
	if w.Str("job") != "five" || w.Str("level") != "warn" || w.Int("missed") != 3 || w.Int("first_slot") != missed[0] ||
		w.Int("last_slot") != missed[2] || w.Str("reason") == "" {
		t.Errorf("warning: got %v, want job five, level warn, missed 3, first_slot %d, last_slot %d and a reason", w, missed[0], missed[2])
	}
	for _, r := range readTokenRuns(t, out) {
		if r.Slot >= missed[0] && r.Slot <= missed[2] {
			t.Errorf("run %v: a slot while every node was down ran", r)
		}
	}
	t.Logf("down across slots %v; back at %s; records: %s; warning: %s", missed, back.Format("15:04:05.000"),
		describeRecords(occ), w.Str("reason"))
}
