package actors

import (
	"testing"
	"testing/synctest"
	"time"
)

// A won run waits while other claims of the node are in flight, and goes
// on when the last one is answered.
func TestClaimGate_WaitsForClaimsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewClaimGate()
		g.begin()
		g.begin()
		g.end() // ours answered; one other still in flight
		done := make(chan time.Duration, 1)
		start := time.Now()
		go func() { g.wait(ClaimGateMax, nil); done <- time.Since(start) }()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("wait returned while a claim was in flight")
		default:
		}
		g.end()
		if got := <-done; got != 100*time.Millisecond {
			t.Errorf("waited %v, want 100ms (until the last claim was answered)", got)
		}
	})
}

// The wait is bounded: a claim that hangs holds starts at most ClaimGateMax.
func TestClaimGate_WaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewClaimGate()
		g.begin()
		start := time.Now()
		g.wait(ClaimGateMax, nil)
		if got := time.Since(start); got != ClaimGateMax {
			t.Errorf("waited %v, want %v", got, ClaimGateMax)
		}
		kill := make(chan struct{})
		close(kill)
		start = time.Now()
		g.wait(ClaimGateMax, kill)
		if got := time.Since(start); got != 0 {
			t.Errorf("with kill closed: waited %v, want 0", got)
		}
	})
}

// A lone claim never waits, and a nil gate does nothing.
func TestClaimGate_NoClaimInFlightNoWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewClaimGate()
		g.begin()
		g.end()
		start := time.Now()
		g.wait(ClaimGateMax, nil)
		var nilGate *ClaimGate
		nilGate.begin()
		nilGate.end()
		nilGate.wait(ClaimGateMax, nil)
		if got := time.Since(start); got != 0 {
			t.Errorf("waited %v, want 0", got)
		}
	})
}
