package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestClusterTopology_ControlPlaneAndScheduling runs the control-plane
// (issue 12) and scheduling (issue 13) features against a Redis Cluster of
// 3 masters with the default key prefix, so each job's keys carry the job's
// hash tag and the node index and the pending run set their own tags
// (docs/protocol.md, "Redis keys"): `cronlock nodes`, `cronlock run JOB`
// taken through the cluster, an audited pause with -for that lifts itself,
// an `overlap: queue` job whose queued slot runs when the run before it
// ends, and `cronlock backfill`. No call may fail with CROSSSLOT, and every
// key of the new kinds is found where the layout says.
func TestClusterTopology_ControlPlaneAndScheduling(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	manual, tick, queue, bf := newLedger(t), newLedger(t), newLedger(t), newLedger(t)
	cfg := redisConfig("",
		map[string]any{"name": "manual", "schedule": "0 0 1 1 *",
			"command": `echo "$CRONLOCK_NODE_ID $CRONLOCK_TRIGGER" >> ` + shellQuote(manual)},
		map[string]any{"name": "tick", "schedule": "* * * * * *", "command": ledgerCommand(tick, "")},
		// catchup_window: a pending slot still runs after the next slot came
		// due (R7), as it does when a loaded machine stretches a 1.5 s run
		// past two slots; without it each pending slot would then expire.
		map[string]any{"name": "q", "schedule": "* * * * * *", "overlap": "queue", "timeout": "10s",
			"catchup_window": "10s", "command": intervalCommand(queue, 1500*time.Millisecond)},
		map[string]any{"name": "bf", "schedule": "* * * * *",
			"command": ledgerCommand(bf, `test "$CRONLOCK_TRIGGER" = backfill || exit 3`)})
	cfg["redis"] = map[string]any{"addresses": c.Addrs()}
	cfg["node"] = map[string]any{"shutdown_timeout": "10s", "heartbeat_interval": "500ms"}
	cfgFile := writeConfig(t, cfg)
	nodes, ready := startNodes(t, cfgFile, nodeSpec{id: "c1"}, nodeSpec{id: "c2"})
	var stderrs []string
	run := func(args ...string) (string, int) {
		t.Helper()
		out, errs, code := cli(t, cfgFile, args...)
		stderrs = append(stderrs, errs)
		if code != 0 {
			t.Errorf("cronlock %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
		}
		return out + errs, code
	}

	// cronlock nodes: the index and the records, on their own shards.
	waitFor(t, 5*time.Second, "two live nodes", func() bool {
		s := readNodes(t, cfgFile).states()
		return s["c1"] == "live" && s["c2"] == "live"
	})
	if out, _ := run("nodes"); strings.Count(out, " live ") != 2 {
		t.Errorf("cronlock nodes: want a table of 2 live nodes:\n%s", out)
	}
	// A node's record and its job hashes share the node id's slot (one
	// script writes both).
	for _, id := range []string{"c1", "c2"} {
		found := 0
		for _, m := range c.Masters {
			rec, jobs := countKeys(t, m, "cronlock:node:{"+id+"}"), countKeys(t, m, "cronlock:node-jobs:{"+id+"}")
			if rec != jobs {
				t.Errorf("%s: master %s holds %d record and %d job hashes keys; want both or neither", id, m.Addr(), rec, jobs)
			}
			found += rec
		}
		if found != 1 {
			t.Errorf("%s: its record found on %d masters, want 1", id, found)
		}
	}

	// An audited pause with an end: tick is skipped paused, then runs again.
	pausing := time.Now() // the pause takes effect between this and paused, and ends 2 s after it did
	out, _ := run("pause", "tick", "-for", "2s", "-note", "cluster")
	paused := time.Now()
	if !strings.Contains(out, ": cluster") {
		t.Errorf("pause: %q, want the note", out)
	}
	st, _ := run("status", "-json")
	var rows []struct {
		Job    string `json:"job"`
		Paused bool   `json:"paused"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(st[:strings.LastIndex(st, "]")+1])), &rows); err != nil {
		t.Errorf("status -json: %v\n%s", err, st)
	}
	for _, r := range rows {
		if r.Job == "tick" && !r.Paused {
			t.Errorf("status -json: tick not paused:\n%s", st)
		}
	}

	// cronlock run JOB: a request through the cluster, taken by one daemon.
	out, code := run("run", "manual", "-wait", "-timeout", "10s")
	if code != 0 || !strings.Contains(out, "taken by c") {
		t.Errorf("cronlock run manual -wait: exit %d, %q; want 0 and who took it", code, out)
	}
	if l := ledgerLines(t, manual); len(l) != 1 || l[0][1] != "manual" {
		t.Errorf("manual ledger %q: want one manual run", l)
	}

	// cronlock backfill: three past minute slots, each run once.
	end := time.Now().Truncate(time.Minute).Add(-time.Minute)
	start := end.Add(-2 * time.Minute)
	code, bout := backfillCmd(t, cfgFile, "c3", "bf", "-from", start.UTC().Format(time.RFC3339), "-to",
		end.UTC().Format(time.RFC3339))
	if code != 0 || strings.Count(bout, "ran ") != 3 {
		t.Errorf("backfill: exit %d, want 0 and 3 slots ran:\n%s", code, bout)
	}
	if l := ledgerLines(t, bf); len(l) != 3 {
		t.Errorf("backfill ledger: got %d runs, want 3: %q", len(l), l)
	}

	// The pause lifts itself; the queued slots of q ran one after another.
	waitLedgerSlotAfter(t, tick, "tick", paused.Add(2*time.Second))
	sleepUntil(ready.Add(6 * time.Second))
	stopAll(t, 15*time.Second, nodes...)

	// Slots surely inside the pause: after the command returned (paused)
	// and before 2 s from when it was sent (pausing). Measured from paused
	// alone, a command that took half a second on a loaded machine put the
	// first slot after the pause's end inside the window.
	for _, r := range readLedger(t, tick) {
		if r.Slot > paused.Unix() && r.Slot < pausing.Add(2*time.Second).Unix() {
			t.Errorf("tick slot %d ran on %s during the pause", r.Slot, r.Node)
		}
	}
	ev, _ := run("history", "tick", "-events", "-json")
	if !strings.Contains(ev, `"pause"`) || !strings.Contains(ev, "cluster") {
		t.Errorf("history -events: want the pause with its note:\n%s", ev)
	}
	runs := readIntervals(t, queue)
	if len(runs) < 2 {
		t.Fatalf("q: got %d runs, want at least 2: %+v", len(runs), runs)
	}
	for i := 1; i < len(runs); i++ {
		if !runs[i-1].End.IsZero() && runs[i].Start.Before(runs[i-1].End) {
			t.Errorf("q: slot %d started before slot %d ended: two runs at once", runs[i].Slot, runs[i-1].Slot)
		}
	}
	_, queued := slotReasons(nodes, "q")
	ranQueued := 0
	for _, r := range runs {
		if len(queued[r.Slot]) == 1 {
			ranQueued++
		}
	}
	if ranQueued == 0 {
		t.Errorf("q: no queued slot ran (queued %v, runs %+v)", queued, runs)
	}

	// No CROSSSLOT anywhere, and the keys are where the layout says.
	for _, n := range nodes {
		for _, e := range n.Logs() {
			if b, _ := json.Marshal(e); strings.Contains(string(b), "CROSSSLOT") {
				t.Errorf("%s logged a CROSSSLOT error: %s", n.name, b)
			}
		}
	}
	for _, s := range stderrs {
		if strings.Contains(s, "CROSSSLOT") {
			t.Errorf("a command failed with CROSSSLOT: %s", s)
		}
	}
	for _, key := range []string{"cronlock:events:{tick}", "cronlock:occ:{bf}", "cronlock:occidx:{bf}", "cronlock:runstatus:{manual}",
		"cronlock:occ:{q}", "cronlock:state:{q}", "cronlock:pending-runs:{pending-runs:all}"} {
		found := 0
		for _, m := range c.Masters {
			found += countKeys(t, m, key)
		}
		if found != 1 {
			t.Errorf("key %s: found on %d masters, want 1", key, found)
		}
	}
	t.Logf("q ran %d slots, %d of them queued; backfill:\n%s", len(runs), ranQueued, bout)
}
