package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// cliOut runs a cronlock subcommand and returns its exit code and stdout.
func cliOut(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = os.Environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Logf("%v: exit %d, stderr %s", args, ee.ExitCode(), errb.String())
		return ee.ExitCode(), out.String()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return 0, out.String()
}

// TestLimits_MaxRunsAndAt is issue 13, "Limits on runs": on 3 nodes, a
// per-second job with max_runs 3 and a job with an @at schedule a few
// seconds ahead. Asserted: the first job runs exactly 3 times in the
// cluster, and its later slots are skipped max_runs (the first such skip
// on a node names the cause at info); the @at job runs exactly once, at
// its time, and every node then reports it done once; `cronlock next`
// shows the @at time before and "done" after; `cronlock status -json`
// reports both jobs done.
func TestLimits_MaxRunsAndAt(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	atSlot := time.Now().Add(4 * time.Second).Truncate(time.Second)
	at := atSlot.UTC().Format(time.RFC3339)
	jobs := []map[string]any{
		{"name": "bounded", "schedule": "* * * * * *", "max_runs": 3, "command": ledgerCommand(ledger, "")},
		{"name": "oneoff", "schedule": "@at " + at, "command": ledgerCommand(ledger, "")},
	}
	cfgFile := writeConfig(t, redisConfig(srv.Addr(), jobs...))
	if code, out := cliOut(t, "next", "-config", cfgFile, "oneoff"); code != 0 || !strings.Contains(out, atSlot.UTC().Format("2006-01-02 15:04:05Z")) {
		t.Errorf("next before the @at time: exit %d, output\n%s\nwant the time %s", code, out, at)
	}
	nodes, _ := startNodes(t, cfgFile, nodeSpec{id: "n1"}, nodeSpec{id: "n2"}, nodeSpec{id: "n3"})
	sleepUntil(atSlot.Add(3 * time.Second))

	runs := slotsByJob(readLedger(t, ledger))
	if n := len(runs["bounded"]); n != 3 {
		t.Errorf("bounded: got %d slots run (%v), want 3 (max_runs)", n, runs["bounded"])
	}
	for slot, by := range runs["bounded"] {
		if len(by) != 1 {
			t.Errorf("bounded slot %d ran on %v, want once", slot, by)
		}
	}
	if by := runs["oneoff"][atSlot.Unix()]; len(runs["oneoff"]) != 1 || len(by) != 1 {
		t.Errorf("oneoff: got runs %v, want one run of slot %d", runs["oneoff"], atSlot.Unix())
	}
	toldMax := 0
	for _, n := range nodes {
		for _, e := range logsOf(n, "slot skipped", "bounded") {
			if e.Str("reason") == "max_runs" && e.Str("level") == "info" {
				toldMax++
			}
		}
		done := 0
		for _, e := range logsOf(n, "job done: its @at time has passed; it does not fire again", "oneoff") {
			if e.Str("level") == "info" {
				done++
			}
		}
		if done != 1 {
			t.Errorf("%s: got %d \"job done\" lines for oneoff, want 1", n.name, done)
		}
	}
	if toldMax == 0 || toldMax > 3 {
		t.Errorf("got %d info-level max_runs skips over the nodes, want 1 to 3 (one per node at most)", toldMax)
	}
	if code, out := cliOut(t, "next", "-config", cfgFile, "oneoff"); code != 0 || !strings.Contains(out, "done: its @at time") {
		t.Errorf("next after the @at time: exit %d, output\n%s\nwant it reported done", code, out)
	}
	code, out := cliOut(t, "status", "-config", cfgFile, "-json")
	var rows []struct {
		Job  string `json:"job"`
		Runs int64  `json:"runs"`
		Done string `json:"done"`
	}
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
		t.Fatalf("status -json: exit %d, %v, output %q", code, err, out)
	}
	for _, r := range rows {
		want := map[string]string{"bounded": "max_runs", "oneoff": "at_passed"}[r.Job]
		if r.Done != want || (r.Job == "bounded" && r.Runs != 3) {
			t.Errorf("status of %s: got runs %d done %q, want done %q (and runs 3 for bounded)", r.Job, r.Runs, r.Done, want)
		}
	}
	stopAll(t, 10*time.Second, nodes...)
}
