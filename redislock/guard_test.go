package redislock

import (
	"context"
	"errors"
	"fmt"
	"github.com/cronlock/cronlock/ledger/memory"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func shard(policy string, maxmemory int64) ServerInfo {
	return ServerInfo{Key: "cronlock:job:a", MaxMemory: maxmemory, MaxMemoryPolicy: policy}
}

// The guard's rule: refuse (redis_unsafe) when any shard that owns job keys
// may evict them, unless redis.allow_eviction; refuse a Cluster node used
// as a standalone server whatever allow_eviction says; keep the last
// decision on an error that is not the server's answer.
func TestDecidePolicy(t *testing.T) {
	clusterErr := fmt.Errorf("probe k: %w (MOVED 1 h:1)", ErrClusterNode)
	for _, tc := range []struct {
		name      string
		infos     []ServerInfo
		err       error
		allow     bool
		wantOK    bool
		refuse    bool
		allowed   bool   // evictionAllowed
		inMessage string // the logged line names it
	}{
		{"noeviction with a limit", []ServerInfo{shard("noeviction", 2<<20)}, nil, false, true, false, false, "claiming"},
		{"evicting policy without a limit", []ServerInfo{shard("allkeys-lru", 0)}, nil, false, true, false, false, "claiming"},
		{"allkeys-lru with a limit", []ServerInfo{shard("allkeys-lru", 2<<20)}, nil, false, true, true, false,
			"maxmemory-policy allkeys-lru with a maxmemory limit): not claiming, every slot is skipped (redis_unsafe). Fix: CONFIG SET maxmemory-policy noeviction"},
		{"volatile-lru with a limit", []ServerInfo{shard("volatile-lru", 1)}, nil, false, true, true, false,
			"redis.allow_eviction: true"},
		{"allkeys-lru allowed", []ServerInfo{shard("allkeys-lru", 2<<20)}, nil, true, true, false, true,
			"claiming anyway because redis.allow_eviction is true"},
		{"one evicting shard of three", []ServerInfo{shard("noeviction", 1), shard("volatile-ttl", 1), shard("noeviction", 0)},
			nil, false, true, true, false, "volatile-ttl"},
		{"cluster node", nil, clusterErr, false, true, true, false, "redis.addresses: [host:port, ...]"},
		{"cluster node with allow_eviction", nil, clusterErr, true, true, true, false, "Redis Cluster"},
		{"no answer keeps the last decision", nil, context.DeadlineExceeded, false, false, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := decidePolicy(tc.infos, tc.err, tc.allow)
			if ok != tc.wantOK || d.refuse != tc.refuse || d.evictionAllowed != tc.allowed {
				t.Fatalf("got ok %v refuse %v evictionAllowed %v, want %v %v %v", ok, d.refuse, d.evictionAllowed,
					tc.wantOK, tc.refuse, tc.allowed)
			}
			if !strings.Contains(d.msg, tc.inMessage) {
				t.Errorf("message %q does not contain %q", d.msg, tc.inMessage)
			}
			if d.refuse && (d.level != zapcore.ErrorLevel || !strings.HasPrefix(d.state, "unsafe: ")) {
				t.Errorf("a refusal: got level %v state %q, want error and an \"unsafe: …\" state", d.level, d.state)
			}
		})
	}
}

func TestDecidePersistence(t *testing.T) {
	configErr := errors.New("config get save: ERR unknown command 'CONFIG'")
	aof := ServerInfo{AOF: true}
	none := ServerInfo{}
	seen := ServerInfo{SnapshotSeen: true}
	for _, tc := range []struct {
		name    string
		infos   []ServerInfo
		save    string
		saveErr error
		want    float64 // NaN: unknown
		level   zapcore.Level
	}{
		{"AOF", []ServerInfo{aof}, "", nil, 1, zapcore.InfoLevel},
		{"RDB save points", []ServerInfo{none}, "3600 1", nil, 1, zapcore.InfoLevel},
		{"neither", []ServerInfo{none}, "", nil, 0, zapcore.WarnLevel},
		{"one shard of two keeps nothing", []ServerInfo{aof, none}, "", nil, 0, zapcore.WarnLevel},
		{"CONFIG refused, AOF on", []ServerInfo{aof}, "", configErr, 1, zapcore.InfoLevel},
		{"CONFIG refused, a snapshot seen", []ServerInfo{seen}, "", configErr, 1, zapcore.InfoLevel},
		{"CONFIG refused, nothing seen", []ServerInfo{none}, "", configErr, math.NaN(), zapcore.WarnLevel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, level, msg := decidePersistence(tc.infos, tc.save, tc.saveErr)
			if !(got == tc.want || math.IsNaN(got) && math.IsNaN(tc.want)) || level != tc.level {
				t.Errorf("got %v at %v (%q), want %v at %v", got, level, msg, tc.want, tc.level)
			}
			if got != 1 && !strings.Contains(msg, "a Redis restart loses the ledger") {
				t.Errorf("message %q does not say what a restart loses", msg)
			}
		})
	}
}

