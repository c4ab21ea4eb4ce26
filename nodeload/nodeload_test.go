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
	l := New(3, true, nil)
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

	l = New(20, true, nil)
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

// TestLoad_Enter: the claim delay grows with the runs in progress (claims
// won) and, at random up to PerQueued each, with the claims queued before
// it, never past MaxDelay; the gauge counts the runs.
func TestLoad_Enter(t *testing.T) {
	tests := []struct {
		max, running, queued int
		lo, hi               time.Duration
	}{
		{0, 0, 0, 0, 0},
		{0, 4, 0, 4 * time.Millisecond, 4 * time.Millisecond},
		{0, 20, 0, MaxDelay, MaxDelay},
		{0, 200, 0, MaxDelay, MaxDelay},
		{0, 0, 30, 0, 30 * PerQueued},
		{0, 10, 30, 10 * time.Millisecond, MaxDelay},
		{20, 10, 0, 10 * time.Millisecond, 10 * time.Millisecond},
		{40, 40, 0, MaxDelay, MaxDelay},
	}
	for _, tt := range tests {
		l := New(tt.max, true, nil)
		for range tt.running {
			l.Reserve()
			l.Won()
		}
		for range tt.queued {
			l.Enter()
		}
		for range 50 { // the random part: every draw within bounds
			d := l.Enter()
			l.Leave()
			if d < tt.lo || d > tt.hi {
				t.Fatalf("max %d, %d running, %d queued: delay %v, want in [%v, %v]", tt.max, tt.running, tt.queued, d, tt.lo, tt.hi)
			}
		}
		if got := testutil.ToFloat64(l.gauge); got != float64(tt.running) {
			t.Errorf("gauge %v, want %d", got, tt.running)
		}
	}
	lone := New(0, false, nil)
	for range 30 {
		lone.Reserve()
		lone.Won()
		lone.Enter()
	}
	if d := lone.Enter(); d != 0 {
		t.Errorf("unordered (memory backend) with 30 runs and 30 queued: delay %v, want 0", d)
	}
	l := New(0, true, nil)
	l.Reserve()
	l.Won()
	l.Release(true)
	if l.InProgress() != 0 || testutil.ToFloat64(l.gauge) != 0 {
		t.Errorf("after the release: %d in progress, gauge %v; want 0", l.InProgress(), testutil.ToFloat64(l.gauge))
	}
	select {
	case <-l.Freed():
		t.Error("Freed closed before the next Release")
	default:
	}
	freed := l.Freed()
	l.Reserve()
	l.Release(false)
	select {
	case <-freed:
	default:
		t.Error("Freed not closed by Release")
	}
}
