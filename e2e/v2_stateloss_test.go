package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// repairWarning is the start of the warning of a claim that found the
// job's ledger behind what the node had seen (docs/protocol.md, R5).
const repairWarning = "ledger state repaired"

// TestV2_StateLoss_RedisRestartedEmpty is issue 32, "What it must show" 2:
// redis-server is restarted empty (no persistence) under 3 nodes × 5
// per-second jobs and a per-second `max_runs: 1` job, with manual runs
// (`cronlock run JOB`, taken by a daemon of the cluster) and backfills
// (`cronlock backfill`, run in the CLI's process) before and after it.
// Before v2 `max_runs` forgot its count and fencing tokens went back
// (1, 2, 3, 3, 4).
//
//   - before the restart: manual run 1 of job00; backfill 1 of job01 over
//     3 slots before the nodes started (no node ran them);
//   - Redis restarted empty, 500 ms into a second;
//   - once a node logged the repair: manual run 2 of job00; backfill 2 of
//     job01 over the same 3 slots (their records were lost with Redis: it
//     must not run them again); job02 paused for 3 s (`pause -for`) and
//     backfill 3 of the slots the pause skipped (a backfill that mints
//     tokens after the loss).
//
// Asserted, from the jobs' own output (CRONLOCK_FENCING_TOKEN,
// CRONLOCK_TRIGGER, CRONLOCK_SCHEDULED_TIME): no slot of any job ran
// twice, on any path; the max_runs job ran exactly once; per job, every
// token is strictly greater than every token of a run that started before
// it (schedule, manual and backfill alike); every slot before the restart
// and from the repair's refusal window on (docs/protocol.md, R5: slots up
// to node.max_clock_skew after the loss is detected are not run) ran once,
// except a slot of job00 a manual run held the lease at (skipped overlap);
// the manual runs and backfills 1 and 3 ran, backfill 2 ran nothing; a
// node logged the repair at warning level.
func TestV2_StateLoss_RedisRestartedEmpty(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	out := newLedger(t)
	var jobs []map[string]any
	var names []string
	for i := range 5 {
		name := fmt.Sprintf("job%02d", i)
		jobs, names = append(jobs, map[string]any{"name": name, "schedule": "* * * * * *", "command": tokenCommand(out, "")}), append(names, name)
	}
	jobs = append(jobs, map[string]any{"name": "once", "schedule": "* * * * * *", "command": tokenCommand(out, ""), "max_runs": 1})
	cfg := redisConfig(srv.Addr(), jobs...)
	// Heartbeats every 500 ms: `cronlock run` hands the run to a live
	// daemon (it runs it itself when it sees none, as right after Redis
	// lost the node records).
	cfg["node"] = map[string]any{"shutdown_timeout": "10s", "max_clock_skew": "1s", "heartbeat_interval": "500ms"}
	cfgFile := writeConfig(t, cfg)
	before := time.Now()
	nodes, ready := startNodes(t, cfgFile, nodeSpec{id: "n1"}, nodeSpec{id: "n2"}, nodeSpec{id: "n3"})

	lines := func() int { return len(readTokenRuns(t, out)) }
	manual := func(which string) {
		t.Helper()
		n := len(manualRuns(readTokenRuns(t, out)))
		waitFor(t, 5*time.Second, "the 3 nodes listed live", func() bool {
			s := readNodes(t, cfgFile).states()
			return s["n1"] == "live" && s["n2"] == "live" && s["n3"] == "live"
		})
		if o, errs, code := cli(t, cfgFile, "run", "job00"); code != 0 || !strings.Contains(o+errs, "taken by n") {
			t.Fatalf("manual run %s: exit %d, want 0 and taken by a node of the cluster\n%s%s", which, code, o, errs)
		}
		waitFor(t, 10*time.Second, "manual run "+which+" in the output", func() bool {
			return len(manualRuns(readTokenRuns(t, out))) > n
		})
	}
	backfill := func(job string, from, to int64, args ...string) (int, string) {
		t.Helper()
		return backfillCmd(t, cfgFile, "bf", append([]string{job, "-from", time.Unix(from, 0).UTC().Format(time.RFC3339),
			"-to", time.Unix(to, 0).UTC().Format(time.RFC3339)}, args...)...)
	}

	sleepUntil(ready.Add(2 * time.Second))
	manual("1")
	bfFrom, bfTo := before.Unix()-6, before.Unix()-4
	if code, o := backfill("job01", bfFrom, bfTo); code != 0 || !strings.Contains(o, "3 ran") {
		t.Errorf("backfill 1: exit %d, want 0 and 3 slots ran:\n%s", code, o)
	}

	restartAt := nextPhase(ready.Add(4*time.Second), 500*time.Millisecond)
	sleepUntil(restartAt)
	linesBefore := lines()
	srv.Restart()
	restarted := time.Now()
	var repaired logEntry
	waitFor(t, 5*time.Second, "a "+repairWarning+" warning", func() bool {
		for _, n := range nodes {
			for _, e := range n.Logs() {
				if strings.HasPrefix(e.Msg(), repairWarning) && e.Time().After(restartAt) {
					repaired = e
					return true
				}
			}
		}
		return false
	})

	manual("2")
	if code, o := backfill("job01", bfFrom, bfTo); code == 0 || strings.Contains(o, "\nran ") || strings.HasPrefix(o, "ran ") ||
		strings.Count(o, "state_lost") != 3 {
		t.Errorf("backfill 2 (the slots backfill 1 ran, their records lost with Redis): exit %d, want 1 and the 3 slots not run, state_lost:\n%s", code, o)
	}
	pausedAt := time.Now()
	if o, errs, code := cli(t, cfgFile, "pause", "job02", "-for", "3s"); code != 0 {
		t.Fatalf("pause job02: exit %d\n%s%s", code, o, errs)
	}
	// Paused from at most a second after pausedAt (the CLI's write) to 3 s
	// after that write.
	pFrom, pTo := ceilSecond(pausedAt)+1, pausedAt.Add(3*time.Second).Unix()
	sleepUntil(time.Unix(pTo+3, 0)) // past the last paused slot's answer window (1s): a backfill may claim it
	code, bout3 := backfill("job02", pFrom, pTo)
	if code != 0 || !strings.Contains(bout3, fmt.Sprintf("%d ran", pTo-pFrom+1)) {
		t.Errorf("backfill 3 (the slots job02 skipped paused, %d–%d): exit %d, want 0 and every slot ran:\n%s", pFrom, pTo, code, bout3)
	}
	sleepUntil(time.Now().Add(2 * time.Second))
	checkNotExited(t, "after the Redis restart", nodes...)
	stopAt := time.Now()
	stopAll(t, 15*time.Second, nodes...)

	runs := readTokenRuns(t, out)
	byJob := map[string][]tokenRun{}
	for _, r := range runs {
		byJob[r.Job] = append(byJob[r.Job], r)
	}
	// The repair refuses the slots up to max_clock_skew (1 s) after the
	// loss was detected, at each job's first claim after the restart: the
	// first warning's, or up to a slot later for a job whose first claim
	// (or audit) came a slot later.
	afterFrom := repaired.Time().Add(2*time.Second).Unix() + 1
	wantBefore := slotsBetween(ceilSecond(ready)+1, restartAt.Unix()-1, 1)
	wantAfter := slotsBetween(afterFrom, stopAt.Unix()-1, 1)
	for _, job := range names {
		ran := map[int64][]string{}
		for _, r := range byJob[job] {
			if r.Trigger != "manual" {
				ran[r.Slot] = append(ran[r.Slot], r.Trigger+" on "+r.Node)
			}
		}
		want := wantAfter
		if job == "job02" { // paused: its slots then ran by backfill 3
			want = nil
			for _, s := range wantAfter {
				if s < pausedAt.Unix() || s > pTo+1 {
					want = append(want, s)
				}
			}
		}
		checkOncePerSlot(t, nodes, job, ran, withoutOverlapped(append(wantBefore, want...), manualRuns(byJob[job])))
		checkTokensIncrease(t, job, byJob[job])
	}
	if got := byJob["once"]; len(got) != 1 {
		t.Errorf("the max_runs: 1 job: got runs %v, want exactly one", got)
	}
	checkTokensIncrease(t, "once", byJob["once"])
	if len(manualRuns(byJob["job00"])) != 2 {
		t.Errorf("job00: got manual runs %v, want 2", manualRuns(byJob["job00"]))
	}
	for trig, want := range map[string]int{"job01": 3, "job02": int(pTo - pFrom + 1)} {
		n := 0
		for _, r := range byJob[trig] {
			if r.Trigger == "backfill" {
				n++
			}
		}
		if n != want {
			t.Errorf("%s: got %d backfill runs, want %d", trig, n, want)
		}
	}
	if repaired.Str("level") != "warn" {
		t.Errorf("repair log %v: want level warn", repaired)
	}
	if len(wantBefore) < 2 || len(wantAfter) < 3 {
		t.Errorf("checked %d slots before the restart and %d after, want at least 2 and 3", len(wantBefore), len(wantAfter))
	}
	t.Logf("restart at %s took %v, repair logged %s by %s (%s); %d runs before the restart, %d after; checked %d + %d slots; manual runs %v",
		restartAt.Format("15:04:05.000"), restarted.Sub(restartAt).Round(time.Millisecond), repaired.Time().Format("15:04:05.000"),
		repaired.Str("node_id"), repaired.Str("job"), linesBefore, len(runs)-linesBefore, len(wantBefore), len(wantAfter),
		manualRuns(byJob["job00"]))
}

