package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestV2_FrozenStateDir_TimeoutStillKills is issue 32, "What it must
// show" 7: while every run-record write of the node blocks (the test seam
// CRONLOCK_INTERNAL_BLOCK_RUN_RECORDS: a frozen state directory), a job
// with `timeout: 1s` whose command ignores SIGTERM and sleeps 5 s is
// killed within 1 s + kill_grace (500 ms) of its start, and a
// per-second job of the same node (overlap allow: each slot its own run)
// runs every slot while the writes block. Before v2 the timeout was armed
// after the record write, behind a node-wide mutex: the job was killed
// only once the write returned, and every run of the node waited. (The
// issue's job had `timeout: 300ms`; the config refuses a timeout under
// 1s, so the test uses 1s: what it shows does not depend on the value.)
//
// Asserted from the outside: the timed-out run's process group is gone
// (polled every 20 ms) within 1 s + kill_grace + 150 ms of slack after
// its "run started"; its "run timed out" comes 1 s (+ 150 ms) after
// "run started"; the per-second job's own output has a line for every
// slot while the file exists.
func TestV2_FrozenStateDir_TimeoutStillKills(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	out := newLedger(t)
	block := filepath.Join(t.TempDir(), "block")
	const timeout, grace = time.Second, 500 * time.Millisecond
	jobs := []map[string]any{
		{"name": "slow", "schedule": "*/2 * * * * *", "command": "trap '' TERM; sleep 5", "timeout": timeout.String(),
			"kill_grace": grace.String()},
		{"name": "tick", "schedule": "* * * * * *", "command": tokenCommand(out, ""), "overlap": "allow"},
	}
	nodes, _ := startNodes(t, writeConfig(t, redisConfig(srv.Addr(), jobs...)),
		nodeSpec{id: "n1", env: []string{"CRONLOCK_INTERNAL_BLOCK_RUN_RECORDS=" + block}})
	n := nodes[0]

	if err := os.WriteFile(block, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	blocked := time.Now()
	started := n.WaitLog(5*time.Second, `"run started" of slow after the block`, func(e logEntry) bool {
		return e.is("run started", "slow") && e.Time().After(blocked)
	})
	pgid := int(started.Int("pid"))
	var gone time.Time
	waitFor(t, 10*time.Second, "the timed-out run's process group to be gone", func() bool {
		if len(liveGroupMembers(t, pgid)) == 0 {
			gone = time.Now()
			return true
		}
		return false
	})
	timedOut := n.WaitLog(2*time.Second, `"run timed out" of slow`, func(e logEntry) bool {
		return e.is("run timed out; terminating its process group", "slow") && e.Str("run_id") == started.Str("run_id")
	})
	sleepUntil(blocked.Add(5 * time.Second)) // the writes stay blocked this long: that is the test
	unblocked := time.Now()
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the blocked writes return, the runs end
	stopAll(t, 10*time.Second, n)

	if d := gone.Sub(started.Time()); d > timeout+grace+150*time.Millisecond {
		t.Errorf("the timed-out run's process group was gone %v after its start, want within timeout %v + kill_grace %v",
			d, timeout, grace)
	}
	if d := timedOut.Time().Sub(started.Time()); d < timeout-5*time.Millisecond || d > timeout+150*time.Millisecond {
		t.Errorf(`"run timed out" %v after "run started", want %v`, d, timeout)
	}
	ran := map[int64]bool{}
	for _, r := range readTokenRuns(t, out) {
		ran[r.Slot] = true
	}
	want := slotsBetween(ceilSecond(blocked), unblocked.Unix()-1, 1)
	for _, s := range want {
		if !ran[s] {
			t.Errorf("tick slot %d (while the run-record writes blocked): no run, want every slot run%s", s, describeSlot(nodes, "tick", s))
		}
	}
	t.Logf("slow started %s, timed out +%v, its group gone +%v; tick ran %d slots while blocked",
		started.Time().Format("15:04:05.000"), timedOut.Time().Sub(started.Time()), gone.Sub(started.Time()).Round(time.Millisecond), len(want))
}
