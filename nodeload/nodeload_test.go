package nodeload

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLoad_MaxParallel: at max_parallel reservations Reserve refuses, a
// Release makes room, and concurrent reservers never get more than the
// limit.
func TestLoad_MaxParallel(t *testing.T) {
	l := New(3, nil)
	for i := range 3 {
		if !l.Reserve() {
			t.Fatalf("reservation %d refused below the limit", i+1)
		}
	}
	if l.Reserve() {
		t.Fatal("4th reservation accepted at max_parallel 3")
	}
	l.Release(false)
	if !l.Reserve() {
		t.Fatal("reservation refused after a release")
	}

	l = New(20, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for range 100 {
		wg.Go(func() {
			if l.Reserve() {
				mu.Lock()
				got++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if got != 20 {
		t.Errorf("100 concurrent reservers: %d accepted, want 20", got)
	}
}

// TestLoad_ClaimDelay grows with the runs in progress (claims won), not
// with claims in flight, up to MaxDelay; the gauge counts the runs.
func TestLoad_ClaimDelay(t *testing.T) {
	tests := []struct {
		max, running, inFlight int
		want                   time.Duration
	}{
		{0, 0, 5, 0},
		{0, 4, 0, 1 * time.Millisecond},
		{0, 80, 0, MaxDelay},
		{0, 200, 0, MaxDelay},
		{20, 10, 3, 10 * time.Millisecond},
		{20, 20, 0, MaxDelay},
	}
	for _, tt := range tests {
		l := New(tt.max, nil)
		for range tt.running + tt.inFlight {
			l.Reserve()
		}
		for range tt.running {
			l.Won()
		}
		if got := l.ClaimDelay(); got != tt.want {
			t.Errorf("max %d, %d running, %d in flight: delay %v, want %v", tt.max, tt.running, tt.inFlight, got, tt.want)
		}
		if got := testutil.ToFloat64(l.gauge); got != float64(tt.running) {
			t.Errorf("gauge %v, want %d", got, tt.running)
		}
	}
	l := New(0, nil)
	l.Reserve()
	l.Won()
	l.Release(true)
	if l.InProgress() != 0 || testutil.ToFloat64(l.gauge) != 0 {
		t.Errorf("after the release: %d in progress, gauge %v; want 0", l.InProgress(), testutil.ToFloat64(l.gauge))
	}
}
