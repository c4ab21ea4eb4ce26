package actors_test

import (
	"context"
	"errors"
	"github.com/cronlock/cronlock/ledger/memory"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"go.uber.org/zap"
)

// acquire claims job "j" for a manual run of owner n1:x and returns the
// renewing Lease; stop ends it (release and a history record).
func acquire(t *testing.T, l ledger.Locker, ttl time.Duration) (*Lease, func()) {
	t.Helper()
	c, lease, err := Acquire(t.Context(), zap.NewNop(), l, manualClaim("j", "n1", "x", ttl))
	if err != nil || c.Outcome != ledger.Claimed {
		t.Fatalf("Acquire: got %v, %v, want claimed", c.Outcome, err)
	}
	return lease, func() {
		_, _, _ = lease.End(context.Background(), ledger.RunRecord{RunID: "x", Trigger: ledger.TriggerManual, Fence: c.Token}, "", nil)
	}
}

// The lease is renewed every TTL/3 and outlives its TTL many times over.
func TestLease_RenewsEveryThirdOfTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flakyLocker{Memory: memory.NewMemory()}
		lease, stop := acquire(t, f, 3*time.Second)
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
		f := &flakyLocker{Memory: memory.NewMemory()}
		f.fail.Store(true)
		ttl := 6 * time.Second
		start := time.Now()
		lease, stop := acquire(t, f, ttl)
		defer stop()
		l := <-lease.Lost()
		at := time.Since(start)
		if want := 4800 * time.Millisecond; at != want { // TTL − margin (TTL/5)
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
		f := &flakyLocker{Memory: memory.NewMemory()}
		f.notHeld.Store(true)
		start := time.Now()
		lease, stop := acquire(t, f, 3*time.Second)
		defer stop()
		l := <-lease.Lost()
		if got := time.Since(start); got != time.Second {
			t.Errorf("lost after %v, want 1s (first renewal)", got)
		}
		if !errors.Is(l.Err, ledger.ErrNotHeld) {
			t.Errorf("got %v, want ErrNotHeld", l.Err)
		}
	})
}

// End stops the renewals, then releases the lease and records the run in
// one call: the lease is free and the history has the record.
func TestLease_EndReleasesAndRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		c, lease, err := Acquire(t.Context(), zap.NewNop(), mem, manualClaim("j", "n1", "r1", 3*time.Second))
		if err != nil || c.Outcome != ledger.Claimed {
			t.Fatalf("Acquire: got %v, %v, want claimed", c.Outcome, err)
		}
		if _, _, err := lease.End(t.Context(), ledger.RunRecord{RunID: "r1", Trigger: ledger.TriggerManual, Fence: c.Token,
			Result: ledger.ResultSuccess}, "", nil); err != nil {
			t.Fatalf("End: %v", err)
		}
		st, _ := mem.State(t.Context(), "j")
		if st.LeaseHolder != "" || st.Last == nil || st.Last.RunID != "r1" || st.Last.Trigger != ledger.TriggerManual {
			t.Errorf("state after End: got holder %q last %+v, want no holder and last run r1 (manual)", st.LeaseHolder, st.Last)
		}
	})
}

// A run that ends before its lease's first renewal is due (TTL/3) starts
// no renewal goroutine; one that lasts past it renews on time, and End
// stops either.
func TestLease_RenewalGoroutineOnlyOnceARenewalIsDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flakyLocker{Memory: memory.NewMemory()}
		_, stop := acquire(t, f, 3*time.Second)
		time.Sleep(999 * time.Millisecond)
		if n := renewalLoops(); n != 0 {
			t.Errorf("renewal loops before the first renewal is due: %d, want 0", n)
		}
		stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := f.renewals.Load(); got != 0 {
			t.Errorf("renewals after End before the first was due: %d, want 0", got)
		}

		f2 := &flakyLocker{Memory: memory.NewMemory()}
		c, lease, err := Acquire(t.Context(), zap.NewNop(), f2, manualClaim("k", "n1", "y", 3*time.Second))
		if err != nil || c.Outcome != ledger.Claimed {
			t.Fatalf("Acquire k: %v, %v", c.Outcome, err)
		}
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if n := renewalLoops(); n != 1 {
			t.Errorf("renewal loops once the first renewal was due: %d, want 1", n)
		}
		if got := f2.renewals.Load(); got != 1 {
			t.Errorf("renewals 1.5 s into a 3 s lease: %d, want 1 (at 1 s)", got)
		}
		if _, _, err := lease.End(t.Context(), ledger.RunRecord{RunID: "y", Trigger: ledger.TriggerManual, Fence: c.Token}, "", nil); err != nil {
			t.Fatalf("End: %v", err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := f2.renewals.Load(); got != 1 {
			t.Errorf("renewals after End: %d, want still 1", got)
		}
	})
}

// A claim answered so late that its lease's local deadline (claim sent +
// TTL − margin) comes before the first renewal is lost at that deadline,
// not at the renewal: the renewal loop starts at whichever is first.
func TestLease_LateClaimAnswerLostAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &slowClaimLocker{flakyLocker: flakyLocker{Memory: memory.NewMemory()}, delay: 2 * time.Second}
		start := time.Now()
		lease, stop := acquire(t, l, 3*time.Second)
		defer stop()
		lost := <-lease.Lost()
		if got, want := time.Since(start), 2400*time.Millisecond; got != want { // TTL − margin (600 ms) from the claim's send
			t.Errorf("lost %v after the claim was sent, want %v", got, want)
		}
		if lost.Err == nil {
			t.Error("LeaseLost without an error")
		}
	})
}

// slowClaimLocker answers each claim after delay.
type slowClaimLocker struct {
	flakyLocker
	delay time.Duration
}

func (s *slowClaimLocker) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	time.Sleep(s.delay)
	return s.flakyLocker.Claim(ctx, req)
}

// renewalLoops counts the goroutines of the process in a lease's renewal
// loop (Lease.keepAlive on their stack).
func renewalLoops() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "actors.(*Lease).keepAlive(")
}
