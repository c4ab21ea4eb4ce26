package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/internal/redistest"
)

// spreadSpan is how long the spread scenario runs: 15 s of issue 13's
// test 4, to fit make test. The runs of a span are few (about 240 after
// the start), so the shares of an even random spread vary by about ±3%.
const spreadSpan = 15 * time.Second

// TestSpread_LoadOrderedClaims is issue 13, "What it must show" 4 (15 s
// of it, to fit make test), without node.max_parallel: 3 nodes, 60 jobs
// every second that each run 2 s. Every slot runs exactly once or is
// skipped with a reason (overlap: the job's previous run still holds its
// lease), and no node runs more than 40% of the runs. The claim order
// (package cluster: a rank per job and slot among the live nodes, a
// fixed delay per rank) gives each node the rank-0 claims of about a third
// of each burst.
func TestSpread_LoadOrderedClaims(t *testing.T) {
	t.Parallel()
	spreadScenario(t, 0)
}

// TestSpread_MaxParallel is the same scenario with node.max_parallel 20:
// besides the criteria above (node_busy also accounts for a slot when
// every node not running the job was at its limit), no node ever has more
// than 20 runs in progress.
func TestSpread_MaxParallel(t *testing.T) {
	t.Parallel()
	spreadScenario(t, 20)
}

