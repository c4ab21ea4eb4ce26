package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// Issue 9, "What it must show" 3: /readyz and cronlock_redis_up say 0
// whenever claims cannot succeed, although Redis answers PING: readiness
// runs a script on the server that owns the job keys, as every claim does
// (docs/protocol.md, "Readiness").

// readiness is what one node says at one moment.
type readiness struct {
	code    int
	body    string
	metrics string
}

func readReadiness(t *testing.T, listen string) readiness {
	t.Helper()
	code, body := httpGet(t, "http://"+listen+"/readyz")
	_, metrics := httpGet(t, "http://"+listen+"/metrics")
	return readiness{code: code, body: strings.TrimSpace(body), metrics: metrics}
}

// is reports whether the node is ready (200, cronlock_redis_up 1) or not
// ready (503, cronlock_redis_up 0) as wanted, with a /readyz body that
// contains why.
func (r readiness) is(ready bool, why string) bool {
	code, up := http.StatusServiceUnavailable, "cronlock_redis_up 0"
	if ready {
		code, up = http.StatusOK, "cronlock_redis_up 1"
	}
	return r.code == code && hasLine(r.metrics, up) && strings.Contains(r.body, why)
}

// waitReadiness polls the node's /readyz and /metrics every 100 ms until
// they say ready (or not ready) with why, and returns that reading; it
// fails the test with the last reading after 5 s. Polling, because on a
// loaded machine one health check may time out and say "unreachable" for
// a second, which is true at that moment.
func waitReadiness(t *testing.T, who, listen string, ready bool, why string) readiness {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := readReadiness(t, listen)
		if r.is(ready, why) {
			return r
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: got /readyz %d %q, cronlock_redis_up 1: %v; want ready %v with %q", who, r.code, r.body,
				hasLine(r.metrics, "cronlock_redis_up 1"), ready, why)
			return r
		}
		time.Sleep(100 * time.Millisecond) // poll interval, not synchronisation
	}
}

// With scripting disabled (EVALSHA or EVAL renamed away) every claim fails:
// the node is not ready, says why, and runs nothing (redis_error skips).
func TestReadiness_ScriptingDisabled(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"EVALSHA", "EVAL"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartWith(t, "--rename-command", cmd, "")
			ledger := newLedger(t)
			jobs, _ := everySecondJobs(ledger, "job", 1, nil)
			listen := freeAddr(t)
			n := startNode(t, writeConfig(t, redisConfig(srv.Addr(), jobs...)), withNodeID("n1"),
				withEnv("CRONLOCK_HTTP_LISTEN="+listen))
			waitEngineRunning(n)
			time.Sleep(2500 * time.Millisecond) // two slots and two checks: that is the test
			waitReadiness(t, "n1", listen, false, "failing: unknown command '"+cmd+"'")
			if runs := ledgerLines(t, ledger); len(runs) != 0 {
				t.Errorf("got %d runs with %s disabled, want none", len(runs), cmd)
			}
			if skips := logsOf(n, "slot skipped", "job00"); len(skips) == 0 || skips[0].Str("reason") != "redis_error" {
				t.Errorf("skips: got %d, first %v; want redis_error skips", len(skips), skips)
			}
			stopAll(t, 15*time.Second, n)
		})
	}
}

// A 3-master Redis Cluster. A single redis.address that is one of its nodes,
// and a one-address redis.addresses list, are refused with the fix
// (redis.mode: cluster, or redis.addresses), whether or not that node owns
// the job keys: never ready with every claim failing. A node given the
// cluster's addresses, and one given a single seed address with
// redis.mode: cluster, are ready and run the job until the shard that owns
// the job keys is killed; then they are not ready and run nothing more.
func TestReadiness_RedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	key := "cronlock:job:{job00}" // the default prefix: the job name is the hash tag
	ledger := newLedger(t)
	jobs, _ := everySecondJobs(ledger, "job", 1, nil)
	type spec struct {
		id    string
		redis map[string]any
	}
	specs := []spec{
		{"single-owner", map[string]any{"address": c.Owner(key).Addr()}},
		{"single-other", map[string]any{"address": c.NotOwner(key).Addr()}},
		{"list-of-one", map[string]any{"addresses": []string{c.NotOwner(key).Addr()}}},
		{"cluster", map[string]any{"addresses": c.Addrs()}},
		{"seed", map[string]any{"address": c.NotOwner(key).Addr(), "mode": "cluster"}},
	}
	listen := map[string]string{}
	var nodes []*node
	for _, s := range specs {
		cfg := redisConfig("", jobs...)
		cfg["redis"] = s.redis
		listen[s.id] = freeAddr(t)
		nodes = append(nodes, startNode(t, writeConfig(t, cfg), withNodeID(s.id), withEnv("CRONLOCK_HTTP_LISTEN="+listen[s.id])))
	}
	for _, n := range nodes {
		waitEngineRunning(n)
	}
	time.Sleep(2500 * time.Millisecond) // two slots and two checks: that is the test
	for _, n := range nodes[:3] {
		waitReadiness(t, n.name, listen[n.name], false, "unsafe: a Cluster node used as a standalone server")
		fixes := 0
		for _, e := range n.Logs() {
			if e.Str("level") == "error" && strings.Contains(e.Msg(), "set redis.mode: cluster") &&
				strings.Contains(e.Msg(), "redis.addresses: [host:port, ...]") {
				fixes++
			}
		}
		if fixes != 1 {
			t.Errorf("%s: error lines naming the fix (redis.mode: cluster, redis.addresses): got %d, want 1", n.name, fixes)
		}
	}
	waitReadiness(t, "cluster", listen["cluster"], true, "ready")
	waitReadiness(t, "seed", listen["seed"], true, "ready")
	before := ledgerLines(t, ledger)
	ranOn := map[string]int{}
	for _, r := range before {
		ranOn[r[2]]++
		if r[2] != "cluster" && r[2] != "seed" {
			t.Errorf("a run on %s, want runs only on the nodes in Cluster mode: %q", r[2], r)
		}
	}
	if len(before) == 0 {
		t.Errorf("cluster: got no run with every shard up, want the job to run")
	}

	c.Owner(key).Kill()
	killedAt := time.Now()
	time.Sleep(2500 * time.Millisecond) // checks every second: 2.5 s in, the node knows
	waitReadiness(t, "cluster, owning shard killed", listen["cluster"], false, "unreachable")
	waitReadiness(t, "seed, owning shard killed", listen["seed"], false, "unreachable")
	for _, r := range readLedger(t, ledger) {
		if r.Start.After(killedAt.Add(500 * time.Millisecond)) {
			t.Errorf("run of slot %d started %v after the owning shard was killed, want none", r.Slot, r.Start.Sub(killedAt))
		}
	}
	checkNotExited(t, "with the owning shard killed", nodes...)
	stopAll(t, 15*time.Second, nodes...)
	t.Logf("runs with every shard up: %d (%v); key %s", len(before), ranOn, key)
}
