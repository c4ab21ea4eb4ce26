package redislock

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger/ledgertest"

	"github.com/cronlock/cronlock/internal/redistest"
)

// SwapNode writes P node:ID with its TTL and returns the previous value in
// one EVALSHA; DropNode deletes only the exact value.
func TestRedis_NodeRecordSwapAndDrop(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{KeyPrefix: "{cl}:"})
	c := raw(t, srv.Addr())
	ctx := ledgertest.Ctx(t)
	if old, _, err := r.SwapNode(ctx, "n1", []byte("a"), []byte("j1"), 15*time.Second); err != nil || old != nil {
		t.Fatalf("first swap: got %q, %v; want nil, nil", old, err)
	}
	if err := c.Do(ctx, c.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if old, _, err := r.SwapNode(ctx, "n1", []byte("b"), nil, 15*time.Second); err != nil || string(old) != "a" {
		t.Fatalf("second swap: got %q, %v; want a", old, err)
	}
	if st := cmdstats(t, c); st["evalsha"]["calls"] != 1 || st["eval"]["calls"] != 0 {
		t.Errorf("one swap: got evalsha %v, eval %v; want one EVALSHA (one round trip)", st["evalsha"], st["eval"])
	}
	if v, _ := c.Do(ctx, c.B().Get().Key("{cl}:node:n1").Build()).ToString(); v != "b" {
		t.Errorf("GET {cl}:node:n1: got %q, want b", v)
	}
	if ms, _ := c.Do(ctx, c.B().Pttl().Key("{cl}:node:n1").Build()).AsInt64(); ms <= 14_000 || ms > 15_000 {
		t.Errorf("PTTL: got %d ms, want (14000, 15000]", ms)
	}
	if ok, err := r.DropNode(ctx, "n1", [][]byte{[]byte("a")}); err != nil || ok {
		t.Errorf("drop with a stale value: got %v, %v; want false", ok, err)
	}
	if n, _ := c.Do(ctx, c.B().Exists().Key("{cl}:node-jobs:n1").Build()).AsInt64(); n != 1 {
		t.Errorf("drop with a stale value deleted the job hashes")
	}
	if ok, err := r.DropNode(ctx, "n1", [][]byte{[]byte("x"), []byte("b")}); err != nil || !ok {
		t.Errorf("drop with the current value: got %v, %v; want true (it holds the second of the values)", ok, err)
	}
	if n, _ := c.Do(ctx, c.B().Exists().Key("{cl}:node:n1", "{cl}:node-jobs:n1").Build()).AsInt64(); n != 0 {
		t.Errorf("after drop: %d of the record and the job hashes still exist, want 0", n)
	}
	if _, _, err := r.SwapNode(ctx, "", []byte("x"), nil, time.Second); err == nil {
		t.Errorf("empty node id: got nil error")
	}
}

// The job hashes key P node-jobs:ID is written only by a swap that carries
// it; a swap without it extends its TTL to the record's and reports
// whether it still exists; NodeJobs reads it (nil when it is gone).
func TestRedis_NodeJobsKey(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	c := raw(t, srv.Addr())
	ctx := ledgertest.Ctx(t)
	if _, kept, err := r.SwapNode(ctx, "n1", []byte("a"), nil, 15*time.Second); err != nil || kept {
		t.Fatalf("swap without job hashes and no key: kept %v, %v; want false", kept, err)
	}
	if _, kept, err := r.SwapNode(ctx, "n1", []byte("a"), []byte("hashes-1"), 5*time.Second); err != nil || !kept {
		t.Fatalf("swap with job hashes: kept %v, %v; want true", kept, err)
	}
	if err := c.Do(ctx, c.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, kept, err := r.SwapNode(ctx, "n1", []byte("b"), nil, 15*time.Second); err != nil || !kept {
		t.Fatalf("swap without job hashes, key present: kept %v, %v; want true", kept, err)
	}
	st := cmdstats(t, c)
	if st["set"]["calls"] != 1 || st["pexpire"]["calls"] != 1 {
		t.Errorf("swap without job hashes: SET %v, PEXPIRE %v; want 1 SET (the record) and 1 PEXPIRE", st["set"], st["pexpire"])
	}
	if ms, _ := c.Do(ctx, c.B().Pttl().Key("cronlock:node-jobs:n1").Build()).AsInt64(); ms <= 14_000 || ms > 15_000 {
		t.Errorf("job hashes PTTL after a swap without them: got %d ms, want (14000, 15000], the record's", ms)
	}
	got, err := r.NodeJobs(ctx, []string{"n1", "n2"})
	if err != nil || len(got) != 2 || string(got[0]) != "hashes-1" || got[1] != nil {
		t.Errorf("NodeJobs(n1, n2): got %q, %v; want [hashes-1, nil]", got, err)
	}
	if err := c.Do(ctx, c.B().Del().Key("cronlock:node-jobs:n1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, kept, err := r.SwapNode(ctx, "n1", []byte("c"), nil, 15*time.Second); err != nil || kept {
		t.Errorf("swap without job hashes after the key was deleted: kept %v, %v; want false", kept, err)
	}
}
