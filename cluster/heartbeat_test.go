package cluster

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/redislock"
	"github.com/redis/rueidis"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// daemon is one heartbeat actor with its own log.
type daemon struct {
	h    *Heartbeat
	logs *observer.ObservedLogs
}

func newDaemon(store HeartbeatStore, id, instance string, now func() time.Time) daemon {
	core, logs := observer.New(zapcore.DebugLevel)
	h := NewHeartbeat(HeartbeatOptions{Log: zap.New(core), Store: store, Now: now, Self: Record{NodeID: id, Instance: instance,
		Hostname: "host-" + instance, PID: 4242, Version: "test", Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Jobs: map[string]string{"a": "1"}, ConfigHash: "cafe"}})
	return daemon{h: h, logs: logs}
}

func (d daemon) conflicts() int {
	return d.logs.FilterMessageSnippet("duplicate node id: another live").Len()
}

func (d daemon) gauge(t *testing.T) float64 {
	return promtest.Value(t, d.h.conflict, "cronlock_node_id_conflict")
}

func newRedis(t *testing.T) (*redislock.Redis, *redistest.Server) {
	srv := redistest.Start(t)
	r, err := redislock.New(redislock.Options{Addresses: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, srv
}

// Two live daemons with one node id, beating in turn against a real Redis:
// each reports the other once (error, with the other's hostname and start
// time) and sets the gauge, whatever the number of beats.
func TestHeartbeat_DuplicateDetected(t *testing.T) {
	r, _ := newRedis(t)
	ctx := t.Context()
	a := newDaemon(r, "web1", "aaaa", time.Now)
	b := newDaemon(r, "web1", "bbbb", time.Now)
	a.h.beat(ctx)
	b.h.beat(ctx) // b's first beat: a's record may be a previous incarnation's
	if n := b.conflicts(); n != 0 {
		t.Fatalf("b after its first beat: %d conflict lines, want 0", n)
	}
	for range 3 {
		a.h.beat(ctx)
		b.h.beat(ctx)
	}
	for name, d := range map[string]daemon{"a": a, "b": b} {
		if n := d.conflicts(); n != 1 {
			t.Errorf("%s: got %d conflict lines, want 1", name, n)
		}
		if g := d.gauge(t); g != 1 {
			t.Errorf("%s: cronlock_node_id_conflict = %v, want 1", name, g)
		}
	}
	e := a.logs.FilterMessageSnippet("duplicate node id").All()[0]
	if e.Level != zapcore.ErrorLevel || e.ContextMap()["other_hostname"] != "host-bbbb" ||
		e.ContextMap()["other_instance"] != "bbbb" || e.ContextMap()["node_id"] != "web1" {
		t.Errorf("a's conflict line: level %v fields %v", e.Level, e.ContextMap())
	}
	if _, ok := e.ContextMap()["other_started"]; !ok {
		t.Errorf("a's conflict line lacks other_started: %v", e.ContextMap())
	}
	// The record says so, for readers (cronlock nodes): whichever daemon
	// wrote it last names the other.
	values, err := r.Nodes(ctx)
	if err != nil || len(values) != 1 {
		t.Fatalf("node records: %d, %v; want 1", len(values), err)
	}
	var rec Record
	if err := json.Unmarshal(values[0], &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Instance != "bbbb" || len(rec.Duplicates) != 1 || rec.Duplicates[0].Instance != "aaaa" ||
		rec.Duplicates[0].Hostname != "host-aaaa" || rec.Duplicates[0].PID != 4242 || rec.Duplicates[0].Seen.IsZero() {
		t.Errorf("record after the conflict: %s; want b's, with duplicates [a (host-aaaa, pid 4242)]", values[0])
	}
}

// A daemon restarted after a crash finds its previous incarnation's
// record (same node id, other instance, still within its TTL): that is not
// a conflict, at the first beat nor later.
func TestHeartbeat_RestartIsNotAConflict(t *testing.T) {
	r, _ := newRedis(t)
	ctx := t.Context()
	old := newDaemon(r, "web1", "old", time.Now)
	old.h.beat(ctx)
	old.h.beat(ctx) // then it is SIGKILLed: its record stays until the TTL
	next := newDaemon(r, "web1", "new", time.Now)
	for range 3 {
		next.h.beat(ctx)
	}
	if n := next.conflicts(); n != 0 || next.gauge(t) != 0 {
		t.Errorf("restarted daemon: %d conflict lines, gauge %v; want 0, 0", n, next.gauge(t))
	}
	first := next.logs.FilterMessageSnippet("replaced the record of another instance").All()
	if len(first) != 1 || first[0].ContextMap()["previous_instance"] != "old" {
		t.Errorf("first beat's log: got %v, want one line naming previous_instance old", first)
	}
}

// The record is the documented JSON (docs/protocol.md) under
// P node:ID with the TTL, the job hashes are in P node-jobs:ID with the
// same TTL, and a clean stop deletes both.
func TestHeartbeat_RecordInRedis(t *testing.T) {
	r, srv := newRedis(t)
	d := newDaemon(r, "web1", "aaaa", time.Now)
	d.h.beat(t.Context())
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	old, err := c.Do(t.Context(), c.B().Get().Key("cronlock:node:web1").Build()).AsBytes()
	if err != nil {
		t.Fatalf("GET cronlock:node:web1: %v", err)
	}
	if ms, _ := c.Do(t.Context(), c.B().Pttl().Key("cronlock:node:web1").Build()).AsInt64(); ms <= 29_000 || ms > 30_000 {
		t.Errorf("PTTL: got %d ms, want (29000, 30000]: twice the 15 s TTL", ms)
	}
	var rec Record
	if err := json.Unmarshal(old, &rec); err != nil {
		t.Fatalf("record %s: %v", old, err)
	}
	if rec.NodeID != "web1" || rec.Instance != "aaaa" || rec.Hostname != "host-aaaa" || rec.PID != 4242 ||
		rec.Version != "test" || rec.Started.IsZero() || time.Since(rec.Heartbeat) > time.Minute ||
		rec.EveryMs != 5000 || rec.TTLMs != 15000 || rec.ConfigHash != "cafe" || rec.Jobs != nil || !rec.JobsKey {
		t.Errorf("record: got %+v; want config hash cafe, jobs_key and no jobs inline", rec)
	}
	hv, err := c.Do(t.Context(), c.B().Get().Key("cronlock:node-jobs:web1").Build()).AsBytes()
	var jh JobHashes
	if err != nil || json.Unmarshal(hv, &jh) != nil || jh.ConfigHash != "cafe" || len(jh.Jobs) != 1 || jh.Jobs["a"] != "1" {
		t.Errorf("GET cronlock:node-jobs:web1: %s (%v); want {config_hash: cafe, jobs: {a: 1}}", hv, err)
	}
	if ms, _ := c.Do(t.Context(), c.B().Pttl().Key("cronlock:node-jobs:web1").Build()).AsInt64(); ms <= 29_000 || ms > 30_000 {
		t.Errorf("job hashes PTTL: got %d ms, want (29000, 30000], the record's", ms)
	}
	if ids, err := c.Do(t.Context(), c.B().Zrange().Key("cronlock:nodes:index").Min("0").Max("-1").Build()).AsStrSlice(); err != nil ||
		len(ids) != 1 || ids[0] != "web1" {
		t.Errorf("node index: got %q (%v), want [web1]", ids, err)
	}
	d.h.drop(t.Context())
	if n, err := c.Do(t.Context(), c.B().Exists().Key("cronlock:node:web1", "cronlock:node-jobs:web1").Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("after drop: EXISTS record, job hashes = %d (%v), want 0", n, err)
	}
	if n, err := c.Do(t.Context(), c.B().Zcard().Key("cronlock:nodes:index").Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("after drop: node index has %d ids (%v), want 0", n, err)
	}
}

// memStore is an in-memory Store for synctest bubbles, where real Redis
// cannot run (network I/O is not durably blocking).
type memStore struct {
	mu      sync.Mutex
	value   []byte
	jobs    []byte // the job hashes key, expiring with the record
	expires time.Time
	ttls    []time.Duration
	drops   int
	// lost: a swap is applied and then fails, as one cut off by its
	// timeout or the stop after Redis applied it.
	lost bool
}

func (m *memStore) SwapNode(_ context.Context, _ string, v, jobs []byte, ttl time.Duration) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.value
	if !time.Now().Before(m.expires) {
		old, m.jobs = nil, nil
	}
	if len(jobs) > 0 {
		m.jobs = jobs
	}
	m.value, m.expires = v, time.Now().Add(ttl)
	m.ttls = append(m.ttls, ttl)
	if m.lost {
		return nil, false, context.DeadlineExceeded
	}
	return old, m.jobs != nil, nil
}

func (m *memStore) NodeJobs(_ context.Context, ids []string) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([][]byte, len(ids))
	for i := range ids {
		if time.Now().Before(m.expires) {
			out[i] = m.jobs
		}
	}
	return out, nil
}

func (m *memStore) DropNode(_ context.Context, _ string, values [][]byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range values {
		if m.value != nil && string(m.value) == string(v) {
			m.value, m.jobs = nil, nil
			m.drops++
			return true, nil
		}
	}
	return false, nil
}

func (m *memStore) IndexNode(context.Context, string, time.Time) error { return nil }
func (m *memStore) UnindexNode(context.Context, string) error          { return nil }

// Nodes returns the one record while it has not expired.
func (m *memStore) Nodes(context.Context) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.value == nil || !time.Now().Before(m.expires) {
		return nil, nil
	}
	return [][]byte{m.value}, nil
}

