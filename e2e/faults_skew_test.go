package e2e

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// skewWarning is the start of the health monitor's log when |local clock −
// Redis TIME| exceeds node.max_clock_skew.
const skewWarning = "clock skew against redis exceeds node.max_clock_skew"

// TestClockSkew_BeyondMaxSkewRunsNothing is issue 4, item 4, under protocol
// v2 (docs/protocol.md, R2: Redis time is the clock of a claim): four
// nodes whose clocks are offset by −1.5 s, 0, +0.5 s and +1.5 s (the
// internal CRONLOCK_INTERNAL_CLOCK_OFFSET) run 5 jobs every second for
// 10 s, with node.max_clock_skew 1s (the answer window is 1 s).
//
// Asserted: every slot from the last start to the one before SIGTERM runs
// exactly once; the nodes 1.5 s off run nothing (their claims fall
// outside the slot's claim window in Redis time) and warn, with their
// offset; the node 0.5 s fast may claim (within the early edge) but no run
// starts before its slot or later than the answer window after it; the
// health monitor warns about the nodes beyond max_clock_skew only.
func TestClockSkew_BeyondMaxSkewRunsNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	out := newLedger(t)
	var jobs []map[string]any
	var names []string
	for i := range 5 {
		name := "job0" + string(rune('0'+i))
		jobs, names = append(jobs, map[string]any{"name": name, "schedule": "* * * * * *", "command": tokenCommand(out, "")}), append(names, name)
	}
	cfg := redisConfig(srv.Addr(), jobs...)
	cfg["node"] = map[string]any{"shutdown_timeout": "10s", "max_clock_skew": "1s"}
	offsets := map[string]time.Duration{"slow": -1500 * time.Millisecond, "exact": 0, "near": 500 * time.Millisecond,
		"fast": 1500 * time.Millisecond}
	var specs []nodeSpec
	for _, id := range []string{"slow", "exact", "near", "fast"} {
		specs = append(specs, nodeSpec{id: id, env: []string{"CRONLOCK_INTERNAL_CLOCK_OFFSET=" + offsets[id].String()}})
	}
	nodes, ready := startNodes(t, writeConfig(t, cfg), specs...)

	time.Sleep(10 * time.Second) // the cluster runs for a fixed span: that is the test
	stopAt := time.Now()
	stopAll(t, 15*time.Second, nodes...)

	runs := readTokenRuns(t, out)
	byJob := map[string]map[int64][]string{}
	byNode := map[string]int{}
	for _, r := range runs {
		if byJob[r.Job] == nil {
			byJob[r.Job] = map[int64][]string{}
		}
		byJob[r.Job][r.Slot] = append(byJob[r.Job][r.Slot], r.Node)
		byNode[r.Node]++
		if off := offsets[r.Node]; off < -time.Second || off > time.Second {
			t.Errorf("run %v: a node %v off (beyond max_clock_skew 1s) ran", r, off)
		}
		if d := r.Start.Sub(time.Unix(r.Slot, 0)); d < 0 || d > time.Second {
			t.Errorf("run %v started %v after its slot, want within [0, the answer window 1s]", r, d)
		}
	}
	want := slotsBetween(ceilSecond(ready)+1, stopAt.Unix()-1, 1)
	if len(want) < 8 {
		t.Errorf("checked %d slots, want at least 8", len(want))
	}
	for _, job := range names {
		checkOncePerSlot(t, nodes, job, byJob[job], want)
	}

	for _, n := range nodes {
		off := offsets[n.name]
		beyond := off < -time.Second || off > time.Second
		var health, refused []logEntry
		for _, e := range n.Logs() {
			switch {
			case strings.HasPrefix(e.Msg(), skewWarning):
				health = append(health, e)
			case strings.HasPrefix(e.Msg(), clockSkewRefused):
				refused = append(refused, e)
			}
		}
		switch {
		case !beyond && (len(health) > 0 || len(refused) > 0):
			t.Errorf("%s (offset %v, within max_clock_skew): got skew warnings %v %v, want none", n.name, off, health, refused)
		case beyond && (len(health) == 0 || len(refused) == 0):
			t.Errorf("%s (offset %v): got %d health and %d claim skew warnings, want both", n.name, off, len(health), len(refused))
		case beyond:
			// zap's production encoder writes durations as float seconds.
			skew, _ := durationField(health[0], "skew")
			got, _ := durationField(refused[0], "offset_from_redis")
			if math.Abs((skew-off).Seconds()) > 0.25 || math.Abs((got-off).Seconds()) > 0.25 {
				t.Errorf("%s: skew %v, offset_from_redis %v; want %v ± 0.25 s", n.name, skew, got, off)
			}
		}
	}
	t.Logf("runs per node %v over %d slots", byNode, len(want))
}
