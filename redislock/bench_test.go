package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger/ledgertest"

	"github.com/cronlock/cronlock/ledger/memory"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/internal/redistest"
)

// benchClaims claims slots 1..b.N of one job (overlap "allow": one call per
// claim, as for a node that loses nothing but the round trip).
func benchClaims(b *testing.B, be ledgertest.Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var slot int64
	for b.Loop() {
		slot++
		c, err := be.Claim(ctx, ledgertest.ManualReq("bench"))
		if err != nil || c.Outcome != ledger.Claimed {
			b.Fatalf("claim slot %d: got %v, %v", slot, c.Outcome, err)
		}
	}
}

func BenchmarkClaim_Redis(b *testing.B) {
	srv := redistest.Start(b)
	benchClaims(b, newRedis(b, srv.Addr(), Options{}))
}

func BenchmarkClaim_Memory(b *testing.B) {
	benchClaims(b, memory.NewMemory())
}
