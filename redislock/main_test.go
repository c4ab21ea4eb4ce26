package redislock

import (
	"testing"

	"github.com/cronlock/cronlock/ledger/ledgertest"

	"github.com/cronlock/cronlock/internal/redistest"
	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. After a Cluster shard dies,
// rueidis's cluster client closes the connections that a topology refresh
// removed 5 s later (cluster.go, _refresh), and a refresh that failed
// leaves a singleflight goroutine sleeping out its retry delay (under a
// second, singleflight.go); both end by themselves and are not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

var _ ledgertest.Backend = (*Redis)(nil)

// newRedis returns a client for addr, closed at cleanup.
func newRedis(t testing.TB, addr string, opts Options) *Redis {
	t.Helper()
	opts.Addresses = []string{addr}
	r, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// TestConformance runs the protocol's conformance suite (package
// ledgertest) against a real redis-server.
func TestConformance(t *testing.T) {
	ledgertest.Run(t, redisStore(t))
}

func redisStore(t testing.TB) ledgertest.Store {
	srv := redistest.Start(t)
	return ledgertest.Store{Name: "redis", NewClient: func(t testing.TB) ledgertest.Backend { return newRedis(t, srv.Addr(), Options{}) },
		LoseState: func(t testing.TB, job string) {
			r := newRedis(t, srv.Addr(), Options{})
			keys := r.ledgerKeys(job, "paused", "pending")
			if err := r.c.Do(ledgertest.Ctx(t), r.c.B().Del().Key(keys...).Build()).Error(); err != nil {
				t.Fatalf("DEL keys of %q: %v", job, err)
			}
		}}
}
