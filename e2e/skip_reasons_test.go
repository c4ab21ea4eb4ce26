package e2e

import (
	"hash/fnv"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestSkipReasons_RedisFrozenIsRedisError is issue 9, item 4: redis-server
// is frozen (SIGSTOP) for 10 s under a per-second job. Each claim then
// hangs until its 2 s timeout, and the fires that arrive meanwhile are held
// and decided when it fails: redis_error. Before, they were skipped
// overlap_local ("this node still runs it") while nothing ran.
//
// Asserted: no slot is skipped overlap_local while no run of an earlier
// slot is running (the ledger says when runs ended); every slot whose fire time
// lies in the freeze and more than 2 s before its end is skipped
// redis_error (not run); from 1.5 s after the resume every slot runs. The
// claims still pending at the resume are answered then and may run, or
// find a lease that one of this node's timed-out claims took when Redis
// executed it at the resume (overlap naming this node; the janitor
// releases it): those slots are only logged.
func TestSkipReasons_RedisFrozenIsRedisError(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	job := map[string]any{"name": "tick", "schedule": "* * * * * *", "command": ledgerCommand(ledger, "")}
	nodes, ready := startNodes(t, writeConfig(t, redisConfig(srv.Addr(), job)), nodeSpec{id: "solo"})
	n := nodes[0]

	freezeAt := nextPhase(ready.Add(2*time.Second), 100*time.Millisecond)
	sleepUntil(freezeAt)
	srv.Pause()
	sleepUntil(freezeAt.Add(10 * time.Second))
	srv.Resume()
	resumedAt := time.Now()
	sleepUntil(resumedAt.Add(4 * time.Second))
	stopAt := time.Now()
	stopAll(t, 10*time.Second, n)
	if testing.Verbose() {
		for _, e := range n.Logs() {
			t.Logf("%s %s %v", e.Time().Format("05.000"), e.Msg(), e)
		}
	}

	runs := readLedger(t, ledger)
	// ranInto reports whether a run of an earlier slot was still running
	// when slot s came due (then overlap_local is the true reason: on a
	// loaded machine the run of the slot whose claim was answered at the
	// resume can outlast the next second).
	ranInto := func(s int64) bool {
		for _, r := range runs {
			if r.Slot < s && r.End.After(time.Unix(s, 0)) {
				return true
			}
		}
		return false
	}
	reasons := map[int64][]string{} // slot → skip reasons
	for _, e := range logsOf(n, "slot skipped", "tick") {
		reasons[e.Slot()] = append(reasons[e.Slot()], e.Str("reason"))
		if e.Str("reason") == "overlap_local" && !ranInto(e.Slot()) {
			t.Errorf("slot %d skipped overlap_local (%v), want no overlap_local: nothing ran", e.Slot(), e)
		}
		if e.Str("reason") == "overlap" && !strings.HasPrefix(e.Str("lease_holder"), "solo:") {
			t.Errorf("slot %d skipped overlap with lease holder %q, want this node's own timed-out claim", e.Slot(), e.Str("lease_holder"))
		}
	}
	ran := slotsByJob(runs)["tick"]
	certain := slotsBetween(ceilSecond(freezeAt), resumedAt.Add(-2*time.Second).Unix(), 1)
	for _, s := range certain {
		if got := reasons[s]; len(got) != 1 || got[0] != "redis_error" || len(ran[s]) != 0 {
			t.Errorf("slot %d (in the freeze): got skip reasons %v and runs %v, want one redis_error skip and no run", s, got, ran[s])
		}
	}
	checkOncePerSlot(t, nodes, "tick", ran, slotsBetween(ceilSecond(resumedAt.Add(1500*time.Millisecond)), stopAt.Unix()-1, 1))
	for s := resumedAt.Add(-2*time.Second).Unix() + 1; s < ceilSecond(resumedAt.Add(1500*time.Millisecond)); s++ {
		t.Logf("slot %d (claim pending at the resume): skip reasons %v, runs %v", s, reasons[s], ran[s])
	}
	if len(certain) < 7 {
		t.Errorf("checked %d slots in the freeze, want at least 7", len(certain))
	}
}

// jitterOf is the ticker's jitter of a job's slot: FNV-64a of the job name
// and the slot's Unix second in decimal, modulo the job's jitter
// (docs/architecture.md, "Ticker").
func jitterOf(job string, slot int64, maxJitter time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(job))
	h.Write([]byte(strconv.FormatInt(slot, 10)))
	return time.Duration(h.Sum64() % uint64(maxJitter))
}

// TestReload_JitterChangeInJitterWaitRunsSlot is issue 9, item 5: a SIGHUP
// that changes only a job's jitter while a slot is in its jitter wait. The
// slot runs once (before the fix the ticker dropped it, with no log and no
// metric), and so does the next one.
func TestReload_JitterChangeInJitterWaitRunsSlot(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	// A slot 4 s ahead on a per-5-second schedule, and a job name whose
	// jitter (of 4 s) for that slot is at least 2.5 s, so that a SIGHUP 1 s
	// after the slot lands in its jitter wait.
	slot := (time.Now().Unix() + 4 + 4) / 5 * 5
	var name string
	for i := 0; name == ""; i++ {
		if c := "jit" + strconv.Itoa(i); jitterOf(c, slot, 4*time.Second) >= 2500*time.Millisecond {
			name = c
		}
	}
	job := map[string]any{"name": name, "schedule": "*/5 * * * * *", "jitter": "4s", "command": ledgerCommand(ledger, "")}
	cfgPath := writeConfig(t, redisConfig(srv.Addr(), job))
	nodes, _ := startNodes(t, cfgPath, nodeSpec{id: "solo"})
	n := nodes[0]

	wait := jitterOf(name, slot, 4*time.Second)
	sleepUntil(time.Unix(slot, 0).Add(time.Second))
	job["jitter"] = "3s"
	writeConfigAt(t, cfgPath, redisConfig(srv.Addr(), job))
	n.Signal(syscall.SIGHUP)
	reloaded := n.WaitLog(5*time.Second, `"configuration reloaded"`, func(e logEntry) bool { return e.Msg() == "configuration reloaded" }).Time()
	if end := time.Unix(slot, 0).Add(wait); !reloaded.Before(end) {
		t.Fatalf("reload applied at %s, after the jitter wait ended (%s): the test overslept", reloaded.Format("15:04:05.000"), end.Format("15:04:05.000"))
	}
	waitLedgerSlotAfter(t, ledger, name, time.Unix(slot+4, 0)) // the next slot ran
	stopAll(t, 10*time.Second, n)

	ran := slotsByJob(readLedger(t, ledger))[name]
	checkOncePerSlot(t, nodes, name, ran, []int64{slot, slot + 5})
	for _, e := range logsOf(n, "slot skipped", name) {
		t.Errorf("slot %d skipped %s, want every slot run", e.Slot(), e.Str("reason"))
	}
	t.Logf("slot %d: jitter wait %v (old), reload at +%v; new jitter %v", slot, wait,
		reloaded.Sub(time.Unix(slot, 0)).Round(time.Millisecond), jitterOf(name, slot, 3*time.Second))
}
