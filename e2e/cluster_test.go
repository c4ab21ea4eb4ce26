package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// startCluster starts len(ids) daemons on cfgFile, one per node id, waiting
// stagger between starts and for each daemon's "engine running" log. It
// returns the nodes and the instant the first engine ran.
func startCluster(t *testing.T, cfgFile string, stagger time.Duration, ids ...string) ([]*node, time.Time) {
	t.Helper()
	var nodes []*node
	var firstReady time.Time
	for i, id := range ids {
		if i > 0 && stagger > 0 {
			time.Sleep(stagger) // the test is about nodes started at different moments
		}
		n := startNode(t, cfgFile, withNodeID(id))
		e := n.WaitLog(10*time.Second, `"engine running"`, func(e logEntry) bool { return e.Msg() == "engine running" })
		if i == 0 {
			firstReady = e.Time()
		}
		nodes = append(nodes, n)
	}
	return nodes, firstReady
}

// slotsByJob groups ledger runs: job → slot → nodes that ran it.
func slotsByJob(runs []ledgerRun) map[string]map[int64][]string {
	out := map[string]map[int64][]string{}
	for _, r := range runs {
		if out[r.Job] == nil {
			out[r.Job] = map[int64][]string{}
		}
		out[r.Job][r.Slot] = append(out[r.Job][r.Slot], r.Node)
	}
	return out
}

// describeSlot summarises what every node logged about job's slot, and any
// ticker or inbox warnings, for the failure message of a missed or
// duplicated slot.
func describeSlot(nodes []*node, job string, slot int64) string {
	var b strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&b, "\n    %s:", n.name)
		for _, e := range n.Logs() {
			switch {
			case e.Str("job") == job && e.Slot() == slot:
				fmt.Fprintf(&b, " [%s %s %s%s]", e.Time().Format("15:04:05.000"), e.Msg(), e.Str("reason"), e.Str("result"))
			case strings.Contains(e.Msg(), "woke late") || strings.Contains(e.Msg(), "fire dropped"):
				fmt.Fprintf(&b, " [%s %s job=%s]", e.Time().Format("15:04:05.000"), e.Msg(), e.Str("job"))
			}
		}
	}
	return b.String()
}

// checkOncePerSlot fails the test for every slot of job run more than once
// and for every slot in want that was not run, except a slot a node
// skipped overlap_local (its own run of the job still going: a loaded
// machine), up to a quarter of want. The first describedSlots
// failures carry describeSlot's summary (each reads every node's whole
// log): a run that went wrong for hundreds of slots must fail with its
// messages, not time out describing them.
func checkOncePerSlot(t *testing.T, nodes []*node, job string, ran map[int64][]string, want []int64) {
	t.Helper()
	failed := 0
	describe := func(slot int64) string {
		if failed++; failed > describedSlots {
			return ""
		}
		return describeSlot(nodes, job, slot)
	}
	for slot, by := range ran {
		if len(by) != 1 {
			t.Errorf("job %s slot %d: got %d runs (nodes %v), want exactly 1%s", job, slot, len(by), by, describe(slot))
		}
	}
	excused := 0
	for _, slot := range want {
		if len(ran[slot]) == 0 {
			if skippedOverlapLocal(nodes, job, slot) {
				excused++ // named and justified: the job's run of an earlier slot was still going there
				continue
			}
			t.Errorf("job %s slot %d: got no run, want 1 (missed slot)%s", job, slot, describe(slot))
		}
	}
	if excused > 0 {
		t.Logf("job %s: %d of %d slots skipped overlap_local (a run of the job still going on a loaded machine)", job, excused, len(want))
	}
	if excused > len(want)/4 {
		t.Errorf("job %s: %d of %d slots skipped overlap_local, want at most a quarter (the machine could not keep up)", job, excused, len(want))
	}
}

// skippedOverlapLocal reports whether a node logged slot of job skipped
// overlap_local: that node's own run of an earlier slot still held the
// job's lease when the slot fired (its claim recorded the slot skipped
// overlap), a named skip on a machine too loaded to end a run within its
// period, not a missed slot.
func skippedOverlapLocal(nodes []*node, job string, slot int64) bool {
	for _, n := range nodes {
		for _, e := range n.Logs() {
			if e.Msg() == "slot skipped" && e.Str("job") == job && e.Slot() == slot && e.Str("reason") == "overlap_local" {
				return true
			}
		}
	}
	return false
}

