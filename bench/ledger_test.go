//go:build bench

package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ledgerCommand appends `JOB SLOT NODE START_NS` to ledger, START_NS
// measured by the job itself as it starts; the floor and the daemons run
// the same command. One short `>>` write is atomic on a local file.
func ledgerCommand(ledger string) string {
	return fmt.Sprintf(`echo "$CRONLOCK_JOB $CRONLOCK_SCHEDULED_TIME $CRONLOCK_NODE_ID $(date +%%s%%N)" >> '%s'`, ledger)
}

// ledgerRun is one line of a ledger.
type ledgerRun struct {
	job, node string
	slot      int64 // Unix seconds
	startNs   int64
}

// startMs is the job-measured start: START_NS − slot, in ms.
func (r ledgerRun) startMs() float64 { return float64(r.startNs-r.slot*1e9) / 1e6 }

// readLedger reads a ledger; a missing file is an empty ledger.
func readLedger(t *testing.T, path string) []ledgerRun {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("ledger: %v", err)
	}
	var out []ledgerRun
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			t.Fatalf("ledger line %q: want 4 fields", l)
		}
		slot, err1 := time.Parse(time.RFC3339, f[1])
		ns, err2 := strconv.ParseInt(f[3], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("ledger line %q: %v", l, err)
		}
		out = append(out, ledgerRun{job: f[0], slot: slot.Unix(), node: f[2], startNs: ns})
	}
	return out
}

// slotStats counts duplicate runs (a second or later run of a job's slot)
// over all runs and missed (job, slot) pairs over the slots in [from, to]
// of jobs job0000…; it returns the runs of the slots in [from, to].
func slotStats(runs []ledgerRun, jobs int, from, to int64) (dups, missed int, in []ledgerRun) {
	seen := map[string]int{}
	for _, r := range runs {
		k := r.job + "/" + strconv.FormatInt(r.slot, 10)
		if seen[k]++; seen[k] == 2 {
			dups++
		}
		if r.slot >= from && r.slot <= to {
			in = append(in, r)
		}
	}
	for s := from; s <= to; s++ {
		for j := range jobs {
			if seen[fmt.Sprintf("job%04d/%d", j, s)] == 0 {
				missed++
			}
		}
	}
	return dups, missed, in
}

func startsMs(runs []ledgerRun) []float64 {
	out := make([]float64, len(runs))
	for i, r := range runs {
		out[i] = r.startMs()
	}
	return out
}

// runFloor runs the floor program with args (see bench/floor) writing to
// ledger, and returns the machine's load during it. The caller reads the
// ledger.
func runFloor(t *testing.T, ledger string, args ...string) Load {
	t.Helper()
	a := take(t)
	cmd := exec.Command(floorBin, append(args, "-command", ledgerCommand(ledger))...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("floor %q: %v\n%s", args, err, out)
	}
	return Between(a, take(t))
}

// runFloors runs n floor programs at once, the i-th with args(i) (see
// bench/floor), all writing to ledger, and returns the machine's load from
// before the first started to after the last ended. The caller reads the
// ledger.
func runFloors(t *testing.T, ledger string, n int, args func(i int) []string) Load {
	t.Helper()
	a := take(t)
	errs := make([]error, n)
	outs := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cmd := exec.Command(floorBin, append(args(i), "-command", ledgerCommand(ledger))...)
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("floor %q: %v\n%s", args(i), err, outs[i])
		}
	}
	return Between(a, take(t))
}

func take(t *testing.T) Sample {
	t.Helper()
	s, err := Take()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jobsConfig is n jobs job0000… on schedule with the ledger command.
func jobsConfig(n int, schedule, ledger string) []map[string]any {
	jobs := make([]map[string]any, n)
	for i := range jobs {
		jobs[i] = map[string]any{"name": fmt.Sprintf("job%04d", i), "schedule": schedule, "command": ledgerCommand(ledger)}
	}
	return jobs
}

// sleepUntil sleeps until the wall clock reaches at.
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }
