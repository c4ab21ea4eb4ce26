package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// backfillCmd runs `cronlock backfill` as node id and returns its exit
// code and stdout.
func backfillCmd(t *testing.T, cfgFile, id string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"backfill", "-config", cfgFile}, args...)...)
	cmd.Env = append(os.Environ(), "CRONLOCK_NODE_ID="+id)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("backfill on %s: %v", id, err)
		}
		code = ee.ExitCode()
	}
	if testing.Verbose() || code != 0 {
		t.Logf("backfill on %s: exit %d\nstdout:\n%s\nstderr:\n%s", id, code, out.String(), errb.String())
	}
	return code, out.String()
}

// TestBackfill_ThirtySlotsOnceEachThenAlreadyRun is issue 13, item 2: a
// job that runs every minute, 3 daemons running, and `cronlock backfill`
// of its 30 past one-minute slots started at the same moment on each of
// the 3 nodes. Asserted: each of the 30 slots runs exactly once (trigger
// backfill: the command fails otherwise), every backfill exits 0 and
// together they list each slot as ran once; running the same backfill
// again runs nothing and lists the 30 slots as already run; -dry-run
// lists them as already run too.
func TestBackfill_ThirtySlotsOnceEachThenAlreadyRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	work := `test "$CRONLOCK_TRIGGER" = backfill || exit 3; sleep 0.05` // long enough for the backfills to meet
	job := map[string]any{"name": "bf", "schedule": "* * * * *", "command": ledgerCommand(ledger, work)}
	cfgFile := writeConfig(t, redisConfig(srv.Addr(), job))
	nodes, _ := startNodes(t, cfgFile, nodeSpec{id: "n1"}, nodeSpec{id: "n2"}, nodeSpec{id: "n3"})

	end := time.Now().Truncate(time.Minute).Add(-time.Minute)
	start := end.Add(-29 * time.Minute)
	want := map[int64]bool{}
	for s := start; !s.After(end); s = s.Add(time.Minute) {
		want[s.Unix()] = true
	}
	rangeArgs := []string{"bf", "-from", start.UTC().Format(time.RFC3339), "-to", end.UTC().Format(time.RFC3339)}
	began := time.Now()
	var wg sync.WaitGroup
	outs := make([]string, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out := backfillCmd(t, cfgFile, n.name, rangeArgs...)
			if code != 0 {
				t.Errorf("backfill on %s: exit %d, want 0", n.name, code)
			}
			outs[i] = out
		}()
	}
	wg.Wait()
	t.Logf("3 concurrent backfills of 30 slots took %v", time.Since(began))

	byNode := map[string]int{}
	ran := map[int64][]string{}
	for _, r := range readLedger(t, ledger) {
		if r.Start.Before(began) {
			continue // not from the backfill
		}
		if !want[r.Slot] {
			t.Errorf("slot %d ran on %s, outside the backfilled range", r.Slot, r.Node)
			continue
		}
		ran[r.Slot] = append(ran[r.Slot], r.Node)
		byNode[r.Node]++
	}
	for s := range want {
		if len(ran[s]) != 1 {
			t.Errorf("slot %d: got runs on %v, want exactly one", s, ran[s])
		}
	}
	t.Logf("runs by node: %v", byNode)
	listed := 0
	for _, out := range outs {
		listed += strings.Count(out, "\nran ") + map[bool]int{true: 1}[strings.HasPrefix(out, "ran ")]
	}
	if listed != 30 {
		t.Errorf("the three backfills listed %d slots as ran, want 30:\n%s", listed, strings.Join(outs, "\n"))
	}

	runsBefore := len(readLedger(t, ledger))
	code, out := backfillCmd(t, cfgFile, "n1", rangeArgs...)
	if code != 0 {
		t.Errorf("second backfill: exit %d, want 0", code)
	}
	if n := strings.Count(out, "already run "); n != 30 {
		t.Errorf("second backfill listed %d slots as already run, want 30:\n%s", n, out)
	}
	for s := range want {
		if !strings.Contains(out, "already run  "+time.Unix(s, 0).UTC().Format(time.RFC3339)) {
			t.Errorf("second backfill does not list slot %s as already run", time.Unix(s, 0).UTC().Format(time.RFC3339))
		}
	}
	if !strings.Contains(out, "backfill bf: 30 slots: 0 ran, 30 already run") {
		t.Errorf("second backfill summary: got\n%s\nwant 0 ran, 30 already run", out)
	}
	_, dry := backfillCmd(t, cfgFile, "n2", append(rangeArgs, "-dry-run")...)
	if n := strings.Count(dry, "already run "); n != 30 {
		t.Errorf("dry run listed %d slots as already run, want 30:\n%s", n, dry)
	}
	for _, r := range readLedger(t, ledger)[runsBefore:] {
		t.Errorf("slot %d ran on %s after the first backfill, want nothing run (the job's own slots fail their trigger check before the ledger line)", r.Slot, r.Node)
	}
	stopAll(t, 10*time.Second, nodes...)
}
