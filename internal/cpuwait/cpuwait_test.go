package cpuwait

import (
	"testing"
	"time"
)

// A Meter sees goroutines that waited runnable: n goroutines made
// runnable at once on one P that each keep it 5 ms make the later ones
// wait about a second; the meter reports a wait of at least 250 ms (it
// samples one scheduling transition in eight: some of the last hundred
// are sampled). Without such a stall it reports less than 250 ms.
func TestStallMeter_SeesGoroutinesWaitingForACPU(t *testing.T) {
	m := NewMeter()
	before := m.Read()
	if before == nil {
		t.Fatalf("runtime metric %s missing", schedLatencies)
	}
	time.Sleep(100 * time.Millisecond)
	if got := m.LongestSince(before); got >= 250*time.Millisecond {
		t.Fatalf("idle: longest wait at least %v, want < 250ms", got)
	}
	before = m.Read()
	Stall(0, 200, 5*time.Millisecond)()
	if got := m.LongestSince(before); got < 250*time.Millisecond {
		t.Fatalf("200 goroutines × 5 ms on one P: longest wait at least %v, want ≥ 250ms", got)
	}
}
