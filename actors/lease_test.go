package actors

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
)

func startLease(t *testing.T, l Locker, ttl time.Duration) (*Lease, func()) {
	t.Helper()
	if _, err := l.Claim(t.Context(), redislock.ClaimRequest{Job: "j", Slot: 1, Owner: "n1:x", TTL: ttl, Lease: true}); err != nil {
		t.Fatal(err)
	}
	lease := NewLease(zap.NewNop(), l, "j", "n1:x", ttl, time.Now())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- lease.Run(ctx) }()
	return lease, func() { cancel(); <-done }
}

// The lease is renewed every TTL/3 and outlives its TTL many times over.
func TestLease_RenewsEveryThirdOfTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flakyLocker{Memory: redislock.NewMemory()}
		lease, stop := startLease(t, f, 3*time.Second)
		time.Sleep(10*time.Second + 500*time.Millisecond)
		synctest.Wait()
		if got := f.renewals.Load(); got != 10 {
			t.Errorf("got %d renewals in 10.5s with TTL 3s, want 10", got)
		}
		st, _ := f.State(t.Context(), "j")
		if st.LeaseHolder != "n1:x" {
			t.Errorf("lease holder: got %q, want n1:x", st.LeaseHolder)
		}
		select {
		case l := <-lease.Lost():
			t.Errorf("got LeaseLost %v, want none", l.Err)
		default:
		}
		stop()
	})
}

// When renewals keep failing (Redis unreachable), loss is reported at the
// last success + TTL − safety margin: before the server could expire it.
func TestLease_LostBeforeServerExpiryWhenRenewalsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flakyLocker{Memory: redislock.NewMemory()}
		f.fail.Store(true)
		ttl := 6 * time.Second
		start := time.Now()
		lease, stop := startLease(t, f, ttl)
		defer stop()
		l := <-lease.Lost()
		at := time.Since(start)
		if want := ttl - safetyMargin(ttl); at != want {
			t.Errorf("lost after %v, want %v (TTL − margin)", at, want)
		}
		if at+l.Grace >= ttl {
			t.Errorf("lost at %v with grace %v: processes could outlive the %v lease", at, l.Grace, ttl)
		}
	})
}

// A renewal that says the lease is not ours reports loss at once.
func TestLease_LostWhenNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flakyLocker{Memory: redislock.NewMemory()}
		f.notHeld.Store(true)
		start := time.Now()
		lease, stop := startLease(t, f, 3*time.Second)
		defer stop()
		l := <-lease.Lost()
		if got := time.Since(start); got != time.Second {
			t.Errorf("lost after %v, want 1s (first renewal)", got)
		}
		if !errors.Is(l.Err, redislock.ErrNotHeld) {
			t.Errorf("got %v, want ErrNotHeld", l.Err)
		}
	})
}

func TestSafetyMargin(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{time.Second, 500 * time.Millisecond}, {6 * time.Second, 1200 * time.Millisecond},
		{5 * time.Minute, time.Minute}, {600 * time.Millisecond, 300 * time.Millisecond},
	} {
		if got := safetyMargin(c.ttl); got != c.want {
			t.Errorf("safetyMargin(%v): got %v, want %v", c.ttl, got, c.want)
		}
	}
}
