package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestPartition_CutNodeKilledBeforeLeaseExpires is issue 4, item 1: node A
// runs a 20 s job and is then cut off from Redis (a proxy blackholes its
// connections) with lock_ttl 6s. A must declare the lease lost at its local
// deadline (send time of the last successful renewal + TTL − margin, the
// margin being TTL/5 clamped to [500 ms, TTL/2]; docs/protocol.md) and kill
// the run; the lease then expires on the server and only after that does
// another node claim a slot. The job records its own intervals, which must
// never overlap.
//
// Not parallel: A's run must be dead before the lease expires on the
// server, and the time for that is the margin, 1.2 s here, in which A must
// kill the run's group and log it and the test's lease poll must still
// see the lease held; CPU load from parallel tests eats into both.
func TestPartition_CutNodeKilledBeforeLeaseExpires(t *testing.T) {
	srv := redistest.Start(t)
	px := redistest.NewProxy(t, srv.Addr())
	c := redisClient(t, srv.Addr())
	ledger := newLedger(t)
	const ttl = 6 * time.Second
	cfg := redisConfig(srv.Addr(), map[string]any{"name": "long", "schedule": "* * * * * *",
		"command": intervalCommand(ledger, 20*time.Second), "timeout": "30s", "lock_ttl": "6s", "kill_grace": "1s"})
	cfg["node"] = map[string]any{"shutdown_timeout": "1s"}
	cfgFile := writeConfig(t, cfg)

	// A starts alone, so it is the node that claims the first slot.
	nodes, _ := startNodes(t, cfgFile, nodeSpec{id: "A", env: []string{"CRONLOCK_REDIS_ADDRESS=" + px.Addr()}})
	a := nodes[0]
	aStarted := a.WaitLog(10*time.Second, `"run started" of long`, func(e logEntry) bool { return e.is("run started", "long") })
	others, _ := startNodes(t, cfgFile, nodeSpec{id: "B"}, nodeSpec{id: "C"})
	if v := get(t, c, leaseKey("long")); !strings.HasPrefix(v, "A:") {
		t.Fatalf("lease of long before the cut: got %q, want held by A", v)
	}

	px.Cut()
	cutAt := time.Now()
	// Poll the lease: lastHeld is a moment at which it still existed as A's
	// (the GET was sent after it), goneAt one after which it did not.
	var lastHeld, goneAt time.Time
	waitFor(t, ttl+3*time.Second, "the lease of long to expire on the server", func() bool {
		sent := time.Now()
		if strings.HasPrefix(get(t, c, leaseKey("long")), "A:") {
			lastHeld = sent
			return false
		}
		goneAt = time.Now()
		return true
	})
	aFinished := a.WaitLog(time.Second, `"run finished" of long on A`, func(e logEntry) bool { return e.is("run finished", "long") })
	// The log's timestamp has millisecond resolution, truncated.
	aEnd := aFinished.Time().Add(time.Millisecond)

	if got := aFinished.Str("result"); got != "lock_lost" {
		t.Errorf("result of A's run: got %q, want lock_lost", got)
	}
	if len(logsOf(a, "lease lost", "long")) != 1 {
		t.Errorf(`A's "lease lost" logs for long: got %d, want 1`, len(logsOf(a, "lease lost", "long")))
	}
	if d := aEnd.Sub(cutAt); d >= ttl {
		t.Errorf("A's run ended %v after the cut: want before lock_ttl %v", d, ttl)
	}
	if !aEnd.Before(lastHeld) {
		t.Errorf("A's run ended at %s, lease last seen held at %s: want the run dead while the lease still existed",
			aEnd.Format("15:04:05.000"), lastHeld.Format("15:04:05.000"))
	}
	if live := liveGroupMembers(t, int(aStarted.Int("pid"))); len(live) > 0 {
		t.Errorf("A's run's process group after run finished: got live members %v, want none", live)
	}

	survivor := waitSurvivorRun(t, others, goneAt.Add(3*time.Second))
	stopAll(t, 10*time.Second, append(nodes, others...)...)

	runs := readIntervals(t, ledger)
	checkPartitionIntervals(t, runs, aEnd, lastHeld, survivor)
	t.Logf("cut at %s; A's lease lost and run ended +%v; lease last held +%v, gone by +%v; %s started slot %d +%v",
		cutAt.Format("15:04:05.000"), aEnd.Sub(cutAt).Round(time.Millisecond), lastHeld.Sub(cutAt).Round(time.Millisecond),
		goneAt.Sub(cutAt).Round(time.Millisecond), survivor.Str("node"), survivor.Slot(),
		survivor.Time().Sub(cutAt).Round(time.Millisecond))
}

// waitSurvivorRun waits until one of nodes logs "run started" of long and
// returns that entry with a "node" field added.
func waitSurvivorRun(t *testing.T, nodes []*node, until time.Time) logEntry {
	t.Helper()
	var found logEntry
	waitFor(t, time.Until(until), "a run of long on B or C", func() bool {
		for _, n := range nodes {
			if got := logsOf(n, "run started", "long"); len(got) > 0 {
				found = got[0]
				found["node"] = n.name
				return true
			}
		}
		return false
	})
	return found
}

// checkPartitionIntervals checks the job's own record: A ran first and was
// killed (the trap saw SIGTERM); the next run is the survivor's, started
// after A's run ended and after the lease was last seen held; no two runs
// overlap.
func checkPartitionIntervals(t *testing.T, runs []interval, aEnd, lastHeld time.Time, survivor logEntry) {
	t.Helper()
	if len(runs) < 2 {
		t.Fatalf("ledger: got %d runs %+v, want A's and the survivor's", len(runs), runs)
	}
	a, next := runs[0], runs[1]
	if a.Node != "A" || a.How != "killed" || a.End.After(aEnd) {
		t.Errorf("first run: got %+v, want A's, ended by SIGTERM (\"killed\") by %s", a, aEnd.Format("15:04:05.000"))
	}
	if next.Node != survivor.Str("node") || next.Slot != survivor.Slot() {
		t.Errorf("second run: got %s slot %d, want %s slot %d", next.Node, next.Slot, survivor.Str("node"), survivor.Slot())
	}
	if !next.Start.After(aEnd) || !next.Start.After(lastHeld) {
		t.Errorf("survivor's run started at %s: want after A's run ended (%s) and after the lease was last held (%s)",
			next.Start.Format("15:04:05.000"), aEnd.Format("15:04:05.000"), lastHeld.Format("15:04:05.000"))
	}
	for i := 1; i < len(runs); i++ {
		prev, cur := runs[i-1], runs[i]
		end := prev.End
		if prev.Node == "A" {
			end = aEnd // the whole process group is dead only when the daemon logs the run finished
		}
		if end.IsZero() || cur.Start.Before(end) {
			t.Errorf("run of slot %d on %s started at %s before the run of slot %d on %s ended (%s): want no overlap",
				cur.Slot, cur.Node, cur.Start.Format("15:04:05.000"), prev.Slot, prev.Node, end.Format("15:04:05.000"))
		}
	}
}
