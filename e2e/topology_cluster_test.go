package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// shortLedgerCommand appends `JOB SLOT NODE` to ledger with one shell and
// no other process, for tests that run hundreds of jobs a second (the
// ledgerCommand's two `date` calls would triple the processes).
func shortLedgerCommand(ledger string) string {
	return `echo "$CRONLOCK_JOB $CRONLOCK_SCHEDULED_TIME $CRONLOCK_NODE_ID" >> ` + shellQuote(ledger)
}

// readShortLedger returns job → slot → nodes from a shortLedgerCommand
// ledger.
func readShortLedger(t *testing.T, path string) map[string]map[int64][]string {
	t.Helper()
	out := map[string]map[int64][]string{}
	for _, fs := range ledgerLines(t, path) {
		if len(fs) != 3 {
			t.Fatalf("ledger line %q: got %d fields, want 3", fs, len(fs))
		}
		slot, err := time.Parse(time.RFC3339, fs[1])
		if err != nil {
			t.Fatalf("ledger line %q: %v", fs, err)
		}
		if out[fs[0]] == nil {
			out[fs[0]] = map[int64][]string{}
		}
		out[fs[0]][slot.Unix()] = append(out[fs[0]][slot.Unix()], fs[2])
	}
	return out
}

// countKeys counts the keys matching pattern on one Cluster master (KEYS in
// a script without keys runs on the node it is sent to).
func countKeys(t *testing.T, m *redistest.Server, pattern string) int {
	t.Helper()
	v := m.Do("EVAL", `return #redis.call("KEYS", ARGV[1])`, "0", pattern)
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("count keys on %s: %q: %v", m.Addr(), v, err)
	}
	return n
}

// A Redis Cluster of 3 masters, 3 daemons, 200 jobs every two seconds, with
// the default key prefix (no hash tag): every slot in the checked window
// runs exactly once, and the jobs' keys are spread over the masters (each
// holds 20–50% of the jobs' state keys), so adding masters adds capacity.
// 100 shells a second, not more: on the 2-core development machine,
// beside three daemons, three Redis masters and make test's other
// packages, runs of one slot sometimes outlast the next (an echo took over
// 2 s), and their node skips it overlap_local, a named skip that
// checkOncePerSlot excuses (a test of the machine, not of the topology;
// with 300 jobs every two seconds it failed that way on a day the machine
// forked 2.4 times slower than usual). Not overlap: allow: runs that pile
// up on a loaded machine load it more (one such run took 2 minutes).
func TestClusterTopology_200JobsSpreadOverShards(t *testing.T) {
	t.Parallel()
	heavy(t)
	const jobs = 200
	c := redistest.StartCluster(t, 3)
	ledger := newLedger(t)
	var list []map[string]any
	var names []string
	for i := range jobs {
		name := fmt.Sprintf("job%03d", i)
		names = append(names, name)
		list = append(list, map[string]any{"name": name, "schedule": "*/2 * * * * *",
			"command": shortLedgerCommand(ledger), "timeout": "10s"})
	}
	cfg := redisConfig("", list...)
	cfg["redis"] = map[string]any{"addresses": c.Addrs()}
	cfg["log"] = map[string]any{"level": "info"}
	nodes, _ := startCluster(t, writeConfig(t, cfg), 0, "n1", "n2", "n3")
	for _, n := range nodes {
		n.WaitLog(10*time.Second, "redis policy guard allows claims", func(e logEntry) bool {
			return strings.HasPrefix(e.Msg(), "redis policy guard: redis evicts none")
		})
	}
	// The checked window starts once all three claim: until then the
	// first node alone runs every job while the others start.
	allReady := time.Now()
	time.Sleep(8 * time.Second) // the cluster runs for a fixed span: that is the test
	stopAt := time.Now()
	stopAll(t, 15*time.Second, nodes...)

	want := slotsBetween(ceilSecond(allReady)+1, stopAt.Unix()-1, 2)
	if len(want) < 3 {
		t.Fatalf("checked window: got %d slots, want at least 3 (cluster started too slowly?)", len(want))
	}
	byJob := readShortLedger(t, ledger)
	runs := 0
	for _, job := range names {
		checkOncePerSlot(t, nodes, job, byJob[job], want)
		for _, by := range byJob[job] {
			runs += len(by)
		}
	}
	var shares []string
	for _, m := range c.Masters {
		n := countKeys(t, m, "cronlock:state:{*}")
		share := float64(n) / jobs
		shares = append(shares, fmt.Sprintf("%s %d (%.0f%%)", m.Addr(), n, 100*share))
		if share < 0.20 || share > 0.50 {
			t.Errorf("master %s holds %d of %d jobs' state keys (%.0f%%), want 20–50%%", m.Addr(), n, jobs, 100*share)
		}
	}
	if n := countKeys(t, c.Masters[0], "cronlock:state:*") + countKeys(t, c.Masters[1], "cronlock:state:*") +
		countKeys(t, c.Masters[2], "cronlock:state:*"); n != jobs {
		t.Errorf("state keys in the cluster: got %d, want %d (one per job)", n, jobs)
	}
	var perNode []string
	for _, n := range nodes {
		perNode = append(perNode, fmt.Sprintf("%s %d", n.name, strings.Count(readFile(t, ledger), " "+n.name+"\n")))
	}
	t.Logf("checked %d jobs × %d slots (%d..%d), %d runs in the ledger; runs per node: %s; state keys per master: %s",
		jobs, len(want), want[0], want[len(want)-1], runs, strings.Join(perNode, ", "), strings.Join(shares, ", "))
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}
