package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger/ledgertest"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/redis/rueidis"
)

// The probe runs a script on the server: it succeeds on a plain server and
// fails, with the server's error, where claims fail because scripting is
// disabled (EVALSHA renamed away, or EVAL renamed away so that a script
// that is not loaded yet cannot be loaded).
func TestProbe_FailsWhereScriptsCannotRun(t *testing.T) {
	jobs := []string{"backup"}
	ok := newRedis(t, redistest.Start(t).Addr(), Options{})
	if err := ok.Probe(ledgertest.Ctx(t), jobs); err != nil {
		t.Fatalf("Probe on a plain server: %v", err)
	}
	for _, cmd := range []string{"EVALSHA", "EVAL"} {
		t.Run(cmd+" renamed", func(t *testing.T) {
			r := newRedis(t, redistest.StartWith(t, "--rename-command", cmd, "").Addr(), Options{})
			err := r.Probe(ledgertest.Ctx(t), jobs)
			if _, isRedis := rueidis.IsRedisErr(errors.Unwrap(err)); !isRedis || !strings.Contains(err.Error(), "unknown command") {
				t.Fatalf("Probe: got %v, want the server's unknown command error", err)
			}
			if _, err := r.Claim(ledgertest.Ctx(t), ledgertest.ManualReq("backup")); err == nil {
				t.Fatalf("Claim succeeded where the probe failed: the probe does not exercise what a claim needs")
			}
		})
	}
}

// ServerInfo reads the eviction and persistence settings through INFO,
// which works where CONFIG is disabled (as on managed Redis).
func TestServerInfo_ReadsPolicyAndPersistence(t *testing.T) {
	srv := redistest.StartWith(t, "--maxmemory", "2mb", "--maxmemory-policy", "volatile-lru",
		"--appendonly", "yes", "--rename-command", "CONFIG", "")
	r := newRedis(t, srv.Addr(), Options{KeyPrefix: "p:"})
	infos, err := r.ServerInfo(ledgertest.Ctx(t), []string{"a", "b"})
	if err != nil {
		t.Fatalf("ServerInfo: %v", err)
	}
	want := ServerInfo{Key: "p:job:a", MaxMemory: 2 << 20, MaxMemoryPolicy: "volatile-lru", AOF: true}
	if len(infos) != 1 || infos[0] != want {
		t.Fatalf("ServerInfo: got %+v, want [%+v] (one server)", infos, want)
	}
	if _, err := r.SavePoints(ledgertest.Ctx(t)); err == nil {
		t.Fatalf("SavePoints with CONFIG renamed away: got nil error, want the server's")
	} else if _, isRedis := rueidis.IsRedisErr(errors.Unwrap(err)); !isRedis {
		t.Fatalf("SavePoints: got %v, want a *rueidis.RedisError wrapped", err)
	}
}

func TestSavePoints(t *testing.T) {
	for _, tc := range []struct{ save, want string }{{"", ""}, {"3600 1 300 100", "3600 1 300 100"}} {
		r := newRedis(t, redistest.StartWith(t, "--save", tc.save).Addr(), Options{})
		got, err := r.SavePoints(ledgertest.Ctx(t))
		if err != nil || got != tc.want {
			t.Errorf("save %q: got %q, %v; want %q", tc.save, got, err, tc.want)
		}
	}
}

// A single address that is a Cluster node is recognised whichever node it
// is: the owner of the job keys says cluster_enabled:1, another node
// redirects them (MOVED). Both give ErrClusterNode.
func TestProbe_SingleAddressClusterNode(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	key := "{cronlock}:job:backup"
	jobs := []string{"backup"}
	for name, srv := range map[string]*redistest.Server{"owner": c.Owner(key), "other": c.NotOwner(key)} {
		t.Run(name, func(t *testing.T) {
			r := newRedis(t, srv.Addr(), Options{KeyPrefix: "{cronlock}:"})
			_, err := r.ServerInfo(ledgertest.Ctx(t), jobs)
			if !errors.Is(err, ErrClusterNode) {
				t.Errorf("ServerInfo: got %v, want ErrClusterNode", err)
			}
			perr := r.Probe(ledgertest.Ctx(t), jobs)
			if name == "other" && !errors.Is(perr, ErrClusterNode) {
				t.Errorf("Probe on a node that redirects the key: got %v, want ErrClusterNode", perr)
			}
		})
	}
}

