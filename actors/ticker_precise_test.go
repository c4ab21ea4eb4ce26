package actors

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
)

// With SetPreciseWake, on the real clock (no bubble: the point is the
// runtime's timer resolution), each fire of a job due every second comes
// at or after its slot, never before, and within 50 ms of it; Probe and
// SetEntries are answered while the ticker sleeps its last PreciseLead;
// Deliver receives the fires. The median delay is logged (it is what
// `make bench`, workload 1x1, measures, and is not asserted: the machine is
// shared).
func TestTicker_PreciseWakeNeverEarly(t *testing.T) {
	tk := NewTicker(zap.NewNop(), NewMetrics(nil), nil)
	tk.SetPreciseWake(true)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- tk.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	}()
	type got struct {
		f  Fire
		at time.Time
	}
	fires := make(chan got, 16)
	deliver := func(f Fire) bool { fires <- got{f, time.Now()}; return true }
	if err := tk.SetEntries(ctx, []TickerEntry{{Job: "p", Sched: mustSchedule(t, "* * * * * *"), Deliver: deliver}}); err != nil {
		t.Fatalf("SetEntries: %v", err)
	}
	var delays []time.Duration
	for len(delays) < 3 {
		// Probe while the ticker is close to a fire time, in its precise sleep.
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		err := tk.Probe(pctx)
		pcancel()
		if err != nil {
			t.Fatalf("Probe: %v; want an answer within 1s", err)
		}
		select {
		case g := <-fires:
			d := g.at.Sub(g.f.Slot)
			if d < 0 || d > 50*time.Millisecond {
				t.Fatalf("fire of slot %v came %v after it; want 0..50ms (never before the slot)", g.f.Slot, d)
			}
			delays = append(delays, d)
		case <-time.After(3 * time.Second):
			t.Fatal("no fire within 3s for a job due every second")
		}
	}
	slices.Sort(delays)
	t.Logf("fire delays (ticker to Deliver): %v", delays)
}
