package redislock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// These tests drive the readiness checks one at a time (CheckReady, as the
// engine's health monitor calls it every second) against real
// redis-server processes. The harness keeps what the health monitor keeps
// of them: readiness, the state text and the returns (onBack).

type healthHarness struct {
	b     *Backend
	logs  *observer.ObservedLogs
	ready bool
	state string
	backs int // returns: ready after a check that was not the first, when the last was not
}

// newHealthHarness builds the Redis backend of a config whose redis
// section is redisYAML (a flow mapping) with one job "backup".
func newHealthHarness(t *testing.T, redisYAML string) *healthHarness {
	t.Helper()
	cfg, err := config.Parse([]byte("redis: "+redisYAML+"\njobs:\n  - {name: backup, schedule: '* * * * * *', command: 'true'}\n"),
		"yaml", config.Options{Purpose: config.ForStart, Hostname: "test", Euid: os.Geteuid()})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	b, err := Open(optionsOf(t, cfg), Policy{AllowEviction: cfg.Redis.AllowEviction, MaxClockSkew: cfg.Node.MaxClockSkew}, zap.New(core))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(b.Close)
	b.Register(prometheus.NewRegistry())
	return &healthHarness{b: b, logs: logs, state: "connecting"}
}

// optionsOf maps the config's redis section to Options as the engine does
// (engine.RedisOptions, which this package cannot import).
func optionsOf(t *testing.T, cfg *config.Config) Options {
	t.Helper()
	rc := cfg.Redis
	addrs := rc.Addresses
	if len(addrs) == 0 {
		addrs = []string{rc.Address}
	}
	o := Options{Addresses: addrs, Username: rc.Username, Password: rc.Password, DB: rc.DB, KeyPrefix: rc.KeyPrefix,
		SentinelMaster: rc.SentinelMaster, DialTimeout: rc.DialTimeout, Mode: rc.EffectiveMode(),
		MinReplicasAcked: rc.MinReplicasAcked, ReplicaAckTimeout: rc.ReplicaAckTimeout}
	if rc.TLS.Enabled {
		tc, err := TLSConfig(TLSFiles{CAFile: rc.TLS.CAFile, CertFile: rc.TLS.CertFile, KeyFile: rc.TLS.KeyFile,
			ServerName: rc.TLS.ServerName, InsecureSkipVerify: rc.TLS.InsecureSkipVerify})
		if err != nil {
			t.Fatalf("tls: %v", err)
		}
		o.TLS = tc
	}
	return o
}

// newUpHealthHarness starts a redis-server, builds the harness on it and
// runs the first check, which must find it up.
func newUpHealthHarness(t *testing.T) (*redistest.Server, *healthHarness) {
	t.Helper()
	srv := redistest.Start(t)
	hh := newHealthHarness(t, fmt.Sprintf("{address: %q}", srv.Addr()))
	hh.check(t, true)
	hh.expect(t, "before", true, "up")
	return srv, hh
}

func (hh *healthHarness) check(t *testing.T, first bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := hh.b.CheckReady(ctx, []string{"backup"})
	if r.Ready && !hh.ready && !first {
		hh.backs++
	}
	hh.ready, hh.state = r.Ready, r.State
}

// expect checks readiness and the state text's prefix.
func (hh *healthHarness) expect(t *testing.T, when string, ready bool, state string) {
	t.Helper()
	if hh.ready != ready || !strings.HasPrefix(hh.state, state) {
		t.Fatalf("%s: got ready %v, state %q; want ready %v, state %q…", when, hh.ready, hh.state, ready, state)
	}
}

// claimReason sends a claim (a manual run's, without a lease: each is a
// new occurrence, claimed whenever Redis takes the write) through the
// backend's Locker and returns the skip reason of a refusal, or "claimed".
func (hh *healthHarness) claimReason(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := hh.b.Claim(ctx, ledger.ClaimRequest{Job: "backup", Trigger: ledger.TriggerManual, Node: "n", RunID: "1",
		TTL: time.Second})
	var refused *ledger.ClaimRefusedError
	switch {
	case errors.As(err, &refused):
		return refused.Reason
	case err != nil:
		return "error: " + err.Error()
	}
	return c.Outcome.String()
}

func (hh *healthHarness) count(level zapcore.Level, contains string) int {
	n := 0
	for _, e := range hh.logs.FilterLevelExact(level).All() {
		if strings.Contains(e.Message, contains) {
			n++
		}
	}
	return n
}

