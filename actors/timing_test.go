package actors

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/cluster"
)

// TestTimingRelations lists the timing constants of different packages
// that must agree, one relation a row, each with why it must hold.
func TestTimingRelations(t *testing.T) {
	for _, r := range []struct {
		relation string
		holds    bool
	}{
		{"busyWait > cluster.MaxDelay: a place freed within the slot's claim order is still used",
			busyWait > cluster.MaxDelay},
		{"cluster.RankStep <= cluster.MaxDelay: rank 1 waits its step, not the bound",
			cluster.RankStep <= cluster.MaxDelay},
		{"cluster.MaxAge beats < cluster.DefaultTTL: a killed node stops counting as live before its record expires",
			time.Duration(cluster.MaxAge)*cluster.DefaultHeartbeatEvery < cluster.DefaultTTL},
	} {
		if !r.holds {
			t.Errorf("timing relation broken: %s", r.relation)
		}
	}
}