func (m *memStore) beats() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.ttls) }

// runHeartbeat runs web1's heartbeat on s until cancel; done receives
// Run's error. It returns once the first beat is written.
func runHeartbeat(t *testing.T, s *memStore) (cancel context.CancelFunc, done <-chan error) {
	d := newDaemon(s, "web1", "aaaa", time.Now)
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan error, 1)
	go func() { ch <- d.h.Run(ctx) }()
	synctest.Wait()
	return cancel, ch
}

// Run beats at once, then every 5 s with a 15 s TTL (the key lives 30 s),
// and deletes the record
// when ctx ends.
func TestHeartbeat_RunBeatsAndDropsAtStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &memStore{}
		cancel, done := runHeartbeat(t, s)
		if n := s.beats(); n != 1 {
			t.Fatalf("at start: %d beats, want 1", n)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := s.beats(); n != 3 || s.ttls[0] != 30*time.Second {
			t.Fatalf("after 10 s: %d beats with ttls %v, want 3 with 30s (2 × the 15 s TTL)", n, s.ttls)
		}
		cancel()
		if err := <-done; err != nil || s.drops != 1 || s.value != nil {
			t.Fatalf("after stop: Run = %v, drops %d, record %q; want nil, 1, none", err, s.drops, s.value)
		}
	})
}