// The guard logs a decision once, not at every read, and again when it
// changes; its gauges follow the decision.
func TestGuard_LogsOncePerChange(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	g := newGuard(zap.New(core), false)
	for range 3 {
		g.observe([]ServerInfo{shard("allkeys-lru", 2<<20)}, nil)
	}
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 1 {
		t.Fatalf("error lines after 3 reads of allkeys-lru: got %d, want 1", n)
	}
	if testutil.ToFloat64(g.unsafe) != 1 || g.allows() {
		t.Fatalf("unsafe gauge %v, allows %v; want 1, false", testutil.ToFloat64(g.unsafe), g.allows())
	}
	g.observe(nil, context.DeadlineExceeded) // no answer: nothing changes
	g.observe([]ServerInfo{shard("volatile-lru", 2<<20)}, nil)
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 2 {
		t.Fatalf("error lines after the policy changed: got %d, want 2", n)
	}
	g.observe([]ServerInfo{shard("noeviction", 2<<20)}, nil)
	g.observe([]ServerInfo{shard("noeviction", 2<<20)}, nil)
	if n := logs.FilterMessage("redis policy guard: redis evicts none of cronlock's keys; claiming").Len(); n != 1 {
		t.Errorf("claiming lines: got %d, want 1", n)
	}
	if testutil.ToFloat64(g.unsafe) != 0 || !g.allows() {
		t.Errorf("after noeviction: unsafe gauge %v, allows %v; want 0, true", testutil.ToFloat64(g.unsafe), g.allows())
	}
}

// A refused claim never reaches the backend: the memory backend records
// nothing, so the same slot is claimable once the guard allows.
func TestGuardedLocker_RefusesWithoutSending(t *testing.T) {
	g := newGuard(zap.NewNop(), false)
	mem := memory.NewMemory()
	l := guardedLocker{claimer: mem, g: g}
	req := ledger.ClaimRequest{Job: "j", Slot: time.Now().Unix(), Trigger: ledger.TriggerSchedule, Node: "n", RunID: "1",
		TTL: time.Minute, Lease: true, Windows: ledger.Windows{Early: 2 * time.Second, Answer: 2 * time.Second}}
	reason := func(err error) string {
		var r *ledger.ClaimRefusedError
		if !errors.As(err, &r) {
			return fmt.Sprintf("not refused (%v)", err)
		}
		return r.Reason
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // before the first check: refusal waits for it or for ctx
	if _, err := l.Claim(ctx, req); reason(err) != ledger.SkipRedisError {
		t.Fatalf("before the first check: got %s, want %s", reason(err), ledger.SkipRedisError)
	}
	g.markChecked()
	g.observe([]ServerInfo{shard("allkeys-random", 1)}, nil)
	if _, err := l.Claim(context.Background(), req); reason(err) != ledger.SkipRedisUnsafe {
		t.Fatalf("evicting policy: got %s, want %s", reason(err), ledger.SkipRedisUnsafe)
	}
	occ, err := mem.Occurrences(context.Background(), "j", 0, 1<<53)
	if err != nil || len(occ) != 0 {
		t.Fatalf("ledger after two refused claims: %+v, %v; want no record", occ, err)
	}
	g.observe([]ServerInfo{shard("noeviction", 1)}, nil)
	c, err := l.Claim(context.Background(), req)
	if err != nil || c.Outcome != ledger.Claimed || c.Token <= 0 {
		t.Fatalf("allowed: got %+v, %v; want the slot claimed with a token (nothing sent before)", c, err)
	}
}

// The audit of missed occurrences writes to Redis (rule R8): while the
// guard refuses claims an audit that would record slots is refused too
// and nothing is recorded, so the slots are recorded once claims are
// allowed again; an audit that only reads audited_to goes through.
func TestGuardedLocker_RefusesAudit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGuard(zap.NewNop(), false)
		mem := memory.NewMemory()
		l := guardedLocker{claimer: mem, g: g}
		g.markChecked()
		g.observe([]ServerInfo{shard("allkeys-lru", 1)}, nil)
		read, err := l.Audit(t.Context(), ledger.AuditRequest{Job: "j"}) // starts the ledger's audited_to at now
		if err != nil || read.From != time.Now().Unix() {
			t.Fatalf("audit read while refusing: got %+v, %v; want audited_to now", read, err)
		}
		time.Sleep(10 * time.Second)
		req := ledger.AuditRequest{Job: "j", From: read.From, Window: time.Second, Grace: time.Second, Node: "n1", Reason: "test"}
		for s := read.From + 1; s <= read.From+5; s++ {
			req.Slots = append(req.Slots, s)
		}
		var refused *ledger.ClaimRefusedError
		if _, err := l.Audit(t.Context(), req); !errors.As(err, &refused) || refused.Reason != ledger.SkipRedisUnsafe {
			t.Fatalf("while refusing: got %v, want a redis_unsafe refusal", err)
		}
		if occ, _ := mem.Occurrences(t.Context(), "j", 0, 1<<53); len(occ) != 0 {
			t.Fatalf("ledger after a refused audit: %+v, want no record", occ)
		}
		g.observe([]ServerInfo{shard("noeviction", 1)}, nil)
		got, err := l.Audit(t.Context(), req)
		if err != nil || got.Stale || len(got.Missed) != 5 || got.To != read.From+5 {
			t.Fatalf("allowed: got %+v, %v; want the 5 slots recorded missed (nothing recorded while refused)", got, err)
		}
	})
}