// An evicting policy makes the node not ready and its claims refused
// (redis_unsafe) with one error line; fixing the policy is noticed at the
// next check, which also triggers the catch-up of onBack.
func TestHealth_EvictingPolicyRefusedUntilFixed(t *testing.T) {
	srv := redistest.StartWith(t, "--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru")
	hh := newHealthHarness(t, fmt.Sprintf("{address: %q}", srv.Addr()))
	hh.check(t, true)
	hh.check(t, false)
	hh.expect(t, "allkeys-lru", false, "unsafe: maxmemory-policy allkeys-lru")
	if got := hh.claimReason(t); got != ledger.SkipRedisUnsafe {
		t.Errorf("claim under allkeys-lru: got %s, want %s", got, ledger.SkipRedisUnsafe)
	}
	if n := hh.count(zapcore.ErrorLevel, "CONFIG SET maxmemory-policy noeviction"); n != 1 {
		t.Errorf("error lines naming the fix after 2 checks: got %d, want 1", n)
	}
	if v := testutil.ToFloat64(hh.b.mon.guard.unsafe); v != 1 {
		t.Errorf("cronlock_redis_unsafe: got %v, want 1", v)
	}
	srv.Do("CONFIG", "SET", "maxmemory-policy", "noeviction")
	hh.check(t, false)
	hh.expect(t, "after CONFIG SET maxmemory-policy noeviction", true, "up")
	if hh.backs != 1 {
		t.Errorf("onBack calls once claims are allowed again: got %d, want 1", hh.backs)
	}
	if got := hh.claimReason(t); got != "claimed" {
		t.Errorf("claim under noeviction: got %s, want claimed", got)
	}
}

// With redis.allow_eviction the node claims under an evicting policy, warns
// once and says so in cronlock_redis_eviction_allowed.
func TestHealth_EvictionAllowed(t *testing.T) {
	srv := redistest.StartWith(t, "--maxmemory", "2mb", "--maxmemory-policy", "volatile-lru")
	hh := newHealthHarness(t, fmt.Sprintf("{address: %q, allow_eviction: true}", srv.Addr()))
	hh.check(t, true)
	hh.check(t, false)
	hh.expect(t, "volatile-lru allowed", true, "up")
	if n := hh.count(zapcore.WarnLevel, "maxmemory-policy volatile-lru with a maxmemory limit); claiming anyway"); n != 1 {
		t.Errorf("warnings: got %d, want 1", n)
	}
	if v := testutil.ToFloat64(hh.b.mon.guard.evictionAllowed); v != 1 {
		t.Errorf("cronlock_redis_eviction_allowed: got %v, want 1", v)
	}
	if hh.backs != 0 {
		t.Errorf("onBack after the first check: got %d calls, want 0 (the engine catches up at start)", hh.backs)
	}
}

// With scripting disabled the node is not ready although Redis answers
// PING: the probe runs a script, as every claim does.
func TestHealth_ScriptingDisabledNotReady(t *testing.T) {
	srv := redistest.StartWith(t, "--rename-command", "EVALSHA", "")
	hh := newHealthHarness(t, fmt.Sprintf("{address: %q}", srv.Addr()))
	hh.check(t, true)
	hh.expect(t, "EVALSHA renamed", false, "failing: unknown command 'EVALSHA'")
	if n := hh.count(zapcore.ErrorLevel, "the claim scripts fail on a server that owns job keys"); n != 1 {
		t.Errorf("error lines: got %d, want 1", n)
	}
}

// Where INFO is refused the policy cannot be read: refused (redis_unsafe)
// unless allow_eviction; the persistence verdict is left unknown.
func TestHealth_InfoRefused(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprint("allow_eviction=", allow), func(t *testing.T) {
			srv := redistest.StartWith(t, "--rename-command", "INFO", "")
			hh := newHealthHarness(t, fmt.Sprintf("{address: %q, allow_eviction: %v}", srv.Addr(), allow))
			hh.check(t, true)
			if allow {
				hh.expect(t, "INFO renamed, allowed", true, "up")
			} else {
				hh.expect(t, "INFO renamed", false, "unsafe: maxmemory-policy unreadable")
			}
			if v := testutil.ToFloat64(hh.b.mon.guard.persistent); !math.IsNaN(v) {
				t.Errorf("cronlock_redis_persistent: got %v, want NaN (unknown)", v)
			}
		})
	}
}

// cronlock_redis_persistent says whether a Redis restart keeps the
// claimed-slot record; a warning is logged once when it does not.
func TestHealth_PersistenceReported(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want float64
	}{
		{"nothing", nil, 0},
		{"AOF", []string{"--appendonly", "yes"}, 1},
		{"RDB save points", []string{"--save", "3600 1"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartWith(t, tc.args...)
			hh := newHealthHarness(t, fmt.Sprintf("{address: %q}", srv.Addr()))
			hh.check(t, true)
			hh.check(t, false)
			if v := testutil.ToFloat64(hh.b.mon.guard.persistent); v != tc.want {
				t.Errorf("cronlock_redis_persistent: got %v, want %v", v, tc.want)
			}
			wantWarn := 0
			if tc.want == 0 {
				wantWarn = 1
			}
			if n := hh.count(zapcore.WarnLevel, "a Redis restart loses the ledger"); n != wantWarn {
				t.Errorf("warnings: got %d, want %d", n, wantWarn)
			}
		})
	}
}