// A beat whose swap Redis applied but whose answer was lost (its timeout
// or the stop cut it off) is still deleted at the stop: the record holds
// that beat's value, not the last one known written. (e2e's
// TestControl_KilledNodeGoneWithinTTL saw a cleanly stopped node listed
// live.)
func TestHeartbeat_DropsAWriteWhoseAnswerWasLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &memStore{}
		cancel, done := runHeartbeat(t, s)
		s.mu.Lock()
		s.lost = true
		s.mu.Unlock()
		time.Sleep(10 * time.Second) // two beats applied, both "failed"
		synctest.Wait()
		if n := s.beats(); n != 3 {
			t.Fatalf("after 10 s: %d beats, want 3", n)
		}
		cancel()
		if err := <-done; err != nil || s.drops != 1 || s.value != nil {
			t.Fatalf("after stop: Run = %v, drops %d, record %q; want nil, 1, none", err, s.drops, s.value)
		}
	})
}

// The conflict lasts while the other instance keeps writing; a TTL after
// its last write it is over (gauge 0, one info line), and a new conflict
// with it would be reported again.
func TestHeartbeat_ConflictEndsAfterTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &memStore{}
		ctx := t.Context()
		a := newDaemon(s, "web1", "aaaa", time.Now)
		b := newDaemon(s, "web1", "bbbb", time.Now)
		a.h.beat(ctx)
		b.h.beat(ctx)
		a.h.beat(ctx)
		if a.gauge(t) != 1 {
			t.Fatalf("gauge after b wrote: %v, want 1", a.gauge(t))
		}
		// b stops; a beats every 5 s.
		for range 3 {
			time.Sleep(5 * time.Second)
			a.h.beat(ctx)
			if a.gauge(t) != 1 {
				t.Fatalf("gauge within the TTL of b's last write: %v, want 1", a.gauge(t))
			}
		}
		if d := a.h.duplicates(); len(d) != 1 || d[0].Instance != "bbbb" {
			t.Fatalf("duplicates within the TTL: %+v, want b", d)
		}
		time.Sleep(5 * time.Second)
		a.h.beat(ctx)
		if d := a.h.duplicates(); d != nil {
			t.Errorf("duplicates a TTL after b's last write: %+v, want none (the record no longer names b)", d)
		}
		if a.gauge(t) != 0 || a.logs.FilterMessageSnippet("conflict over").Len() != 1 {
			t.Fatalf("a TTL after b's last write: gauge %v, %d 'conflict over' lines; want 0, 1",
				a.gauge(t), a.logs.FilterMessageSnippet("conflict over").Len())
		}
		b.h.beat(ctx)
		a.h.beat(ctx)
		if n := a.conflicts(); n != 2 {
			t.Errorf("b writes again: %d conflict lines in all, want 2", n)
		}
	})
}

