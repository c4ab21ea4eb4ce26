package redislock

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// SwapNode writes P node:ID with its TTL and returns the previous value in
// one EVALSHA; DropNode deletes only the exact value.
func TestRedis_NodeRecordSwapAndDrop(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{KeyPrefix: "{cl}:"})
	c := raw(t, srv.Addr())
	ctx := ctxT(t)
	if old, err := r.SwapNode(ctx, "n1", []byte("a"), 15*time.Second); err != nil || old != nil {
		t.Fatalf("first swap: got %q, %v; want nil, nil", old, err)
	}
	if err := c.Do(ctx, c.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if old, err := r.SwapNode(ctx, "n1", []byte("b"), 15*time.Second); err != nil || string(old) != "a" {
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
	if ok, err := r.DropNode(ctx, "n1", []byte("a")); err != nil || ok {
		t.Errorf("drop with a stale value: got %v, %v; want false", ok, err)
	}
	if ok, err := r.DropNode(ctx, "n1", []byte("b")); err != nil || !ok {
		t.Errorf("drop with the current value: got %v, %v; want true", ok, err)
	}
	if n, _ := c.Do(ctx, c.B().Exists().Key("{cl}:node:n1").Build()).AsInt64(); n != 0 {
		t.Errorf("record still exists after drop")
	}
	if _, err := r.SwapNode(ctx, "", []byte("x"), time.Second); err == nil {
		t.Errorf("empty node id: got nil error")
	}
}