// withoutOverlapped is slots less those a manual run may have held the
// job's lease at: such a slot is skipped `overlap` (the job's overlap
// policy), which is right. The lease is taken before the command starts
// and released after it ends, so the window is widened by half a second
// each side.
func withoutOverlapped(slots []int64, manual []tokenRun) []int64 {
	var out []int64
next:
	for _, s := range slots {
		at := time.Unix(s, 0)
		for _, m := range manual {
			if !at.Before(m.Start.Add(-500*time.Millisecond)) && !at.After(m.End.Add(500*time.Millisecond)) {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// manualRuns are the runs of trigger manual among runs.
func manualRuns(runs []tokenRun) []tokenRun {
	var out []tokenRun
	for _, r := range runs {
		if r.Trigger == "manual" {
			out = append(out, r)
		}
	}
	return out
}

// checkTokensIncrease fails unless job's runs (in start order, as
// readTokenRuns returns them) have strictly increasing fencing tokens:
// every token is greater than the token of every run that started before
// it, whatever the path that minted it.
func checkTokensIncrease(t *testing.T, job string, runs []tokenRun) {
	t.Helper()
	for i := 1; i < len(runs); i++ {
		if runs[i].Token <= runs[i-1].Token {
			t.Errorf("job %s: run %v has token %d, not above the run started before it (%v)", job, runs[i], runs[i].Token, runs[i-1])
		}
	}
}

// TestV2_StateLoss_MaxRunsAcrossEveryNodeRestart: Redis and the only node
// lose their memory at once: the node, stopped after its `max_runs: 1`
// job ran, starts again after Redis lost its state (FLUSHALL). The count
// it saw is in its state directory (statedir.SeenCounts): its first claim
// repairs the ledger (a repair warning) and the job stays done. Without
// the file nothing remembered the count and the job ran again (chaos seed
// 17895812882841228652 found it with a node restarted while another kept
// running; docs/protocol.md, R6).
func TestV2_StateLoss_MaxRunsAcrossEveryNodeRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	out := newLedger(t)
	job := map[string]any{"name": "once", "schedule": "* * * * * *", "command": tokenCommand(out, ""), "max_runs": 1}
	cfgFile := writeConfig(t, redisConfig(srv.Addr(), job))
	nodes, _ := startNodes(t, cfgFile, nodeSpec{id: "n1"})
	waitFor(t, 10*time.Second, "the job's one run and a max_runs skip after it", func() bool {
		return len(readTokenRuns(t, out)) == 1 && len(skipsOf(nodes[0], "once", "max_runs")) > 0
	})
	stopAll(t, 10*time.Second, nodes...)
	srv.Do("FLUSHALL")
	again, ready := startNodes(t, cfgFile, nodeSpec{id: "n1"})
	n1 := again[0]
	n1.WaitLog(5*time.Second, "a "+repairWarning+" warning", func(e logEntry) bool {
		return strings.HasPrefix(e.Msg(), repairWarning) && e.Str("level") == "warn"
	})
	waitFor(t, 5*time.Second, "a max_runs skip after the restart", func() bool {
		for _, e := range skipsOf(n1, "once", "max_runs") {
			if e.Time().After(ready) {
				return true
			}
		}
		return false
	})
	sleepUntil(time.Now().Add(1500 * time.Millisecond))
	stopAll(t, 10*time.Second, n1)
	if runs := readTokenRuns(t, out); len(runs) != 1 {
		t.Errorf("the max_runs: 1 job ran %d times across the restarts, want once: %+v", len(runs), runs)
	}
}

// skipsOf returns n's "slot skipped" entries of job with reason.
func skipsOf(n *node, job, reason string) []logEntry {
	var out []logEntry
	for _, e := range logsOf(n, "slot skipped", job) {
		if e.Str("reason") == reason {
			out = append(out, e)
		}
	}
	return out
}

// TestV2_StateLoss_RestartedNodeSeesTheLoss: Redis loses its state
// (FLUSHALL) while the holder runs a slot of a job without max_runs, and
// the other node, restarted just before, is the only node up (the holder
// is stopped). The restarted node's kept ledger counts
// (statedir.SeenCounts) tell it the ledger went back: it logs the repair
// warning and marks the loss (R5). Without the file nothing could tell:
// the holder was stopped and the restarted node had seen nothing.
//
// What R5 does not cover yet (docs/protocol.md, "What stays impossible"):
// the holder's lease was lost with the state, so a claim of a slot more
// than max_clock_skew after the loss was detected finds the lease free
// while the holder's run goes on (chaos seed 16021333915812110740).
func TestV2_StateLoss_RestartedNodeSeesTheLoss(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	out := newLedger(t)
	job := map[string]any{"name": "long", "schedule": "*/3 * * * * *", "command": intervalCommand(out, 4*time.Second),
		"lock_ttl": "30s", "kill_grace": "1s"}
	cfgFile := writeConfig(t, redisConfig(srv.Addr(), job))
	nodes, ready := startNodes(t, cfgFile, nodeSpec{id: "n1"}, nodeSpec{id: "n2"})
	byName := map[string]*node{nodes[0].name: nodes[0], nodes[1].name: nodes[1]}
	held := runAfter(t, out, ready.Add(2*time.Second))
	holder := byName[held.Node]
	other := byName[map[string]string{"n1": "n2", "n2": "n1"}[held.Node]]
	kept := filepath.Join(stateDir(t, other.name), "seen-counts.json")
	waitFor(t, 2*time.Second, other.name+" keeping the job's ledger counts", func() bool {
		data, _ := os.ReadFile(kept)
		return strings.Contains(string(data), `"long"`)
	})
	holder.Signal(syscall.SIGSTOP)                                        // no claim, audit or renewal of its own: only the restarted node can tell
	t.Cleanup(func() { _ = syscall.Kill(holder.Pid(), syscall.SIGCONT) }) // a failed test still lets it stop
	stopAll(t, 10*time.Second, other)
	srv.Do("FLUSHALL")
	again, restarted := startNodes(t, cfgFile, nodeSpec{id: other.name})
	other = again[0]
	other.WaitLog(5*time.Second, "a "+repairWarning+" warning", func(e logEntry) bool {
		return strings.HasPrefix(e.Msg(), repairWarning) && e.Str("level") == "warn" && !e.Time().Before(restarted)
	})
	holder.Signal(syscall.SIGCONT)
	stopAll(t, 15*time.Second, holder, other)
}

// TestV2_StateLoss_LeaseOfARunGoingOnIsTakenAgain: Redis loses its state
// (FLUSHALL) half a second into a 7 s run of an `overlap: skip` job due
// every 2 s, both nodes up. The holder's next renewal (every
// max_clock_skew/2) finds its lease gone and takes it again, with a
// warning (renewScript, docs/protocol.md R3); the slots up to
// max_clock_skew after the loss is detected are refused (R5), and the
// later ones find the lease held: no run starts beside the one going on.
// Before, the lease stayed free until the holder's next renewal at
// lock_ttl/3, and the next claim ran beside it (chaos seed
// 16021333915812110740).
func TestV2_StateLoss_LeaseOfARunGoingOnIsTakenAgain(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	out := newLedger(t)
	const run = 7 * time.Second
	job := map[string]any{"name": "long", "schedule": "*/2 * * * * *", "command": intervalCommand(out, run),
		"lock_ttl": "30s", "kill_grace": "1s"}
	cfgFile := writeConfig(t, redisConfig(srv.Addr(), job))
	nodes, ready := startNodes(t, cfgFile, nodeSpec{id: "n1"}, nodeSpec{id: "n2"})
	held := runAfter(t, out, ready.Add(2*time.Second))
	sleepUntil(time.Unix(held.Slot, 0).Add(500 * time.Millisecond))
	srv.Do("FLUSHALL")
	var holder *node
	for _, n := range nodes {
		if n.name == held.Node {
			holder = n
		}
	}
	holder.WaitLog(3*time.Second, "its lease taken again", func(e logEntry) bool {
		return strings.HasPrefix(e.Msg(), "lease taken again") && e.Str("level") == "warn"
	})
	sleepUntil(time.Unix(held.Slot, 0).Add(run + time.Second)) // the held run has ended; slots S+2 … S+6 came due
	stopAll(t, 15*time.Second, nodes...)

	runs := readIntervals(t, out)
	for i, r := range runs {
		end := r.End
		if end.IsZero() {
			end = r.Start.Add(run)
		}
		for _, o := range runs[i+1:] {
			if o.Start.Before(end) {
				t.Errorf("runs overlap: slot %d on %s %s–%s and slot %d on %s from %s%s", r.Slot, r.Node,
					r.Start.Format("15:04:05.000"), end.Format("15:04:05.000"), o.Slot, o.Node, o.Start.Format("15:04:05.000"),
					describeSlot(nodes, "long", o.Slot))
			}
		}
	}
}

// runAfter waits for the intervalCommand ledger out to hold the start of
// a run of a slot at or after from, and returns it.
func runAfter(t *testing.T, out string, from time.Time) interval {
	t.Helper()
	var held interval
	waitFor(t, 15*time.Second, "a run of a slot from "+from.Format("15:04:05"), func() bool {
		for _, r := range readIntervals(t, out) {
			if r.Slot >= from.Unix() {
				held = r
				return true
			}
		}
		return false
	})
	return held
}