// TestHeartbeat_PeersGetLiveOthers: against a real Redis, every beat hands
// HeartbeatOptions.Peers the other live nodes' records (with their tags and runs in
// progress), never this node's own, valid for two beats; a node whose
// record is older than its TTL is left out.
func TestHeartbeat_PeersGetLiveOthers(t *testing.T) {
	r, _ := newRedis(t)
	type call struct {
		others   []Record
		validFor time.Duration
	}
	var got []call
	mk := func(id string, tags map[string]string, running map[string]int64, now func() time.Time, peers func([]Record, time.Duration)) *Heartbeat {
		return NewHeartbeat(HeartbeatOptions{Log: zap.NewNop(), Store: r, Now: now, Peers: peers, Running: func() map[string]int64 { return running },
			Self: Record{NodeID: id, Instance: "i-" + id, Jobs: map[string]string{}, Tags: tags}})
	}
	stale := mk("old", nil, nil, func() time.Time { return time.Now().Add(-time.Minute) }, nil)
	stale.beat(t.Context())
	n2 := mk("n2", map[string]string{"role": "db"}, map[string]int64{"a": 2, "b": 3}, time.Now, nil)
	n2.beat(t.Context())
	n1 := mk("n1", nil, nil, time.Now, func(o []Record, v time.Duration) { got = append(got, call{o, v}) })
	n1.beat(t.Context())
	n1.beat(t.Context())
	if len(got) != 2 {
		t.Fatalf("Peers called %d times for 2 beats, want 2", len(got))
	}
	for i, c := range got {
		if len(c.others) != 1 || c.others[0].NodeID != "n2" || c.others[0].Tags["role"] != "db" ||
			c.others[0].Running["a"]+c.others[0].Running["b"] != 5 || c.validFor != 2*DefaultHeartbeatEvery {
			t.Errorf("beat %d: Peers got %+v valid %v; want only n2 (role=db, 5 runs), valid %v", i+1, c.others, c.validFor, 2*DefaultHeartbeatEvery)
		}
	}
}

// TestHeartbeat_WarmupReads: during its first TTL (15 s) a node reads the
// node list every WarmupRead between its beats and hands it to Peers;
// after that only its beats (every 5 s) do.
func TestHeartbeat_WarmupReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &memStore{}
		var mu sync.Mutex
		calls := 0
		h := NewHeartbeat(HeartbeatOptions{Log: zap.NewNop(), Store: s, Self: Record{NodeID: "n1", Instance: "i1", Jobs: map[string]string{}},
			Peers: func([]Record, time.Duration) { mu.Lock(); calls++; mu.Unlock() }})
		count := func() int { mu.Lock(); defer mu.Unlock(); return calls }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()
		time.Sleep(4*time.Second + time.Millisecond)
		synctest.Wait()
		if n := count(); n != 5 { // the beat at 0, reads at 1, 2, 3, 4 s
			t.Errorf("after 4 s: Peers called %d times, want 5", n)
		}
		time.Sleep(16 * time.Second) // to 20 s: beats at 5, 10, 15, 20; reads at 6–9, 11–14
		synctest.Wait()
		at20 := count()
		time.Sleep(10 * time.Second) // beats at 25, 30 only
		synctest.Wait()
		if n := count() - at20; n != 2 {
			t.Errorf("from 20 s to 30 s (after the first TTL): Peers called %d times, want 2 (the beats)", n)
		}
		if at20 < 5+12 {
			t.Errorf("by 20 s: Peers called %d times, want at least 17 (4 beats and the reads between them)", at20)
		}
		cancel()
		<-done
	})
}
