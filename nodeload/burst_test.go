package nodeload

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// deferred runs Burst.Defer for slot fired at fire and returns how long
// after fire it returned.
func deferred(b *Burst, ctx context.Context, slot int64, fire time.Time) time.Duration {
	b.Defer(ctx, slot, fire)
	return time.Since(fire)
}

// TestBurst_DeferWaitsForFirstClaimsAndAsLongAgain: a deferred claim waits
// until the node's first claims of its instant are answered (100 ms after
// the fire time), then as long again (until 200 ms); a deferred claim of
// another instant, or of one with no first claims, does not wait.
func TestBurst_DeferWaitsForFirstClaimsAndAsLongAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBurst()
		fire := time.Now()
		done1, done2 := b.First(100), b.First(100)
		go func() {
			time.Sleep(40 * time.Millisecond)
			done1()
			time.Sleep(60 * time.Millisecond)
			done2()
			done2() // a second call changes nothing
		}()
		time.Sleep(5 * time.Millisecond) // the rank-1 claim's own delay
		if got := deferred(b, t.Context(), 100, fire); got != 200*time.Millisecond {
			t.Errorf("deferred claim returned %v after the fire time, want 200ms", got)
		}
		if got := deferred(b, t.Context(), 101, time.Now()); got != 0 {
			t.Errorf("an instant without first claims: waited %v, want 0", got)
		}
		// Once the wait has passed, a later deferred claim of the instant
		// does not wait either.
		if got := deferred(b, t.Context(), 100, fire); got != 200*time.Millisecond {
			t.Errorf("a late deferred claim returned %v after the fire time, want at once (200ms)", got)
		}
	})
}

// TestBurst_DeferIsBounded: first claims that never get their answer hold
// a deferred claim until MaxBurstDefer after the fire time; a first claim
// sent while a deferred one waits makes it wait for that one too; the
// caller's context ends the wait; a nil Burst orders nothing.
func TestBurst_DeferIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBurst()
		fire := time.Now()
		b.First(7) // never answered
		if got := deferred(b, t.Context(), 7, fire); got != MaxBurstDefer {
			t.Errorf("unanswered first claim: deferred claim returned after %v, want %v", got, MaxBurstDefer)
		}

		fire = time.Now()
		d1 := b.First(8)
		go func() {
			time.Sleep(10 * time.Millisecond)
			d2 := b.First(8) // the fire loop sends another first claim
			d1()
			time.Sleep(20 * time.Millisecond)
			d2()
		}()
		if got := deferred(b, t.Context(), 8, fire); got != 60*time.Millisecond {
			t.Errorf("with a later first claim: returned after %v, want 60ms (done at 30ms, as long again)", got)
		}

		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		fire = time.Now()
		b.First(9)
		if got := deferred(b, ctx, 9, fire); got != 50*time.Millisecond {
			t.Errorf("ended context: returned after %v, want 50ms", got)
		}

		var nb *Burst
		nb.First(1)()
		if got := deferred(nb, t.Context(), 1, time.Now()); got != 0 {
			t.Errorf("nil Burst waited %v", got)
		}
	})
}

// TestBurst_DeferCountsFromEarlyFirstClaims: first claims sent before the
// fire time (in the claim lead) count from their sending: sent 300 ms
// before the fire time and answered 100 ms before it, they took 200 ms,
// and a deferred claim waits as long again, until 100 ms after the fire
// time (counted from the fire time it would not wait at all).
func TestBurst_DeferCountsFromEarlyFirstClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBurst()
		fire := time.Now().Add(300 * time.Millisecond)
		done := b.First(100)
		time.Sleep(200 * time.Millisecond)
		done()
		if got := deferred(b, t.Context(), 100, fire); got != 100*time.Millisecond {
			t.Errorf("deferred claim returned %v after the fire time, want 100ms", got)
		}
	})
}