// describedSlots bounds the failures per checkOncePerSlot call that get
// describeSlot's summary.
const describedSlots = 5

// slotsBetween lists the multiples of step in [from, to].
func slotsBetween(from, to, step int64) []int64 {
	var out []int64
	for s := (from + step - 1) / step * step; s <= to; s += step {
		out = append(out, s)
	}
	return out
}

// ceilSecond is t rounded up to a whole Unix second.
func ceilSecond(t time.Time) int64 {
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

func redisConfig(addr string, jobs ...map[string]any) map[string]any {
	return map[string]any{
		"node":  map[string]any{"shutdown_timeout": "10s"},
		"redis": map[string]any{"address": addr},
		"log":   map[string]any{"level": "debug"},
		"jobs":  jobs,
	}
}

func TestCluster_ThreeNodesTenJobsEverySecond(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := filepath.Join(t.TempDir(), "ledger")
	var jobs []map[string]any
	var names []string
	for i := range 10 {
		name := fmt.Sprintf("job%02d", i)
		names = append(names, name)
		jobs = append(jobs, map[string]any{"name": name, "schedule": "* * * * * *",
			"command": ledgerCommand(ledger, ""), "timeout": "10s"})
	}
	nodes, firstReady := startCluster(t, writeConfig(t, redisConfig(srv.Addr(), jobs...)), 0, "n1", "n2", "n3")

	time.Sleep(10 * time.Second) // the cluster runs for a fixed span: that is the test
	stopAt := time.Now()
	stopAll(t, 15*time.Second, nodes...)

	// Every slot from the second after the first engine ran up to the
	// second before SIGTERM must have run; the edge seconds are allowed
	// either way.
	want := slotsBetween(ceilSecond(firstReady)+1, stopAt.Unix()-1, 1)
	byJob := slotsByJob(readLedger(t, ledger))
	for _, job := range names {
		checkOncePerSlot(t, nodes, job, byJob[job], want)
	}
	if len(want) < 8 {
		t.Errorf("checked window: got %d slots, want at least 8 (cluster started too slowly?)", len(want))
	}
	t.Logf("checked %d jobs × %d slots (%d..%d); ledger holds %d runs", len(names), len(want), want[0], want[len(want)-1], len(readLedger(t, ledger)))
}

func TestCluster_EveryStartedAtDifferentMoments(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := filepath.Join(t.TempDir(), "ledger")
	job := map[string]any{"name": "every5", "schedule": "@every 5s", "command": ledgerCommand(ledger, ""), "timeout": "10s"}
	start := time.Now()
	nodes, firstReady := startCluster(t, writeConfig(t, redisConfig(srv.Addr(), job)), 1700*time.Millisecond, "n1", "n2", "n3")
	allReady := nodes[2].WaitLog(time.Second, "engine running", func(e logEntry) bool { return e.Msg() == "engine running" }).Time()

	time.Sleep(16*time.Second - time.Since(start)) // a fixed span covering three intervals
	stopAt := time.Now()
	stopAll(t, 15*time.Second, nodes...)

	runs := readLedger(t, ledger)
	for _, r := range runs {
		if r.Slot%5 != 0 {
			t.Errorf("run of slot %d on %s: got slot %% 5 = %d, want 0 (@every 5s is aligned to the epoch)", r.Slot, r.Node, r.Slot%5)
		}
	}
	want := slotsBetween(ceilSecond(firstReady)+1, stopAt.Unix()-1, 5)
	checkOncePerSlot(t, nodes, "every5", slotsByJob(runs)["every5"], want)
	if len(want) < 2 {
		t.Errorf("checked window: got %d slots, want at least 2", len(want))
	}

	// Once all three nodes run, every slot is fired by each of them: the
	// two that did not run it log that it was claimed elsewhere.
	for _, slot := range slotsBetween(ceilSecond(allReady), stopAt.Unix()-1, 5) {
		var claimedElsewhere []string
		for _, n := range nodes {
			for _, e := range n.Logs() {
				if e.is("slot skipped", "every5") && e.Slot() == slot && e.Str("reason") == "claimed_elsewhere" {
					claimedElsewhere = append(claimedElsewhere, n.name)
				}
			}
		}
		if len(claimedElsewhere) != 2 {
			t.Errorf("slot %d: got claimed_elsewhere skips from %v, want from 2 nodes%s", slot, claimedElsewhere, describeSlot(nodes, "every5", slot))
		}
	}
	t.Logf("checked slots %v; ledger holds %d runs", want, len(runs))
}

func TestCluster_OverlapSkipped(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := filepath.Join(t.TempDir(), "ledger")
	job := map[string]any{"name": "slow", "schedule": "* * * * * *", "command": ledgerCommand(ledger, "sleep 3.5"), "timeout": "20s"}
	nodes, _ := startCluster(t, writeConfig(t, redisConfig(srv.Addr(), job)), 0, "n1", "n2", "n3")
	allReady := nodes[2].WaitLog(time.Second, "engine running", func(e logEntry) bool { return e.Msg() == "engine running" }).Time()

	time.Sleep(9 * time.Second) // a fixed span covering two runs
	stopAt := time.Now()
	stopAll(t, 15*time.Second, nodes...)

	runs := readLedger(t, ledger)
	if len(runs) < 2 {
		t.Fatalf("runs in %v: got %d, want at least 2", 9*time.Second, len(runs))
	}
	slices.SortFunc(runs, func(a, b ledgerRun) int { return a.Start.Compare(b.Start) })
	for i := 1; i < len(runs); i++ {
		prev, cur := runs[i-1], runs[i]
		if cur.Start.Before(prev.End) {
			t.Errorf("run of slot %d on %s started at %s, before the run of slot %d on %s ended at %s: want no overlap",
				cur.Slot, cur.Node, cur.Start.Format("15:04:05.000"), prev.Slot, prev.Node, prev.End.Format("15:04:05.000"))
		}
	}

	// Every slot that fell inside a run, once all nodes ran, is skipped by
	// every node: the node running the job claims it too and reports
	// overlap_local; the first claim finds the lease held and records the
	// slot skipped (overlap), and every node after it reports that record's
	// reason, overlap (docs/protocol.md, R1).
	// The runner's overlap_local lines are summarised (README.md, "Logs"):
	// the first slot of each run is logged at once (a run start ends the
	// summary); a later one may be left out, but is never logged otherwise.
	checked := 0
	for _, r := range runs {
		for slot := r.Slot + 1; time.Unix(slot, 0).Before(r.End); slot++ {
			if slot < ceilSecond(allReady) || slot >= stopAt.Unix() {
				continue
			}
			checked++
			var runner, others []string
			for _, n := range nodes {
				var got []string
				for _, e := range n.Logs() {
					if e.Str("job") == "slow" && e.Slot() == slot {
						got = append(got, e.Msg()+": "+e.Str("reason"))
					}
				}
				if n.name == r.Node {
					runner = got
				} else {
					others = append(others, got...)
				}
			}
			slices.Sort(others)
			if want := []string{"slot skipped: overlap_local"}; !slices.Equal(runner, want) && (slot == r.Slot+1 || len(runner) != 0) {
				t.Errorf("slot %d (during the run of slot %d on %s): runner logged %q, want %q", slot, r.Slot, r.Node, runner, want)
			}
			// Every other node reports the ledger's reason for the slot:
			// whichever claim came first recorded it skipped overlap.
			if want := []string{"slot skipped: overlap", "slot skipped: overlap"}; !slices.Equal(others, want) {
				t.Errorf("slot %d (during the run of slot %d on %s): other nodes logged %q, want %q", slot, r.Slot, r.Node, others, want)
			}
		}
	}
	if checked < 5 {
		t.Errorf("slots checked for overlap skips: got %d, want at least 5", checked)
	}
	t.Logf("%d runs, %d slots checked for overlap skips", len(runs), checked)
}
