package engine

import (
	"context"
	"errors"
	"github.com/cronlock/cronlock/ledger/memory"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/statedir"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/rueidis"
	"go.uber.org/zap/zaptest"
)

const oneYearlyJob = `
jobs:
  - name: yearly
    schedule: "0 0 1 1 *"
    command: "true"
`

func openStateDir(t *testing.T) *statedir.Dir {
	t.Helper()
	d, err := statedir.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// With a state directory the memory backend continues from its state
// file; without one (engine tests) it starts empty.
func TestEngine_MemoryBackendLoadsTheStateFile(t *testing.T) {
	dir := openStateDir(t)
	m, err := memory.OpenMemory(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Claim(t.Context(), ledger.ClaimRequest{Job: "yearly", Trigger: ledger.TriggerManual, Node: "n1", RunID: "r1"})
	if err != nil || c.Outcome != ledger.Claimed || c.Token <= 0 {
		t.Fatalf("manual claim: %+v, %v; want claimed with a token", c, err)
	}
	cfg := parseConfig(t, oneYearlyJob)
	for _, tt := range []struct {
		state *statedir.Dir
		fence int64
	}{{dir, c.Token}, {nil, 0}} {
		e, err := New(cfg, Options{Log: zaptest.NewLogger(t), Reload: func() (*config.Config, error) { return cfg, nil }, State: tt.state})
		if err != nil {
			t.Fatal(err)
		}
		st, err := e.backend.Backend.(*memory.Memory).State(t.Context(), "yearly")
		if err != nil || st.Fence != tt.fence {
			t.Errorf("state dir %v: fence %d (%v), want %d", tt.state != nil, st.Fence, err, tt.fence)
		}
		if e.node != nil {
			t.Errorf("memory backend: got a node registry, want none")
		}
	}
}

// A state file that cannot be used stops the start with its name.
func TestEngine_CorruptMemoryStateStopsTheStart(t *testing.T) {
	dir := openStateDir(t)
	if err := dir.WriteFile(memory.MemoryStateFile, []byte("{")); err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, oneYearlyJob)
	_, err := New(cfg, Options{Log: zaptest.NewLogger(t), State: dir})
	if !errors.Is(err, memory.ErrCorruptState) || !strings.Contains(err.Error(), filepath.Join(dir.Path(), memory.MemoryStateFile)) {
		t.Fatalf("New: got %v, want ErrCorruptState naming the file", err)
	}
}

// On the Redis backend the engine runs the node registry: the heartbeat
// record and the job hashes key exist while it runs,
// cronlock_node_id_conflict is exported, and both keys are gone after
// shutdown.
func TestEngine_RedisBackendKeepsTheHeartbeatRecord(t *testing.T) {
	srv := redistest.Start(t)
	cfg := parseConfig(t, "redis: {address: \""+srv.Addr()+"\"}\nnode: {id: n1}\n"+oneYearlyJob)
	reg := prometheus.NewRegistry()
	e, err := New(cfg, Options{Log: zaptest.NewLogger(t), Registry: reg, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if e.node == nil {
		t.Fatal("redis backend: no node registry")
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	get := func() []byte {
		v, err := c.Do(t.Context(), c.B().Get().Key("cronlock:node:n1").Build()).AsBytes()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
		return v
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	// The first beat is written as Run starts; poll Redis for it (a real
	// server, outside any bubble), as the redislock tests poll for a
	// restarted server.
	deadline := time.Now().Add(10 * time.Second)
	rec := get()
	for ; rec == nil && time.Now().Before(deadline); rec = get() {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(string(rec), `"node_id":"n1"`) || !strings.Contains(string(rec), `"version":"test"`) {
		t.Errorf("heartbeat record %s, want node_id n1 and version test", rec)
	}
	if n, err := c.Do(t.Context(), c.B().Exists().Key("cronlock:node-jobs:n1").Build()).AsInt64(); err != nil || n != 1 {
		t.Errorf("job hashes key cronlock:node-jobs:n1: EXISTS %d (%v), want 1", n, err)
	}
	if n, err := testutil.GatherAndCount(reg, "cronlock_node_id_conflict"); err != nil || n != 1 {
		t.Errorf("cronlock_node_id_conflict: %d series (%v), want 1", n, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rec := get(); rec != nil {
		t.Errorf("after shutdown the heartbeat record is still there: %s", rec)
	}
	if n, err := c.Do(t.Context(), c.B().Exists().Key("cronlock:node-jobs:n1").Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("after shutdown: job hashes key EXISTS %d (%v), want 0", n, err)
	}
}

// TestLoadPeers: a heartbeat record becomes a claim-order peer with its
// id and tags (which rank it for a job), its runs in progress of all jobs
// together and the record's write time.
func TestLoadPeers(t *testing.T) {
	at := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	got := loadPeers([]cluster.Record{{NodeID: "n2", Tags: map[string]string{"role": "db"}, Heartbeat: at,
		Running: map[string]int64{"a": 2, "b": 3}}})
	if len(got) != 1 || got[0].ID != "n2" || got[0].Tags["role"] != "db" || got[0].Running != 5 || !got[0].At.Equal(at) {
		t.Errorf("loadPeers: %+v, want n2, role=db, 5 running at %v", got, at)
	}
}