// A single address that is a node of a Redis Cluster is refused with the
// fix, whether or not that node owns the job keys; a Cluster client is
// ready until the shard that owns the job keys is killed.
func TestHealth_Cluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	key := "{cronlock}:job:backup"
	for name, srv := range map[string]*redistest.Server{"owner": c.Owner(key), "other": c.NotOwner(key)} {
		t.Run("single address, "+name, func(t *testing.T) {
			hh := newHealthHarness(t, fmt.Sprintf("{address: %q, key_prefix: '{cronlock}:'}", srv.Addr()))
			hh.check(t, true)
			hh.check(t, false)
			hh.expect(t, "single address", false, "unsafe: a Cluster node used as a standalone server")
			if n := hh.count(zapcore.ErrorLevel, "redis.addresses: [host:port, ...]"); n != 1 {
				t.Errorf("error lines naming redis.addresses: got %d, want 1", n)
			}
			if got := hh.claimReason(t); got != ledger.SkipRedisUnsafe {
				t.Errorf("claim: got %s, want %s", got, ledger.SkipRedisUnsafe)
			}
		})
	}
	t.Run("owning shard killed", func(t *testing.T) {
		hh := newHealthHarness(t, fmt.Sprintf("{addresses: [%q, %q, %q], key_prefix: '{cronlock}:'}", c.Addrs()[0], c.Addrs()[1], c.Addrs()[2]))
		hh.check(t, true)
		hh.expect(t, "every shard up", true, "up")
		c.Owner(key).Kill()
		hh.check(t, false)
		hh.expect(t, "owning shard killed", false, "unreachable")
	})
}

// A claim sent before the health monitor's first check (the start-up
// catch-up) waits for it instead of being refused or reaching an unread
// Redis, and is sent once the policy is known to be safe.
func TestHealth_ClaimAtStartWaitsForTheFirstCheck(t *testing.T) {
	srv := redistest.Start(t)
	hh := newHealthHarness(t, fmt.Sprintf("{address: %q}", srv.Addr()))
	got := make(chan string, 1)
	go func() { got <- hh.claimReason(t) }()
	select {
	case r := <-got:
		t.Fatalf("claim returned %q before the first check, want it to wait", r)
	case <-time.After(100 * time.Millisecond): // it is still waiting: that is what is checked
	}
	hh.check(t, true)
	if r := <-got; r != "claimed" {
		t.Errorf("claim after the first check: got %q, want claimed", r)
	}
}

// A probe that times out while claims are answered (the guard saw one
// answered after the probe began) is a slow Redis or node, not an outage:
// the node stays ready, nothing of a return runs (onBack: the janitor's
// sweep and the catch-up of every job), one warning says so and the state
// says "slow". The same probe
// timeout with no claim answered meanwhile is "unreachable", as before.
func TestHealth_SlowProbeWhileClaimsAnsweredStaysReady(t *testing.T) {
	srv, hh := newUpHealthHarness(t)
	frozen := func(answered bool) {
		srv.Pause()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if answered {
				time.Sleep(300 * time.Millisecond)
				hh.b.mon.guard.noteClaim(nil) // guardedLocker.Claim's note of an answered claim
			}
			time.Sleep(1300 * time.Millisecond) // past the probe's 1 s timeout
			srv.Resume()
		}()
		hh.check(t, false)
		<-done
	}
	frozen(true)
	hh.expect(t, "probe late, a claim answered meanwhile", true, "up, slow")
	if n := hh.count(zapcore.WarnLevel, "redis answers slowly"); n != 1 || hh.backs != 0 {
		t.Errorf("got %d slow warnings and %d returns, want 1 and 0", n, hh.backs)
	}
	hh.check(t, false)
	hh.expect(t, "after the resume", true, "up")
	frozen(false)
	hh.expect(t, "probe late, no claim answered", false, "unreachable")
	hh.check(t, false)
	hh.expect(t, "back", true, "up")
	if hh.backs != 1 {
		t.Errorf("got %d returns, want 1 (after the real outage only)", hh.backs)
	}
}

// redis.mode is confirmed against the server: mode cluster on a server
// without cluster support is one error line and not ready (every claim
// refused as redis_error, never sent); mode cluster with a single seed
// address of a Cluster is ready.
func TestHealth_ModeConfirmedAtConnect(t *testing.T) {
	t.Run("cluster mode, standalone server", func(t *testing.T) {
		srv := redistest.Start(t)
		hh := newHealthHarness(t, fmt.Sprintf("{address: %q, mode: cluster}", srv.Addr()))
		hh.check(t, true)
		hh.check(t, false)
		hh.expect(t, "mode mismatch", false, "misconfigured: redis.mode does not match the server")
		if n := hh.count(zapcore.ErrorLevel, "redis.mode does not match the redis server"); n != 1 {
			t.Errorf("error lines about redis.mode: got %d, want 1", n)
		}
		if got := hh.claimReason(t); got != ledger.SkipRedisError {
			t.Errorf("claim: got %s, want %s", got, ledger.SkipRedisError)
		}
	})
	t.Run("cluster mode, one seed address", func(t *testing.T) {
		c := redistest.StartCluster(t, 3)
		hh := newHealthHarness(t, fmt.Sprintf("{address: %q, mode: cluster}", c.Addrs()[1]))
		hh.check(t, true)
		hh.expect(t, "seed address", true, "up")
		if got := hh.claimReason(t); got != "claimed" {
			t.Errorf("claim: got %s, want claimed", got)
		}
	})
}
