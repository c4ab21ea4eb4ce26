package cluster

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cronlock/cronlock/redislock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
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
	h := NewHeartbeat(HeartbeatOptions{Log: zap.New(core), Store: r, Registry: reg, Self: Record{NodeID: id, Instance: id + "-inst",
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
		d.h.setJobs(base, "") // what SetJobs does in the actor's goroutine
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

// SetJobs reaches the running actor, which writes the new config hash and
// the new job hashes key at once.
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
		hv, err := r.NodeJobs(ctx, []string{"a"})
		if err != nil {
			t.Fatal(err)
		}
		var jh JobHashes
		_ = json.Unmarshal(hv[0], &jh)
		if got := Decode(recs); len(got) == 1 && got[0].ConfigHash == "h2" && got[0].Jobs == nil &&
			jh.ConfigHash == "h2" && len(jh.Jobs) == 1 && jh.Jobs["y"] == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("record and job hashes key not rewritten with the new jobs within 3 s (every 5 s: SetJobs must beat at once); key %s", hv[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// countingStore is a real Redis that counts the job hashes it is sent and
// the job hashes keys it is asked for.
type countingStore struct {
	*redislock.Redis
	mu    sync.Mutex
	sent  []int    // len(jobs) of every SwapNode
	reads []string // every id NodeJobs was asked for
}

func (c *countingStore) SwapNode(ctx context.Context, id string, value, jobs []byte, ttl time.Duration) ([]byte, bool, error) {
	c.mu.Lock()
	c.sent = append(c.sent, len(jobs))
	c.mu.Unlock()
	return c.Redis.SwapNode(ctx, id, value, jobs, ttl)
}

func (c *countingStore) NodeJobs(ctx context.Context, ids []string) ([][]byte, error) {
	c.mu.Lock()
	c.reads = append(c.reads, ids...)
	c.mu.Unlock()
	return c.Redis.NodeJobs(ctx, ids)
}

// take returns and resets the counts.
func (c *countingStore) take() (sent []int, reads []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sent, reads, c.sent, c.reads = c.sent, c.reads, nil, nil
	return sent, reads
}

func newCountingDaemon(s HeartbeatStore, id string, jobs map[string]string) driftDaemon {
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	h := NewHeartbeat(HeartbeatOptions{Log: zap.New(core), Store: s, Registry: reg, Self: Record{NodeID: id, Instance: id + "-inst", Jobs: jobs}})
	return driftDaemon{daemon: daemon{h: h, logs: logs}, reg: reg}
}

// A beat sends the job hashes only when they changed, and reads another
// node's only when its config hash is one the reader has not seen: a peer
// with the reader's own config hash is never read, a peer with another one
// once, and again only after it reloads. The drift is still found.
func TestHeartbeat_JobHashesWrittenAndReadOncePerConfig(t *testing.T) {
	r, _ := newRedis(t)
	ctx := t.Context()
	base := map[string]string{"backup": "b1", "report": "r1"}
	sa, sb, sc := &countingStore{Redis: r}, &countingStore{Redis: r}, &countingStore{Redis: r}
	a := newCountingDaemon(sa, "a", base)
	b := newCountingDaemon(sb, "b", map[string]string{"backup": "b1", "report": "r1"}) // a's config
	c := newCountingDaemon(sc, "c", map[string]string{"backup": "b2", "report": "r1"})
	for range 4 {
		for _, d := range []driftDaemon{a, b, c} {
			d.h.beat(ctx)
		}
	}
	sent, reads := sa.take()
	if len(sent) != 4 || sent[0] == 0 || sent[1] != 0 || sent[2] != 0 || sent[3] != 0 {
		t.Errorf("a's 4 beats sent job hashes of %v bytes; want them in the first beat only", sent)
	}
	if !slices.Equal(reads, []string{"c"}) {
		t.Errorf("a's 4 beats read the job hashes of %q; want c's once (b has a's config hash)", reads)
	}
	if g := a.drift(t); g != 1 {
		t.Errorf("a: cronlock_config_drift = %v, want 1 (c's backup differs)", g)
	}
	if _, reads := sb.take(); !slices.Equal(reads, []string{"c"}) {
		t.Errorf("b's beats read the job hashes of %q; want c's once", reads)
	}
	if _, reads := sc.take(); !slices.Equal(reads, []string{"a"}) {
		t.Errorf("c's beats read the job hashes of %q; want one of a and b (one config hash), once", reads)
	}
	c.h.setJobs(base, "") // c reloads to a's config
	c.h.beat(ctx)
	if sent, _ := sc.take(); len(sent) != 1 || sent[0] == 0 {
		t.Errorf("c's beat after a reload sent job hashes of %v bytes; want them sent", sent)
	}
	for range 2 {
		a.h.beat(ctx)
	}
	if _, reads := sa.take(); len(reads) != 0 {
		t.Errorf("a read %q after c reloaded to a's config hash; want no read", reads)
	}
	if g := a.drift(t); g != 0 || a.logs.FilterMessageSnippet("config drift over").Len() != 1 {
		t.Errorf("a after c's reload: cronlock_config_drift = %v, want 0 and one \"drift over\" line", g)
	}
}

// The job hashes key lost while the record lives (FLUSHALL, a failover, a
// DEL): the next beat writes it again, in the same beat.
func TestHeartbeat_LostJobHashesWrittenAgain(t *testing.T) {
	r, srv := newRedis(t)
	ctx := t.Context()
	s := &countingStore{Redis: r}
	a := newCountingDaemon(s, "a", map[string]string{"x": "1"})
	a.h.beat(ctx)
	a.h.beat(ctx)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Do(ctx, c.B().Del().Key("cronlock:node-jobs:a").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s.take()
	a.h.beat(ctx)
	if sent, _ := s.take(); len(sent) != 2 || sent[0] != 0 || sent[1] == 0 {
		t.Errorf("beat after the key was deleted: swaps sent %v bytes of job hashes; want 0, then the hashes", sent)
	}
	if hv, err := r.NodeJobs(ctx, []string{"a"}); err != nil || hv[0] == nil {
		t.Errorf("job hashes key after that beat: %q, %v; want written again", hv, err)
	}
}

// A live node of the previous version writes its job hashes inline in its
// record (no jobs_key): its drift is still compared, and while it is live
// this node's record carries its hashes inline too, from its first beat,
// for it to read; once it is gone, the record leaves them out again.
func TestHeartbeat_OldFormatRecord(t *testing.T) {
	r, _ := newRedis(t)
	ctx := t.Context()
	s := &countingStore{Redis: r}
	a := newCountingDaemon(s, "a", map[string]string{"backup": "b1", "report": "r1"})
	now := time.Now().UTC()
	old, _ := json.Marshal(map[string]any{"node_id": "old", "instance": "old-inst", "hostname": "h", "pid": 1, "version": "v1",
		"started": now, "heartbeat": now, "every_ms": 5000, "ttl_ms": 15000, "config_hash": "c0",
		"jobs": map[string]string{"backup": "b1", "report": "r2"}})
	if _, _, err := r.SwapNode(ctx, "old", old, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := r.IndexNode(ctx, "old", now); err != nil {
		t.Fatal(err)
	}
	a.h.beat(ctx) // reads the node list first: its first record already carries the hashes
	if rec := own(t, r, "a"); rec.Jobs["report"] != "r1" || !rec.JobsKey {
		t.Errorf("a's first record while an old node is live: %+v; want its jobs inline and jobs_key", rec)
	}
	a.h.beat(ctx)
	if g := a.drift(t); g != 1 {
		t.Errorf("a: cronlock_config_drift = %v, want 1 (the old node's report differs)", g)
	}
	lines := a.logs.FilterMessageSnippet("config drift: this node's").All()
	if len(lines) != 1 || !slices.Equal(strs(lines[0].ContextMap()["changed"]), []string{"report"}) {
		t.Errorf("a's drift lines: %v; want one naming report changed", lines)
	}
	if _, reads := s.take(); len(reads) != 0 {
		t.Errorf("a read the job hashes keys of %q; want none (the old record holds them)", reads)
	}
	rec := own(t, r, "a")
	if rec.Jobs["report"] != "r1" || !rec.JobsKey {
		t.Errorf("a's record while an old node is live: %+v; want its jobs inline and jobs_key", rec)
	}
	if ok, err := r.DropNode(ctx, "old", [][]byte{old}); err != nil || !ok {
		t.Fatalf("drop the old record: %v, %v", ok, err)
	}
	a.h.beat(ctx) // no old node: the next record leaves the hashes out
	a.h.beat(ctx)
	if rec := own(t, r, "a"); rec.Jobs != nil || !rec.JobsKey {
		t.Errorf("a's record after the old node is gone: %+v; want no jobs inline", rec)
	}
	if n := a.logs.FilterMessageSnippet("no live node of an older cronlock left").Len(); n != 1 {
		t.Errorf("%d lines saying the inline hashes end, want 1", n)
	}
}

// own returns node id's record as stored.
func own(t *testing.T, r *redislock.Redis, id string) Record {
	t.Helper()
	values, err := r.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range Decode(values) {
		if rec.NodeID == id {
			return rec
		}
	}
	t.Fatalf("no record of %s", id)
	return Record{}
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
