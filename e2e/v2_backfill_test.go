package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestV2_Backfill_ScheduleRanSlotsNotRunAgain is issue 32, "What it must
// show" 5: two nodes run a per-second job for a few seconds; then
// `cronlock backfill` over a range that begins 3 s before the nodes
// started and ends at a slot the schedule ran. Before v2 the backfill
// re-ran slots the schedule had run, and -dry-run said "would run".
//
// Asserted: -dry-run lists every slot the schedule ran as "already run"
// and the slots before the nodes started as "would run"; the backfill then
// runs exactly the slots nobody ran (trigger backfill, each once) and
// lists the others as already run; no slot of the range has two runs in
// the job's own output.
func TestV2_Backfill_ScheduleRanSlotsNotRunAgain(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	out := newLedger(t)
	job := map[string]any{"name": "tick", "schedule": "* * * * * *", "command": tokenCommand(out, "")}
	cfgFile := writeConfig(t, redisConfig(srv.Addr(), job))
	before := time.Now()
	nodes, _ := startNodes(t, cfgFile, nodeSpec{id: "n1"}, nodeSpec{id: "n2"})

	// Wait until 4 slots ran and the last of them is past its answer
	// window (a backfill claims only those: docs/protocol.md, R2).
	var last int64
	waitFor(t, 15*time.Second, "4 runs of the schedule", func() bool {
		runs := readTokenRuns(t, out)
		if len(runs) < 4 {
			return false
		}
		last = runs[len(runs)-1].Slot
		return true
	})
	sleepUntil(time.Unix(last+3, 0))
	scheduled := map[int64]bool{}
	for _, r := range readTokenRuns(t, out) {
		if r.Slot <= last {
			scheduled[r.Slot] = true
		}
	}
	from, to := before.Unix()-3, last
	rangeArgs := []string{"tick", "-from", time.Unix(from, 0).UTC().Format(time.RFC3339), "-to", time.Unix(to, 0).UTC().Format(time.RFC3339)}

	_, dry := backfillCmd(t, cfgFile, "bf", append(rangeArgs, "-dry-run")...)
	for s := from; s <= to; s++ {
		ts := time.Unix(s, 0).UTC().Format(time.RFC3339)
		switch {
		case scheduled[s] && !strings.Contains(dry, "already run  "+ts):
			t.Errorf("dry run: slot %s ran on the schedule, want it listed as already run:\n%s", ts, dry)
		case s < before.Unix() && !strings.Contains(dry, "would run    "+ts):
			t.Errorf("dry run: slot %s (before the nodes started), want it listed as would run:\n%s", ts, dry)
		}
	}
	code, bout := backfillCmd(t, cfgFile, "bf", rangeArgs...)
	if code != 0 {
		t.Errorf("backfill: exit %d, want 0:\n%s", code, bout)
	}
	stopAll(t, 10*time.Second, nodes...)

	bySlot := map[int64][]string{}
	backfilled := 0
	for _, r := range readTokenRuns(t, out) {
		if r.Slot < from || r.Slot > to {
			continue
		}
		bySlot[r.Slot] = append(bySlot[r.Slot], fmt.Sprintf("%s on %s", r.Trigger, r.Node))
		if r.Trigger == "backfill" {
			backfilled++
			if scheduled[r.Slot] {
				t.Errorf("run %v: the backfill ran a slot the schedule had run", r)
			}
		}
	}
	for s := from; s <= to; s++ {
		if len(bySlot[s]) > 1 {
			t.Errorf("slot %d: runs %v, want at most one", s, bySlot[s])
		}
		if s < before.Unix() && len(bySlot[s]) != 1 {
			t.Errorf("slot %d (before the nodes started): runs %v, want one by the backfill", s, bySlot[s])
		}
		ts := time.Unix(s, 0).UTC().Format(time.RFC3339)
		if scheduled[s] && !strings.Contains(bout, "already run  "+ts) {
			t.Errorf("backfill: slot %s ran on the schedule, want it listed as already run:\n%s", ts, bout)
		}
	}
	want := fmt.Sprintf("%d ran, %d already run", backfilled, len(scheduled))
	if !strings.Contains(bout, want) {
		t.Errorf("backfill summary: got\n%s\nwant %q", bout, want)
	}
	t.Logf("range %d–%d: %d slots ran on the schedule, %d by the backfill", from, to, len(scheduled), backfilled)
}
