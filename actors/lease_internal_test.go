package actors

import (
	"testing"
	"time"
)

func TestSafetyMargin(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{time.Second, 500 * time.Millisecond}, {6 * time.Second, 1200 * time.Millisecond},
		{5 * time.Minute, time.Minute}, {600 * time.Millisecond, 300 * time.Millisecond},
	} {
		if got := safetyMargin(c.ttl); got != c.want {
			t.Errorf("safetyMargin(%v): got %v, want %v", c.ttl, got, c.want)
		}
	}
}
