package e2e

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// clockSkewRefused is the start of the warning of a claim refused because
// Redis time was outside the slot's claim window (docs/protocol.md, R2).
const clockSkewRefused = "claim refused: redis time is outside the slot's claim window"

// TestV2_Clock_FastNodeRunsNothingEarly is issue 32, "What it must show"
// 1 (fast): a node whose clock is 1 h fast (CRONLOCK_INTERNAL_CLOCK_OFFSET)
// runs a per-second job for 3 s and stops; a node with the right clock
// then runs it for 6 s. Before v2 the fast node ran every slot an hour
// early and the right node was then refused every slot for the hour.
//
// Asserted, from the job's own output and the ledger in Redis: the right
// node runs every slot from its first to the last before its stop, each
// once, none before its fire time; the fast node runs nothing; no record
// exists for a slot ahead of Redis time (the fast node's claims write
// nothing); the slots while no right node ran are recorded missed, not
// silent; the fast node warned, with its offset from Redis time.
func TestV2_Clock_FastNodeRunsNothingEarly(t *testing.T) {
	t.Parallel()
	testWrongClock(t, time.Hour)
}

// TestV2_Clock_SlowNodeRunsNothingLate is the same with a node 10 s
// behind: it runs nothing late (its slots are 10 s old in Redis time and
// had no record, so a claim decided by the record alone would run them),
// and the right node then runs every slot.
func TestV2_Clock_SlowNodeRunsNothingLate(t *testing.T) {
	t.Parallel()
	testWrongClock(t, -10*time.Second)
}

func testWrongClock(t *testing.T, offset time.Duration) {
	srv := redistest.Start(t)
	c := redisClient(t, srv.Addr())
	out := newLedger(t)
	job := map[string]any{"name": "tick", "schedule": "* * * * * *", "command": tokenCommand(out, "")}
	cfg := redisConfig(srv.Addr(), job)
	cfg["node"] = map[string]any{"shutdown_timeout": "10s", "max_clock_skew": "1s"}
	cfgFile := writeConfig(t, cfg)

	wrong, wrongReady := startNodes(t, cfgFile, nodeSpec{id: "wrong", env: []string{"CRONLOCK_INTERNAL_CLOCK_OFFSET=" + offset.String()}})
	sleepUntil(wrongReady.Add(3 * time.Second)) // the wrong node runs alone for 3 s: that is the test
	stopAll(t, 10*time.Second, wrong...)
	wrongStop := time.Now()

	right, rightReady := startNodes(t, cfgFile, nodeSpec{id: "right"})
	sleepUntil(rightReady.Add(6 * time.Second))
	stopAll(t, 10*time.Second, right...)
	rightStop := time.Now()

	runs := readTokenRuns(t, out)
	bySlot := map[int64][]string{}
	for _, r := range runs {
		bySlot[r.Slot] = append(bySlot[r.Slot], r.Node)
		if r.Node != "right" {
			t.Errorf("run %v: the node whose clock is %v off ran, want only the right node", r, offset)
		}
		if r.Start.Before(time.Unix(r.Slot, 0)) {
			t.Errorf("run %v started %v before its slot", r, time.Unix(r.Slot, 0).Sub(r.Start))
		}
		if late := r.Start.Sub(time.Unix(r.Slot, 0)); late > time.Second {
			t.Errorf("run %v started %v after its slot, want within the answer window (1s)", r, late)
		}
	}
	want := slotsBetween(ceilSecond(rightReady)+1, rightStop.Unix()-1, 1)
	checkOncePerSlot(t, right, "tick", bySlot, want)
	if len(want) < 4 {
		t.Fatalf("checked %d slots of the right node, want at least 4", len(want))
	}

	// The ledger: nothing ahead of Redis time; every slot since the wrong
	// node started either ran on the right node or is recorded missed.
	occ := readOccurrences(t, c, "tick")
	for id, o := range occ {
		if s, err := strconv.ParseInt(id, 10, 64); err != nil || s > rightStop.Unix()+1 {
			t.Errorf("ledger record %s (%s %s on %s): after the last slot, want none ahead of Redis time%s",
				id, o.Status, o.Reason, o.Node, describeRecords(occ))
		}
	}
	firstRun := rightStop.Unix()
	if len(runs) > 0 {
		firstRun = runs[0].Slot
	}
	// From the second slot after the wrong node was ready: its first audit
	// (a second after its start) began the ledger's audit there
	// (audited_to, docs/protocol-v2.md R8).
	missed := 0
	for s := ceilSecond(wrongReady) + 2; s < firstRun; s++ {
		missed++
		o, ok := slotRecord(occ, s)
		if !ok || o.Status != "missed" || o.Reason == "" {
			t.Errorf("slot %d (the wrong node ran alone or no node ran): record %+v (found %v), want missed with a reason%s",
				s, o, ok, describeRecords(occ))
			break
		}
	}
	for _, s := range want {
		if o, ok := slotRecord(occ, s); !ok || o.Status != "ran" || o.Node != "right" {
			t.Errorf("slot %d: record %+v (found %v), want ran on right", s, o, ok)
		}
	}

	// The wrong node's warning names its offset from Redis time.
	var warned []logEntry
	for _, e := range wrong[0].Logs() {
		if strings.HasPrefix(e.Msg(), clockSkewRefused) {
			warned = append(warned, e)
		}
	}
	if missed < 1 {
		t.Errorf("checked %d slots before the right node's first run for a missed record, want at least 1", missed)
	}
	if len(warned) == 0 {
		t.Fatalf("the node %v off logged no %q warning; its log:\n%s", offset, clockSkewRefused, wrong[0].tail(30))
	}
	w := warned[0]
	got, ok := durationField(w, "offset_from_redis")
	if w.Str("level") != "warn" || !ok || math.Abs((got-offset).Seconds()) > 0.5 {
		t.Errorf("warning %v: want level warn and offset_from_redis %v ± 0.5 s", w, offset)
	}
	t.Logf("wrong node (%v) ran %s–%s and warned %d times (offset_from_redis %v); right node ran %d runs over slots %d–%d; %d slots before them recorded missed",
		offset, wrongReady.Format("15:04:05.000"), wrongStop.Format("15:04:05.000"), len(warned), got, len(runs),
		want[0], want[len(want)-1], missed)
}