// spreadScenario runs issue 13's test 4 for spreadSpan with node.max_parallel
// maxParallel (0 = unlimited) and checks it: 0 duplicates, 0 slots missed,
// no node over 40% of the runs, and with a limit no node over it.
func spreadScenario(t *testing.T, maxParallel int) {
	heavy(t)
	srv := redistest.Start(t)
	ledger := filepath.Join(t.TempDir(), "ledger")
	const jobs = 60
	var list []map[string]any
	for i := range jobs {
		list = append(list, map[string]any{"name": fmt.Sprintf("s%02d", i), "schedule": "* * * * * *", "timeout": "10s",
			"command": `sleep 2; echo "$CRONLOCK_JOB $CRONLOCK_SCHEDULED_TIME $CRONLOCK_NODE_ID" >> ` + shellQuote(ledger)})
	}
	cfg := redisConfig(srv.Addr(), list...)
	// Heartbeats every 500 ms: each node learns the others, and so its rank
	// in each slot's claim order, within the first second (cluster.Enter:
	// without a view a node ranks itself 0 everywhere).
	cfg["node"] = map[string]any{"shutdown_timeout": "10s", "max_parallel": maxParallel, // 0 = unlimited
		"heartbeat_interval": "500ms"}
	cfg["log"] = map[string]any{"level": "info"}
	nodes, firstReady := startCluster(t, writeConfig(t, cfg), 0, "n1", "n2", "n3")
	time.Sleep(spreadSpan) // the cluster runs for a fixed span: that is the test
	stopAt := time.Now()
	stopAll(t, 20*time.Second, nodes...)

	// The spread is judged from the first slot after the last node was
	// ready and had a second to read the others' records (registry's
	// warm-up reads, every second): before that fewer nodes are up, and
	// the first one up runs every slot.
	var lastReady time.Time
	for _, n := range nodes {
		e := n.WaitLog(time.Second, `"engine running"`, func(e logEntry) bool { return e.Msg() == "engine running" })
		if e.Time().After(lastReady) {
			lastReady = e.Time()
		}
	}
	spreadFrom := ceilSecond(lastReady) + 1

	// Who ran what, from the ledger (written by the jobs themselves).
	ran := map[string]map[int64][]string{}
	perNode := map[string]int{}
	spreadRuns, rank0 := 0, 0    // runs of the slots from spreadFrom; of them, by the slot's rank-0 node
	offOrder := map[string]int{} // node → its runs of those slots at rank ≥ 1
	offBySlot := map[int64]int{} // slot - spreadFrom → runs at rank ≥ 1
	for _, f := range ledgerLines(t, ledger) {
		slot, err := time.Parse(time.RFC3339, f[1])
		if len(f) != 3 || err != nil {
			t.Fatalf("ledger line %q", f)
		}
		if ran[f[0]] == nil {
			ran[f[0]] = map[int64][]string{}
		}
		ran[f[0]][slot.Unix()] = append(ran[f[0]][slot.Unix()], f[2])
		if slot.Unix() >= spreadFrom {
			spreadRuns++
			perNode[f[2]]++
			var index int // s00..s59: the job's place among the sorted names
			fmt.Sscanf(f[0], "s%d", &index)
			if cluster.Rank(f[0], index, slot.Unix(), f[2], []string{"n1", "n2", "n3"}) == 0 {
				rank0++
			} else {
				offOrder[f[2]]++
				offBySlot[slot.Unix()-spreadFrom]++
			}
		}
	}
	// Why the others did not run, from the nodes' logs.
	// A slot is accounted for when it ran, when a claim recorded it as
	// overlap (the job's previous run held the lease), or when every node
	// skipped it with a reason of its own: node_busy (at its limit) or
	// overlap_local (it runs the job's previous slot).
	overlap, busy, local := map[string]bool{}, map[string]int{}, map[string]int{}
	var busySlots int
	for _, n := range nodes {
		for _, e := range n.Logs() {
			if e.Msg() != "slot skipped" {
				continue
			}
			k := fmt.Sprintf("%s/%d", e.Str("job"), e.Slot())
			switch e.Str("reason") {
			case "overlap":
				overlap[k] = true
			case "node_busy":
				busy[k]++
			case "overlap_local":
				local[k]++
			}
		}
	}
	slots := slotsBetween(ceilSecond(firstReady)+1, stopAt.Unix()-1, 1)
	total, missed := 0, 0
	for i := range jobs {
		job := fmt.Sprintf("s%02d", i)
		for slot, by := range ran[job] {
			total += len(by)
			if len(by) != 1 {
				t.Errorf("job %s slot %d: ran %d times (nodes %v), want once", job, slot, len(by), by)
			}
		}
		for _, slot := range slots {
			k := fmt.Sprintf("%s/%d", job, slot)
			switch {
			case len(ran[job][slot]) > 0, overlap[k]:
			case busy[k] > 0 && busy[k]+local[k] == len(nodes):
				busySlots++
			default:
				missed++
				if missed <= 5 {
					t.Errorf("job %s slot %d: not run and not accounted for (node_busy on %d nodes, overlap_local on %d)%s",
						job, slot, busy[k], local[k], describeSlot(nodes, job, slot))
				}
			}
		}
	}
	if missed > 0 {
		t.Errorf("%d slots missed, want 0", missed)
	}
	var shares []string
	for _, n := range nodes {
		share := float64(perNode[n.name]) / float64(max(spreadRuns, 1))
		shares = append(shares, fmt.Sprintf("%s %d (%.0f%%)", n.name, perNode[n.name], 100*share))
		if share > 0.40 {
			t.Errorf("%s ran %d of the %d runs of the slots from %d s after the first ready (%.0f%%), want at most 40%%",
				n.name, perNode[n.name], spreadRuns, spreadFrom-ceilSecond(firstReady), 100*share)
		}
		if peak := peakInProgress(n); maxParallel > 0 && peak > maxParallel {
			t.Errorf("%s had %d runs in progress at once, want at most max_parallel %d", n.name, peak, maxParallel)
		} else {
			shares[len(shares)-1] += fmt.Sprintf(", peak %d in progress", peak)
		}
	}
	if total < 150 {
		t.Errorf("got %d runs in %v, want at least 150 (about 20 a second)", total, spreadSpan)
	}
	if spreadRuns < 120 {
		t.Errorf("got %d runs of the slots from %d s after the first ready, want at least 120", spreadRuns, spreadFrom-ceilSecond(firstReady))
	}
	t.Logf("%d runs of %d jobs over %d slots; from %d s after the first ready %d runs: %s; %d of them by the slot's rank-0 node "+
		"(the others by node: %v, by slot from the first judged: %v); %d slots skipped node_busy (on every node not running the job)",
		total, jobs, len(slots), spreadFrom-ceilSecond(firstReady), spreadRuns, strings.Join(shares, "; "), rank0, offOrder, offBySlot, busySlots)
}

// peakInProgress is the most runs node n had between "run started" and
// "run finished" at once, from its log (each run's process span, which
// lies inside the claim-to-release span max_parallel bounds).
func peakInProgress(n *node) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, e := range n.Logs() {
		switch e.Msg() {
		case "run started":
			edges = append(edges, edge{e.Time(), +1})
		case "run finished":
			edges = append(edges, edge{e.Time(), -1})
		}
	}
	slices.SortStableFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // a finish and a start at the same instant do not overlap
	})
	cur, peak := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}