// In Cluster mode with a hash-tagged key prefix every key is in one slot:
// the probe runs on the shard that owns it, and fails once that shard is
// killed.
func TestProbe_ClusterOwningShardKilled(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	r, err := New(Options{Addresses: c.Addrs(), KeyPrefix: "{cronlock}:"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(r.Close)
	jobs := []string{"backup", "report", "sync"}
	if got := r.probeKeys(ledgertest.Ctx(t), jobs); len(got) != 1 || got[0] != "{cronlock}:job:backup" {
		t.Errorf("probeKeys with a hash-tagged prefix: got %q, want one key", got)
	}
	if err := r.Probe(ledgertest.Ctx(t), jobs); err != nil {
		t.Fatalf("Probe with every shard up: %v", err)
	}
	infos, err := r.ServerInfo(ledgertest.Ctx(t), jobs)
	if err != nil || len(infos) != 1 || !infos[0].ClusterEnabled {
		t.Fatalf("ServerInfo in Cluster mode: got %+v, %v; want one shard with cluster_enabled", infos, err)
	}
	c.Owner("{cronlock}:job:backup").Kill()
	// The probe is retryable (it writes nothing): it retries until its
	// deadline, which the health monitor sets to 1 s.
	ctx, cancel := context.WithTimeout(ledgertest.Ctx(t), time.Second)
	defer cancel()
	if err := r.Probe(ctx, jobs); err == nil {
		t.Fatalf("Probe with the owning shard killed: got nil, want an error")
	}
}

// In Cluster mode with an untagged prefix each job's keys carry the job
// name as hash tag: the keys of one job share a slot, jobs spread over the
// masters, and the probe keys are one per master (not one per slot). The
// probe fails once one of the masters is killed.
func TestProbe_ClusterKeysSpread(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	r, err := New(Options{Addresses: c.Addrs()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(r.Close)
	if r.Mode() != ModeCluster || !r.SpreadsKeys() {
		t.Fatalf("Mode %q, SpreadsKeys %v; want cluster, true", r.Mode(), r.SpreadsKeys())
	}
	if got, want := r.Key("job", "backup"), "cronlock:job:{backup}"; got != want {
		t.Errorf("Key(job, backup): got %q, want %q", got, want)
	}
	var jobs []string
	for i := range 60 {
		j := fmt.Sprintf("job%02d", i)
		jobs = append(jobs, j)
		for _, kind := range []string{"state", "history", "paused"} {
			if c.Slot(r.Key(kind, j)) != c.Slot(r.Key("job", j)) {
				t.Errorf("%s key of %s in another slot than its lease key", kind, j)
			}
		}
	}
	keys := r.probeKeys(ledgertest.Ctx(t), jobs)
	owners := map[string]bool{}
	for _, k := range keys {
		owners[c.Owner(k).Addr()] = true
	}
	if len(keys) != 3 || len(owners) != 3 {
		t.Fatalf("probeKeys of 60 jobs on 3 masters: got %d keys on %d masters (%q), want 3 on 3", len(keys), len(owners), keys)
	}
	if err := r.Probe(ledgertest.Ctx(t), jobs); err != nil {
		t.Fatalf("Probe with every shard up: %v", err)
	}
	infos, err := r.ServerInfo(ledgertest.Ctx(t), jobs)
	if err != nil || len(infos) != 3 {
		t.Fatalf("ServerInfo: got %d infos, %v; want one per master (3)", len(infos), err)
	}
	killed := c.Owner(keys[1])
	killed.Kill()
	ctx, cancel := context.WithTimeout(ledgertest.Ctx(t), time.Second)
	defer cancel()
	err = r.Probe(ctx, jobs)
	var se *ShardError
	if !errors.As(err, &se) || se.Master != killed.Addr() || se.Total != 60 || se.Jobs < 10 || se.Jobs > 30 {
		t.Fatalf("Probe with one master killed: got %v (%+v), want a ShardError naming %s with its share of 60 jobs", err, se, killed.Addr())
	}
}

// New confirms redis.mode: Cluster mode on servers without cluster support
// fails with ErrModeMismatch, with one seed address or several.
func TestNew_ClusterModeOnStandaloneServer(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	for name, addrs := range map[string][]string{"one": {a.Addr()}, "two": {a.Addr(), b.Addr()}} {
		r, err := New(Options{Addresses: addrs, Mode: ModeCluster})
		if err == nil {
			r.Close()
		}
		if !errors.Is(err, ErrModeMismatch) || !strings.Contains(err.Error(), "redis.mode is cluster") {
			t.Errorf("%s address(es): got %v, want ErrModeMismatch naming redis.mode", name, err)
		}
	}
}

// A sentinel's address used as a standalone server (sentinel_master
// forgotten), and plain servers given as sentinels, are mode mismatches
// that say what to fix.
func TestTopologies_SentinelModeMismatch(t *testing.T) {
	redistest.RequireTopologies(t) // starts a Sentinel setup (about 4 s)
	s := redistest.StartSentinel(t)
	r := newRedis(t, s.Sentinels[0].Addr(), Options{})
	err := r.Probe(ledgertest.Ctx(t), []string{"backup"})
	if !errors.Is(err, ErrModeMismatch) || !strings.Contains(err.Error(), "redis.sentinel_master") {
		t.Errorf("probe of a sentinel as a standalone server: got %v, want ErrModeMismatch naming redis.sentinel_master", err)
	}
	if _, err := New(Options{Addresses: []string{s.Master.Addr()}, SentinelMaster: redistest.SentinelMaster}); !errors.Is(err, ErrModeMismatch) ||
		!strings.Contains(err.Error(), "no sentinels") {
		t.Errorf("a server given as sentinel: got %v, want ErrModeMismatch saying the addresses are no sentinels", err)
	}
}
