package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

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

// backend is the method set both implementations share; the conformance
// suite runs against it. (Consumers declare their own small interfaces.)
type backend interface {
	Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error)
	Renew(ctx context.Context, job, owner string, ttl time.Duration) (int64, error)
	Release(ctx context.Context, job, owner string) (bool, error)
	Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error)
	History(ctx context.Context, job string, n int) ([]ledger.RunRecord, error)
	State(ctx context.Context, job string) (JobState, error)
	Pause(ctx context.Context, job string) error
	Resume(ctx context.Context, job string) error
	Time(ctx context.Context) (time.Time, error)
	Ping(ctx context.Context) error
	Audit(ctx context.Context, req ledger.AuditRequest) (ledger.Audited, error)
	Occurrences(ctx context.Context, job string, from, to int64) ([]ledger.Occurrence, error)
	Unhand(ctx context.Context, job, owner string) (int64, bool, error)
	Close()
}

var (
	_ backend = (*Redis)(nil)
	_ backend = (*Memory)(nil)
)

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

// store hands out clients that share one coordination store.
type store struct {
	name      string
	newClient func(t testing.TB) backend
	// loseState deletes everything the store holds of a job (lease,
	// state, ledger), as a restart without persistence would.
	loseState func(t testing.TB, job string)
}

func redisStore(t testing.TB) store {
	srv := redistest.Start(t)
	return store{name: "redis", newClient: func(t testing.TB) backend { return newRedis(t, srv.Addr(), Options{}) },
		loseState: func(t testing.TB, job string) {
			r := newRedis(t, srv.Addr(), Options{})
			keys := r.ledgerKeys(job, "paused", "pending")
			if err := r.c.Do(ctxT(t), r.c.B().Del().Key(keys...).Build()).Error(); err != nil {
				t.Fatalf("DEL keys of %q: %v", job, err)
			}
		}}
}

func memoryStore(testing.TB) store {
	m := NewMemory()
	return store{name: "memory", newClient: func(testing.TB) backend { return m },
		loseState: func(_ testing.TB, job string) {
			m.mu.Lock()
			defer m.mu.Unlock()
			delete(m.jobs, job)
		}}
}

// ctxT returns a context that ends with the test and has a deadline, as
// every production Redis call must.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
