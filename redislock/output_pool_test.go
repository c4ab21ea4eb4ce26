package redislock

import (
	"sync"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/ledger/ledgertest"
)

// TestFollowOutput_BlockingConnectionsBounded: 60 followers waiting in
// XREAD BLOCK at once open at most blockingPool connections (the others
// wait for one and still get their answer), and those connections are
// closed once idle (Options.BlockingIdle) instead of staying open.
func TestFollowOutput_BlockingConnectionsBounded(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{BlockingIdle: 200 * time.Millisecond})
	ctx := ledgertest.Ctx(t)
	if _, err := r.Output(ctx, "pool", "1"); err == nil {
		t.Fatal("output of a new job: got one, want none")
	}
	before := srv.Clients() // the client's pipelined connection
	const followers = 60
	errs := make(chan error, followers)
	var wg sync.WaitGroup
	for range followers {
		wg.Go(func() {
			_, err := r.FollowOutput(ctx, "pool", "1", "", time.Second)
			errs <- err
		})
	}
	peak := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && peak < before+blockingPool; {
		peak = max(peak, srv.Clients())
		time.Sleep(20 * time.Millisecond) // samples the server; not synchronisation
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("follower: %v", err)
		}
	}
	if peak > before+blockingPool || peak < before+blockingPool/2 {
		t.Errorf("connections while %d followers waited: got %d, want %d to %d (%d before)", followers, peak,
			before+blockingPool/2, before+blockingPool, before)
	}
	after := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if after = srv.Clients(); after <= before {
			break
		}
		time.Sleep(50 * time.Millisecond) // waits out BlockingIdle; not synchronisation
	}
	if after > before {
		t.Errorf("connections 5 s after the followers left: got %d, want %d as before", after, before)
	}
}
