package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/redis/rueidis"
)

// TestV2_Pause_NoLateStartNoOverlap is issue 32, "What it must show" 3:
// two nodes, `lock_ttl: 1s`, a `*/2 * * * * *` job that ignores SIGTERM
// and runs 1.2 s; the node that won a slot is SIGSTOPped for 2.5 s at an
// offset from that slot, at 16 offsets spread over the 2 s period, back to
// back on one pair of daemons. Before v2 a node paused right around its
// won slot forked it 2.5 s late, after its lease had expired, while the
// other node ran the next slot: two runs at once.
//
// Both nodes' clocks are 300 ms fast (CRONLOCK_INTERNAL_CLOCK_OFFSET,
// within node.max_clock_skew 1s): each sends its claim 300 ms before the
// slot, is answered too_early and sends it again at the slot in Redis time
// (docs/protocol.md R2). For the offsets before the slot the test pauses
// the nodes in turn (one that would have won leaves the slot to the other
// at its rank's delay, or, paused between its claim and its fork, records
// it lock_lost); from the slot on it pauses the slot's winner, read from
// the ledger, during and after its run.
//
// Asserted, from the job's own output and the ledger in Redis: every run
// starts at or after its slot and at most lock_ttl after it (+100 ms for
// the fork and exec after the daemon's check); no two runs overlap in
// time; every run ends by itself (none is killed for a lost lease); a slot
// recorded skipped did not run. One overlap is excused, logged:
// a run that overran its 1.2 s on a loaded machine while the test held its
// daemon stopped, which therefore could not kill it when its lease expired
// (docs/protocol.md, "What stays impossible"); its nominal 1.2 s may not
// overlap the next run.
//
// By default the 16 offsets are taken once each, the nodes in turn (about
// 45 s); with TEST_PAUSE_ALL=1 each node is paused at all 16
// (about 90 s, too long for make test's budget).
func TestV2_Pause_NoLateStartNoOverlap(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := redisClient(t, srv.Addr())
	out := newLedger(t)
	const ttl, run, pause = time.Second, 1200 * time.Millisecond, 2500 * time.Millisecond
	l := shellQuote(out)
	line := `"$CRONLOCK_NODE_ID $CRONLOCK_SCHEDULED_TIME $(date +%s%N)"`
	cmd := fmt.Sprintf(`trap '' TERM; echo start %[1]s >> %[2]s; sleep %[3]g; echo end %[1]s done >> %[2]s`, line, l, run.Seconds())
	job := map[string]any{"name": "p", "schedule": "*/2 * * * * *", "command": cmd, "lock_ttl": ttl.String(),
		"timeout": "10s", "kill_grace": "5s"}
	cfg := redisConfig(srv.Addr(), job)
	cfg["node"] = map[string]any{"shutdown_timeout": "10s", "max_clock_skew": "1s"}
	early := []string{"CRONLOCK_INTERNAL_CLOCK_OFFSET=300ms"}
	nodes, ready := startNodes(t, writeConfig(t, cfg), nodeSpec{id: "n1", env: early}, nodeSpec{id: "n2", env: early})
	byName := map[string]*node{}
	for _, n := range nodes {
		byName[n.name] = n
	}

	var offsets []time.Duration
	for k := range 16 {
		offsets = append(offsets, -250*time.Millisecond+time.Duration(k)*125*time.Millisecond)
	}
	all := os.Getenv("TEST_PAUSE_ALL") != ""
	type round struct {
		node string
		slot int64
		off  time.Duration
	}
	var rounds []round
	done := map[string]int{} // node → offsets taken (all)
	var wg sync.WaitGroup
	defer wg.Wait() // a failed round ends the test after its pauses (each resumes its node)
	var mu sync.Mutex
	paused := map[string]bool{}
	type interval struct {
		node     string
		from, to time.Time
	}
	var frozen []interval // each pause as taken: from after SIGSTOP, to before SIGCONT
	skipped := 0
	slot := ceilSecond(ready.Add(1500 * time.Millisecond))
	slot += slot % 2
	for deadline := time.Now().Add(150 * time.Second); ; slot += 2 {
		if (!all && len(rounds) == len(offsets)) || (all && done["n1"] == len(offsets) && done["n2"] == len(offsets)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d rounds (%d slots without a winner to pause), the rounds are not done: %v", len(rounds), skipped, done)
		}
		// The node to pause: the slot's winner once the slot is decided
		// (at or after the slot: a claim decides nothing before it, R2);
		// for an offset before the slot, the node in turn (if it would
		// have won, the other one wins the slot at its rank's delay).
		k := len(rounds)
		if all {
			k = min(done["n1"], done["n2"])
		}
		off := offsets[k%len(offsets)]
		var w string
		if off < 20*time.Millisecond {
			w = []string{"n1", "n2"}[len(rounds)%2]
			sleepUntil(time.Unix(slot, 0).Add(off - 50*time.Millisecond))
		} else {
			sleepUntil(time.Unix(slot, 0).Add(20 * time.Millisecond))
			w = winner(t, c, slot)
		}
		mu.Lock()
		busy := paused[w]
		mu.Unlock()
		if w == "" || busy || (all && done[w] == len(offsets)) {
			skipped++
			continue
		}
		if all {
			k = done[w]
		}
		done[w]++
		r := round{node: w, slot: slot, off: offsets[k]}
		rounds = append(rounds, r)
		mu.Lock()
		paused[w] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := byName[r.node]
			sleepUntil(time.Unix(r.slot, 0).Add(r.off))
			_ = syscall.Kill(n.Pid(), syscall.SIGSTOP)
			stopped := time.Now()
			time.Sleep(pause) // the pause is the test
			contAt := time.Now()
			_ = syscall.Kill(n.Pid(), syscall.SIGCONT)
			mu.Lock()
			paused[r.node] = false
			frozen = append(frozen, interval{node: r.node, from: stopped, to: contAt})
			mu.Unlock()
		}()
	}
	wg.Wait()
	time.Sleep(run + 500*time.Millisecond) // the last run ends
	checkNotExited(t, "after the pauses", nodes...)
	stopAll(t, 15*time.Second, nodes...)

	runs := readIntervals(t, out)
	// pausesNear lists the pauses taken from slot from−2 through slot to.
	pausesNear := func(from, to int64) string {
		var ps []string
		for _, r := range rounds {
			if r.slot >= from-2 && r.slot <= to {
				at := time.Unix(r.slot, 0).Add(r.off)
				ps = append(ps, fmt.Sprintf("%s %s–%s", r.node, at.Format("15:04:05.000"), at.Add(pause).Format("15:04:05.000")))
			}
		}
		return strings.Join(ps, ", ")
	}
	// frozenAt reports whether node's daemon was stopped at at.
	frozenAt := func(node string, at time.Time) bool {
		for _, f := range frozen {
			if f.node == node && at.After(f.from) && at.Before(f.to) {
				return true
			}
		}
		return false
	}
	excused := 0
	ranSlot := map[int64]bool{}
	for i, r := range runs {
		ranSlot[r.Slot] = true
		if d := r.Start.Sub(time.Unix(r.Slot, 0)); d < 0 || d > ttl+100*time.Millisecond {
			t.Errorf("run of slot %d on %s started %v after its slot, want within [0, lock_ttl %v]", r.Slot, r.Node, d, ttl)
		}
		end := r.End
		if r.How != "done" {
			t.Errorf("run of slot %d on %s (started %s) has no end of its own: killed", r.Slot, r.Node, r.Start.Format("15:04:05.000"))
			end = r.Start.Add(run)
		}
		for _, o := range runs[i+1:] {
			// The one overlap no daemon can prevent (docs/protocol.md,
			// "What stays impossible"): r's daemon was stopped when o
			// started, so it could not kill r when its lease expired, and
			// r overran only because the machine stretched it past its
			// 1.2 s (its own start and end, measured by the job). r's
			// nominal end is still checked: a late fork shows there.
			if o.Start.Before(end) && !o.Start.Before(r.Start.Add(run)) && frozenAt(r.Node, o.Start) {
				excused++
				t.Logf("slot %d on %s %s–%s ran %v (nominal %v) while its daemon was stopped; slot %d on %s started at %s",
					r.Slot, r.Node, r.Start.Format("15:04:05.000"), end.Format("15:04:05.000"), end.Sub(r.Start), run,
					o.Slot, o.Node, o.Start.Format("15:04:05.000"))
				continue
			}
			if o.Start.Before(end) {
				t.Errorf("runs overlap: slot %d on %s %s–%s and slot %d on %s from %s; pauses %s%s%s", r.Slot, r.Node, r.Start.Format("15:04:05.000"),
					end.Format("15:04:05.000"), o.Slot, o.Node, o.Start.Format("15:04:05.000"), pausesNear(r.Slot, o.Slot),
					describeSlot(nodes, "p", r.Slot), describeSlot(nodes, "p", o.Slot))
			}
		}
	}
	occ := readOccurrences(t, c, "p")
	var summary []string
	for _, r := range rounds {
		o, _ := slotRecord(occ, r.slot)
		summary = append(summary, fmt.Sprintf("%s@%+dms:%s/%s", r.node, r.off.Milliseconds(), o.Status, o.Reason))
		if o.Status == "unknown" {
			t.Logf("slot %d recorded unknown:%s", r.slot, describeSlot(nodes, "p", r.slot))
		}
		if o.Status == "skipped" && ranSlot[r.slot] { // lock_lost (R3), or redis_error (a claim answered while its node was stopped)
			t.Errorf("slot %d: recorded skipped %s, yet it ran%s", r.slot, o.Reason, describeSlot(nodes, "p", r.slot))
		}
	}
	if excused > 1 {
		t.Errorf("%d runs overran their 1.2 s into the next run while their daemons were stopped: want at most one (a loaded machine)", excused)
	}
	if len(runs) < len(rounds)/2 {
		t.Errorf("got %d runs over %d rounds, want the job to have run at least every other round", len(runs), len(rounds))
	}
	t.Logf("%d rounds (%d slots skipped: no winner free to pause), %d runs: %s", len(rounds), skipped, len(runs),
		strings.Join(summary, " "))
}

// winner returns the node whose claim of slot is recorded (status claimed
// or ran) in job p's ledger, "" when none is.
func winner(t *testing.T, c rueidis.Client, slot int64) string {
	t.Helper()
	v := hget(t, c, "cronlock:occ:p", strconv.FormatInt(slot, 10))
	if v == "" {
		return ""
	}
	var o occurrence
	if err := json.Unmarshal([]byte(v), &o); err != nil {
		t.Fatalf("ledger record of slot %d: %q: %v", slot, v, err)
	}
	if o.Status != "claimed" && o.Status != "ran" {
		return ""
	}
	return o.Node
}
