package actors_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
)

// A phantom lease (a claim whose answer was lost) is released by Sweep at
// once, before catch-up claims could trip over it; leases of other owners
// are left alone.
func TestJanitor_SweepReleasesPhantomLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &countingLocker{Memory: redislock.NewMemory()}
		for _, owner := range []string{"n1:phantom"} {
			if _, err := mem.Claim(t.Context(), ClaimRequest{Job: "j", Slot: 5, Owner: owner, TTL: time.Hour, Lease: true}); err != nil {
				t.Fatal(err)
			}
		}
		jan := NewJanitor(zap.NewNop(), mem, 4)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- jan.Run(ctx) }()
		jan.Inbox() <- Phantom{Job: "j", Owner: "n1:other", Until: time.Now().Add(time.Hour)}
		jan.Inbox() <- Phantom{Job: "j", Owner: "n1:phantom", Until: time.Now().Add(time.Hour)}
		jan.Sweep(t.Context())
		st, _ := mem.State(t.Context(), "j")
		if st.LeaseHolder != "" {
			t.Errorf("lease holder after Sweep: got %q, want released", st.LeaseHolder)
		}
		before := mem.releases.Load()
		time.Sleep(time.Second) // four retry periods: nothing is left to retry
		synctest.Wait()
		if got := mem.releases.Load() - before; got != 0 {
			t.Errorf("releases after Sweep: got %d, want 0 (nothing pending)", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// countingLocker counts Release calls.
type countingLocker struct {
	*redislock.Memory
	releases atomic.Int32
}

func (c *countingLocker) Release(ctx context.Context, job, owner string) (bool, error) {
	c.releases.Add(1)
	return c.Memory.Release(ctx, job, owner)
}
