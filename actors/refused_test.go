package actors_test

import (
	"context"
	"errors"
	"github.com/cronlock/cronlock/ledger/memory"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"github.com/cronlock/cronlock/internal/promtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// refusingLocker refuses every claim the way the engine's Redis policy
// guard does; everything else goes to the memory backend.
type refusingLocker struct {
	*memory.Memory
	reason string
}

func (l refusingLocker) Claim(context.Context, ledger.ClaimRequest) (ledger.Claim, error) {
	return ledger.Claim{}, &ledger.ClaimRefusedError{Reason: l.reason, Err: errors.New("maxmemory-policy allkeys-lru")}
}

// A claim the Locker refused without sending it skips the slot with the
// refusal's reason: counted under that reason (not redis_error), no
// phantom handed to the janitor (nothing can have been applied), no
// "claim failed" warning per slot, and nothing run.
func TestJob_RefusedClaimSkipsWithItsReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.DebugLevel)
		m := NewMetrics(nil)
		m.InitJob("j")
		phantoms := make(chan Phantom, 10)
		results := make(chan RunFinished, 10)
		job := NewJob(testJob(t, "j", "true"), JobDeps{MaxSkew: testMaxSkew, Log: zap.New(core), Metrics: m,
			Locker: refusingLocker{memory.NewMemory(), ledger.SkipRedisUnsafe}, NodeID: "n1", Results: results,
			Phantoms: phantoms, Kill: make(chan struct{}), Start: fakeproc.Start})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- job.Run(ctx) }()
		slot := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(slot))
		for i := range 2 { // one at a time: a fire during a claim is overlap_local
			job.Inbox() <- Fire{Job: "j", Slot: slot.Add(time.Duration(i) * time.Second)}
			synctest.Wait()
		}
		if got := promtest.Value(t, m, "cronlock_skips_total", "job", "j", "reason", ledger.SkipRedisUnsafe); got != 2 {
			t.Errorf("redis_unsafe skips: got %v, want 2", got)
		}
		if got := promtest.Value(t, m, "cronlock_skips_total", "job", "j", "reason", ledger.SkipRedisError); got != 0 {
			t.Errorf("redis_error skips: got %v, want 0", got)
		}
		if n := logs.FilterMessage("claim failed; not run").Len(); n != 0 {
			t.Errorf("claim failed warnings: got %d, want 0", n)
		}
		if n := logs.FilterMessage("slot skipped").FilterField(zap.String("reason", ledger.SkipRedisUnsafe)).Len(); n != 2 {
			t.Errorf("slot skipped (redis_unsafe) lines: got %d, want 2", n)
		}
		select {
		case p := <-phantoms:
			t.Errorf("phantom sent for a refused claim: %+v", p)
		case fin := <-results:
			t.Errorf("a refused slot ran: %+v", fin)
		default:
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: got %v, want nil", err)
		}
	})
}
