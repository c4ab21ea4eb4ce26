package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/redislock"
	"github.com/cronlock/cronlock/schedule"
)

// fakeStore is an api.Store in memory: the jobs' states, ledgers and
// events, and node records. Safe for concurrent use.
type fakeStore struct {
	mu     sync.Mutex
	states map[string]ledger.JobState
	occ    map[string][]ledger.Occurrence // oldest first
	events map[string][]redislock.Event   // newest first
	nodes  []cluster.Record
	// nodeValues are nodes as JSON, made at the first Nodes call.
	nodeValues [][]byte
}

var _ api.Store = (*fakeStore)(nil)

func newFakeStore() *fakeStore {
	return &fakeStore{states: map[string]ledger.JobState{}, occ: map[string][]ledger.Occurrence{},
		events: map[string][]redislock.Event{}}
}

func (f *fakeStore) State(_ context.Context, job string) (ledger.JobState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.states[job], nil
}

func (f *fakeStore) History(context.Context, string, int) ([]ledger.RunRecord, error) {
	return nil, nil
}

func (f *fakeStore) Occurrences(_ context.Context, job string, from, to int64) ([]ledger.Occurrence, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ledger.Occurrence, 0, len(f.occ[job]))
	for _, o := range f.occ[job] {
		if t := occurrenceTime(o).Unix(); t >= from && t <= to {
			out = append(out, o)
		}
	}
	return out, nil
}

func (f *fakeStore) Events(_ context.Context, job string, n int) ([]redislock.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	evs := f.events[job]
	return slices.Clone(evs[:min(n, len(evs))]), nil
}

func (f *fakeStore) Nodes(context.Context) ([][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nodeValues == nil { // Redis returns the stored bytes: marshalled once
		for _, r := range f.nodes {
			b, err := json.Marshal(r)
			if err != nil {
				return nil, err
			}
			f.nodeValues = append(f.nodeValues, b)
		}
	}
	return f.nodeValues, nil
}

func (f *fakeStore) NodeJobs(_ context.Context, ids []string) ([][]byte, error) {
	return make([][]byte, len(ids)), nil
}

func (f *fakeStore) PauseFor(_ context.Context, job string, p ledger.Pause) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.states[job]
	st.Paused, st.Pause = true, &p
	f.states[job] = st
	f.events[job] = append([]redislock.Event{{Type: redislock.EventPause, At: p.At, By: p.By, Note: p.Note, Until: p.Until}}, f.events[job]...)
	return nil
}

func (f *fakeStore) ResumeBy(_ context.Context, job, by string, at time.Time) (*ledger.Pause, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.states[job]
	old := st.Pause
	st.Paused, st.Pause = false, nil
	f.states[job] = st
	f.events[job] = append([]redislock.Event{{Type: redislock.EventResume, At: at, By: by}}, f.events[job]...)
	return old, nil
}

// testJob returns a configured job with schedule expr in zone.
func testJob(t testing.TB, name, expr, zone string) config.Job {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	s, err := schedule.Parse(expr, loc)
	if err != nil {
		t.Fatal(err)
	}
	return config.Job{Name: name, Schedule: expr, Timezone: zone, Enabled: true, Overlap: "skip", Location: loc, Sched: s,
		Timeout: time.Minute}
}

// fixture is a dashboard over a fake store at a fixed now.
type fixture struct {
	store *fakeStore
	jobs  []config.Job
	now   time.Time
	h     http.Handler
	api   api.Options // what h was made with (newFixture)
	token []byte
	ran   []string // jobs run by the memory backend's run function
}

// secretValue is a job env value that must never reach a page.
const secretValue = "hunter2-very-secret"

