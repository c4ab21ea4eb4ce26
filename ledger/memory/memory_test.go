package memory

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/ledger/ledgertest"
)

// In a synctest bubble time.Now is the bubble's clock, so the lease expires
// exactly at its TTL with no real waiting.
func TestMemory_LeaseExpiresAtTTLInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory()
		ctx := context.Background()
		req := ledgertest.LeaseReq("j", time.Second)
		first, err := m.Claim(ctx, req)
		if c := first; err != nil || c.Outcome != ledger.Claimed {
			t.Fatalf("claim: got %v, %v; want claimed", c.Outcome, err)
		}
		time.Sleep(999 * time.Millisecond)
		if st, _ := m.State(ctx, "j"); st.LeaseHolder != req.Owner() || st.LeaseTTL != time.Millisecond {
			t.Fatalf("at 999ms: got holder %q ttl %v, want %s, 1ms", st.LeaseHolder, st.LeaseTTL, req.Owner())
		}
		if _, err := m.Renew(ctx, "j", req.Owner(), time.Second); err != nil {
			t.Fatalf("renew at 999ms: got %v, want nil", err)
		}
		time.Sleep(time.Second)
		// Held by nobody, the lease is taken again by its owner's renewal
		// (docs/protocol.md, R3; a holder renews only before its local
		// deadline, so only a loss of Redis's state leaves it so).
		if _, err := m.Renew(ctx, "j", req.Owner(), time.Second); !errors.Is(err, ledger.ErrRetaken) {
			t.Fatalf("renew after ttl: got %v, want ErrRetaken", err)
		}
		if _, err := m.Renew(ctx, "j", "b:other", time.Second); !errors.Is(err, ledger.ErrNotHeld) {
			t.Fatalf("renew by another owner: got %v, want ErrNotHeld", err)
		}
		time.Sleep(time.Second)
		req.Node = "b"
		if c, err := m.Claim(ctx, req); err != nil || c.Outcome != ledger.Claimed || c.Token <= first.Token {
			t.Fatalf("claim after expiry: got %+v, %v; want claimed, token > %d", c, err, first.Token)
		}
	})
}

func TestMemory_CancelledContext(t *testing.T) {
	m := NewMemory()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Claim(ctx, ledgertest.ManualReq("j")); !errors.Is(err, context.Canceled) {
		t.Fatalf("claim with cancelled ctx: got %v, want context.Canceled", err)
	}
	if st, _ := m.State(context.Background(), "j"); st.Slot != 0 || st.Fence != 0 {
		t.Fatalf("state after cancelled claim: got %+v, want nothing claimed", st)
	}
}

// TestConformance runs the protocol's conformance suite (package
// ledgertest) against the memory backend, all cases on one Memory.
func TestConformance(t *testing.T) {
	ledgertest.Run(t, memoryStore(t))
}

var _ ledgertest.Backend = (*Memory)(nil)

// memoryStore hands out one Memory; LoseState forgets a job as a restart
// without a state file would.
func memoryStore(testing.TB) ledgertest.Store {
	m := NewMemory()
	return ledgertest.Store{Name: "memory", NewClient: func(testing.TB) ledgertest.Backend { return m },
		LoseState: func(_ testing.TB, job string) {
			m.mu.Lock()
			defer m.mu.Unlock()
			delete(m.jobs, job)
		}}
}
