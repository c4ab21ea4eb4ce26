package e2e

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestOutage_RedisRestartedEmptyUnderLoad is issue 4, item 6, under
// protocol v2: redis-server is killed and started again, empty (no
// persistence), while 3 nodes run 10 jobs every second. The restart is
// timed at a slot instant, when the nodes are claiming, which is its worst
// moment.
//
// Asserted: no daemon exits (all exit 0 at SIGTERM); no slot of any job
// runs twice, around the restart too (docs/protocol-v2.md R5: the first
// claim of a node that saw the job's ledger detects the loss, and the
// slots up to node.max_clock_skew after it are refused state_lost); every
// slot up to the second before the restart and every slot after that
// refusal window (from each job's last repair warning) up to the one
// before SIGTERM runs exactly once (scheduling resumes by itself).
//
// Not asserted, only logged: which slots around the restart did not run
// (those whose claims hit the dead server, redis_error, and those refused
// state_lost).
func TestOutage_RedisRestartedEmptyUnderLoad(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	jobs, names := everySecondJobs(ledger, "job", 10, nil)
	nodes, allReady := startNodes(t, writeConfig(t, redisConfig(srv.Addr(), jobs...)), nodeSpec{id: "n1"}, nodeSpec{id: "n2"}, nodeSpec{id: "n3"})

	restartAt := nextPhase(allReady.Add(3*time.Second), 0)
	sleepUntil(restartAt)
	srv.Restart()
	restarted := time.Now()
	sleepUntil(restarted.Add(8 * time.Second))
	checkNotExited(t, "after the Redis restart", nodes...)
	stopAt := time.Now()
	stopAll(t, 15*time.Second, nodes...)

	// The last repair of each job (every node that saw more of the ledger
	// than Redis holds repairs it again, a few ms apart).
	const maxSkew = 2 * time.Second // node.max_clock_skew's default
	repaired := lastRepairs(nodes)
	before := slotsBetween(ceilSecond(allReady)+1, restartAt.Unix()-1, 1)
	byJob := slotsByJob(readLedger(t, ledger))
	around := map[int64]int{} // slot → runs, over all jobs, for the log
	checked := 0
	for _, job := range names {
		if repaired[job].IsZero() {
			t.Errorf("job %s: no %q warning after the restart", job, repairWarning)
			continue
		}
		afterFrom := repaired[job].Add(maxSkew).Unix() + 1
		after := slotsBetween(afterFrom, stopAt.Unix()-1, 1)
		checked = max(checked, len(after))
		for s := restartAt.Unix(); s < afterFrom; s++ {
			around[s] += len(byJob[job][s])
		}
		checkOncePerSlot(t, nodes, job, byJob[job], append(before, after...))
		if len(after) < 3 {
			t.Errorf("job %s: checked %d slots after the restart (repaired at %s), want at least 3", job, len(after),
				repaired[job].Format("15:04:05.000"))
		}
	}
	if len(before) < 2 {
		t.Errorf("checked slots: got %d before the restart, want at least 2", len(before))
	}
	t.Logf("restart at %s took %v; runs of the %d jobs in the slots from the restart to the refusal window's end: %v; checked %d + %d slots",
		restartAt.Format("15:04:05.000"), restarted.Sub(restartAt).Round(time.Millisecond), len(names), around,
		len(before), checked)
}