// newFixture builds three jobs — "backup" failing (its last two runs
// failed, its env holding secretValue, which its output printed),
// "report" succeeding with a slot skipped while paused and one skipped for
// overlap, "idle" never run — on two live nodes and one gone, served with
// http.auth auth.
func newFixture(t testing.TB, auth string) *fixture {
	now := time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC) // US DST starts that day at 07:00 UTC
	fx := &fixture{store: newFakeStore(), now: now, token: []byte("op-token-123")}
	backup := testJob(t, "backup", "*/10 * * * *", "UTC")
	backup.Env = map[string]string{"DB_PASSWORD": secretValue}
	fx.jobs = []config.Job{backup, testJob(t, "report", "0 * * * *", "Europe/Paris"), testJob(t, "idle", "30 2 * * *", "America/New_York")}
	slot := func(ago time.Duration) int64 { return now.Add(-ago).Truncate(time.Minute).Unix() }
	ran := func(s int64, node, result string, exit int, out string) ledger.Occurrence {
		return ledger.Occurrence{ID: fmt.Sprint(s), Slot: s, Status: "ran", Node: node, Token: s % 1000, Trigger: "schedule",
			RunID: fmt.Sprintf("run-%d", s), Claimed: s*1000 + 5, Started: s*1000 + 20, Finished: s*1000 + 1500,
			Result: result, ExitCode: exit, Attempts: 1, Output: out}
	}
	fx.store.occ["backup"] = []ledger.Occurrence{
		ran(slot(30*time.Minute), "n1", "success", 0, "ok\n"),
		ran(slot(20*time.Minute), "n2", "failure", 2, "connecting with "+secretValue+"\nerror: disk full\n"),
		ran(slot(10*time.Minute), "n1", "failure", 2, "error: disk full\n"),
	}
	fx.store.occ["report"] = []ledger.Occurrence{
		ran(slot(3*time.Hour), "n1", "success", 0, "report written\n"),
		{ID: fmt.Sprint(slot(2 * time.Hour)), Slot: slot(2 * time.Hour), Status: "skipped", Reason: "paused", Node: "n2"},
		{ID: fmt.Sprint(slot(time.Hour)), Slot: slot(time.Hour), Status: "skipped", Reason: "overlap", Node: "n1"},
		{ID: fmt.Sprint(slot(30 * time.Minute)), Slot: slot(30 * time.Minute), Status: "missed", Reason: "not_claimed: no live node claimed it"},
	}
	fx.store.events["report"] = []redislock.Event{
		{Type: redislock.EventResume, At: now.Add(-90 * time.Minute), By: "ops@host"},
		{Type: redislock.EventPause, At: now.Add(-150 * time.Minute), By: "ops@host", Note: "db migration"},
	}
	last := func(o ledger.Occurrence) *ledger.RunRecord {
		return &ledger.RunRecord{RunID: o.RunID, Slot: o.Slot, Node: o.Node, Start: time.UnixMilli(o.Started), End: time.UnixMilli(o.Finished),
			Result: o.Result, ExitCode: o.ExitCode, Fence: o.Token}
	}
	fx.store.states["backup"] = ledger.JobState{Last: last(fx.store.occ["backup"][2])}
	fx.store.states["report"] = ledger.JobState{Last: last(fx.store.occ["report"][0])}
	beat := func(id string, age time.Duration, tags map[string]string) cluster.Record {
		return cluster.Record{NodeID: id, Instance: "i-" + id, Jobs: map[string]string{"backup": "h1", "report": "h2", "idle": "h3"}, Hostname: id + ".local", PID: 42, Version: "test", Heartbeat: now.Add(-age), EveryMs: 1000,
			TTLMs: 3000, Tags: tags, Running: map[string]int64{}}
	}
	fx.store.nodes = []cluster.Record{beat("n1", time.Second, map[string]string{"role": "db"}), beat("n2", 2*time.Second, nil),
		beat("old", time.Hour, nil)}
	o := api.Options{Jobs: func() []config.Job { return fx.jobs }, Memory: fx.store, Token: func() []byte { return fx.token },
		Auth: auth, NodeID: "n1", Now: func() time.Time { return fx.now }, Where: "memory backend of node n1",
		Run: func(_ context.Context, job string, _ api.RunRequest) (ledger.RunStatus, error) {
			fx.ran = append(fx.ran, job)
			return ledger.RunStatus{State: ledger.RunTaken}, nil
		}}
	fx.api = o
	fx.h = New(Options{API: o, CacheFor: -1, Backend: func() Backend { return Backend{Kind: "memory", State: "up", Ready: true} }})
	return fx
}
