package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestMatches(t *testing.T) {
	tags := map[string]string{"role": "db", "zone": "eu-1"}
	tests := []struct {
		sel  []string
		want bool
	}{
		{nil, true},
		{[]string{"role=db"}, true},
		{[]string{"role=db", "zone=eu-1"}, true},
		{[]string{"role=db", "zone=us-1"}, false},
		{[]string{"role=DB"}, false}, // values are case sensitive
		{[]string{"disk=ssd"}, false},
	}
	for _, tt := range tests {
		if got := Matches(tt.sel, tags); got != tt.want {
			t.Errorf("Matches(%v, %v) = %v, want %v", tt.sel, tags, got, tt.want)
		}
	}
	mine, others := ForNode([]config.Job{{Name: "a"}, {Name: "b", Nodes: []string{"role=web"}}, {Name: "c", Nodes: []string{"zone=eu-1"}}}, tags)
	if len(mine) != 2 || mine[0].Name != "a" || mine[1].Name != "c" || !slices.Equal(others, []string{"b"}) {
		t.Errorf("ForNode: mine %v others %v, want a, c and [b]", mine, others)
	}
}

// LiveNodes keeps records that decode and were written within MaxAge of
// their writer's beats before now (DefaultEvery for a record without an
// interval).
func TestLiveNodes(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := func(id string, age time.Duration, everyMs int64, tags string) []byte {
		return fmt.Appendf(nil, `{"node_id":%q,"instance":"i-%s","heartbeat":%q,"every_ms":%d,"tags":%s}`,
			id, id, now.Add(-age).Format(time.RFC3339Nano), everyMs, tags)
	}
	values := [][]byte{
		rec("fresh", time.Second, 5000, `{"role":"db"}`),
		rec("edge", 2*time.Second, 1000, `{}`),
		rec("stale", 2*time.Second+time.Millisecond, 1000, `{"role":"db"}`),
		rec("default", 2*DefaultHeartbeatEvery, 0, `{}`),
		[]byte(`{`),
		[]byte(`{"node_id":"noinstance"}`),
	}
	got := LiveNodes(values, now)
	if len(got) != 3 || got[0].ID != "fresh" || got[0].Tags["role"] != "db" || got[1].ID != "edge" || got[2].ID != "default" {
		t.Errorf("got %+v, want fresh (role=db), edge and default", got)
	}
}

// fakeLister serves node lists set by the test (inside a synctest bubble):
// each record is written "now", at every listing.
type fakeLister struct {
	mu    sync.Mutex
	recs  []Record
	err   error
	calls int
}

func (f *fakeLister) set(recs []Record, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recs, f.err = recs, err
}

func (f *fakeLister) Nodes(context.Context) ([][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	var out [][]byte
	for _, r := range f.recs {
		r.Heartbeat = time.Now().UTC()
		v, err := json.Marshal(r)
		if err != nil {
			panic(err)
		}
		out = append(out, v)
	}
	return out, f.err
}

func dbRecord() Record {
	return Record{NodeID: "db1", Instance: "i-db1", EveryMs: 5000, Tags: map[string]string{"role": "db"}}
}

// TestWatcher_ReportsUnrunnableOnce: a job whose nodes: matches only a node
// that goes away is reported once (error, gauge 1) within a beat, a failed
// listing changes nothing (one warning), and the node's return is reported once (info,
// gauge 0). A job this node matches is never unrunnable.
func TestWatcher_ReportsUnrunnableOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		lister := &fakeLister{recs: []Record{dbRecord()}}
		w := NewWatcher(WatcherOptions{Log: zap.New(core), Lister: lister, Self: Node{ID: "web1", Tags: map[string]string{"role": "web"}}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		jobs := []config.Job{{Name: "dbjob", Nodes: []string{"role=db"}}, {Name: "webjob", Nodes: []string{"role=web"}}, {Name: "any"}}
		if err := w.SetJobs(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		gauge := func(job string) float64 { return promtest.Value(t, w.gauge, "cronlock_job_unrunnable", "job", job) }
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if testutil.CollectAndCount(w.gauge) != 3 || gauge("dbjob") != 0 || gauge("webjob") != 0 || gauge("any") != 0 || len(logs.All()) != 0 {
			t.Fatalf("db node live: gauges %v %v %v, logs %v; want 0 and no logs", gauge("dbjob"), gauge("webjob"), gauge("any"), logs.All())
		}
		lister.set(nil, nil) // the db node stopped and deleted its record
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if gauge("dbjob") != 1 || logs.FilterMessageSnippet("job unrunnable").Len() != 1 {
			t.Fatalf("db node gone, one beat later: gauge %v, logs %v; want 1 and one error", gauge("dbjob"), logs.All())
		}
		lister.set(nil, errors.New("redis down"))
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if gauge("dbjob") != 1 || logs.Len() != 2 || logs.FilterMessageSnippet("node records not read").Len() != 1 || gauge("webjob") != 0 {
			t.Fatalf("listing fails: gauge %v, logs %v; want 1, and one warning for 4 failed listings", gauge("dbjob"), logs.All())
		}
		lister.set([]Record{dbRecord()}, nil)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if gauge("dbjob") != 0 || logs.FilterMessageSnippet("job runnable again").Len() != 1 || logs.Len() != 4 {
			t.Fatalf("db node back: gauge %v, logs %v; want 0 and one info", gauge("dbjob"), logs.All())
		}
		if err := w.SetJobs(ctx, jobs[1:]); err != nil { // a reload removes dbjob
			t.Fatal(err)
		}
		synctest.Wait()
		if n := testutil.CollectAndCount(w.gauge); n != 2 {
			t.Errorf("after removing dbjob: %d series, want 2", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	})
}

// TestWatcher_NoListingWhenSelfMatches: when this node matches every job's
// nodes:, no job can be unrunnable, so the records are not read.
func TestWatcher_NoListingWhenSelfMatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lister := &fakeLister{}
		w := NewWatcher(WatcherOptions{Log: zap.NewNop(), Lister: lister, Self: Node{ID: "db1", Tags: map[string]string{"role": "db"}}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		if err := w.SetJobs(ctx, []config.Job{{Name: "dbjob", Nodes: []string{"role=db"}}, {Name: "any"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		lister.mu.Lock()
		calls := lister.calls
		lister.mu.Unlock()
		if calls != 0 || promtest.Value(t, w.gauge, "cronlock_job_unrunnable", "job", "dbjob") != 0 {
			t.Errorf("got %d listings, gauge %v; want none and 0", calls, promtest.Value(t, w.gauge, "cronlock_job_unrunnable", "job", "dbjob"))
		}
		cancel()
		<-done
	})
}
