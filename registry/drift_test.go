package registry

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cronlock/cronlock/redislock"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// driftDaemon is a heartbeat actor with its own registry, for the drift
// gauge.
type driftDaemon struct {
	daemon
	reg *prometheus.Registry
}

func newDriftDaemon(r *redislock.Redis, id string, jobs map[string]string) driftDaemon {
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	h := New(Options{Log: zap.New(core), Store: r, Registry: reg, Self: Record{NodeID: id, Instance: id + "-inst",
		Jobs: jobs}})
	return driftDaemon{daemon: daemon{h: h, logs: logs}, reg: reg}
}

func (d driftDaemon) drift(t *testing.T) float64 {
	t.Helper()
	mfs, err := d.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "cronlock_config_drift" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("cronlock_config_drift not registered")
	return 0
}

// Three nodes on one real Redis, one with an extra job and one with a
// changed one: each logs the drift once naming both jobs (with its point
// of view: added, removed, changed) and sets cronlock_config_drift; after
// SetJobs aligns them, one "over" line each and the gauge is 0.
func TestHeartbeat_ConfigDrift(t *testing.T) {
	r, _ := newRedis(t)
	ctx := t.Context()
	base := map[string]string{"backup": "b1", "report": "r1"}
	a := newDriftDaemon(r, "a", base)
	b := newDriftDaemon(r, "b", map[string]string{"backup": "b1", "report": "r1", "extra": "e1"})
	c := newDriftDaemon(r, "c", map[string]string{"backup": "b2", "report": "r1"})
	nodes := []driftDaemon{a, b, c}
	for range 3 {
		for _, d := range nodes {
			d.h.beat(ctx)
		}
	}
	want := map[string][3][]string{ // added, removed, changed
		"a": {nil, {"extra"}, {"backup"}},
		"b": {{"extra"}, nil, {"backup"}},
		"c": {nil, {"extra"}, {"backup"}},
	}
	for _, d := range nodes {
		id := d.h.self.NodeID
		lines := d.logs.FilterMessageSnippet("config drift: this node's job configuration differs").All()
		// a's first beat saw no other node, b's first saw a only: the
		// drift they log last is the full one.
		if len(lines) == 0 {
			t.Fatalf("%s: no drift line", id)
		}
		last := lines[len(lines)-1].ContextMap()
		for i, k := range []string{"added", "removed", "changed"} {
			if got := strs(last[k]); !slices.Equal(got, want[id][i]) {
				t.Errorf("%s: %s = %q, want %q (line %v)", id, k, got, want[id][i], last)
			}
		}
		if g := d.drift(t); g != 1 {
			t.Errorf("%s: cronlock_config_drift = %v, want 1", id, g)
		}
		before := len(lines)
		d.h.beat(ctx)
		if n := d.logs.FilterMessageSnippet("config drift: this node's").Len(); n != before {
			t.Errorf("%s: a beat without change logged the drift again (%d lines, want %d)", id, n, before)
		}
	}
	for _, d := range nodes {
		d.h.self.Jobs = base // what SetJobs does in the actor's goroutine
	}
	for range 2 {
		for _, d := range nodes {
			d.h.beat(ctx)
		}
	}
	for _, d := range nodes {
		if g := d.drift(t); g != 0 {
			t.Errorf("%s after aligning: cronlock_config_drift = %v, want 0", d.h.self.NodeID, g)
		}
		if n := d.logs.FilterMessageSnippet("config drift over").Len(); n != 1 {
			t.Errorf("%s after aligning: %d \"drift over\" lines, want 1", d.h.self.NodeID, n)
		}
	}
}

// SetJobs reaches the running actor, which writes the new hashes at once.
func TestHeartbeat_SetJobsRewritesTheRecord(t *testing.T) {
	r, _ := newRedis(t)
	d := newDriftDaemon(r, "a", map[string]string{"x": "1"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.h.Run(ctx) }()
	if err := d.h.SetJobs(ctx, map[string]string{"y": "2"}, "h2"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		recs, err := r.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := Decode(recs); len(got) == 1 && got[0].ConfigHash == "h2" && got[0].Jobs["y"] == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("record not rewritten with the new jobs within 3 s (every 5 s: SetJobs must beat at once)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
