package redislock

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// NodeRecords finds every P node:ID record across several SCAN pages, with
// its value and time left, and no other key: the key prefix is matched
// literally even when it holds glob characters.
func TestRedis_NodeRecords(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{KeyPrefix: "{c*l}:"})
	c := raw(t, srv.Addr())
	ctx := ctxT(t)
	if got, err := r.NodeRecords(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty Redis: got %v, %v; want none", got, err)
	}
	for i := range 2500 { // several SCAN pages of other keys
		if err := c.Do(ctx, c.B().Set().Key(fmt.Sprintf("{c*l}:state:job%d", i)).Value("x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"{cxl}:node:n9", "{c*l}:nodes", "other:node:n8"} { // must not match
		if err := c.Do(ctx, c.B().Set().Key(k).Value("x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.SwapNode(ctx, "n1", []byte(`{"node_id":"n1"}`), 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SwapNode(ctx, "n2", []byte(`{"node_id":"n2"}`), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := r.NodeRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b NodeRecord) int { return cmp.Compare(a.Left, b.Left) })
	if len(got) != 2 || got[0].ID != "n2" || got[1].ID != "n1" || string(got[1].Value) != `{"node_id":"n1"}` ||
		got[0].Left <= 4*time.Second || got[0].Left > 5*time.Second || got[1].Left <= 14*time.Second {
		t.Errorf("got %+v, want n2 (≤5s left) and n1 (≤15s left) only", got)
	}
}
