//go:build bench

package bench

import (
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// runHost measures how fast this machine starts a process, so that
// tables of different days can be compared: the same VM's fork and exec
// varied several times over from one day to the next (README,
// "Performance"), and every workload with a floor pays it. It starts
// `/bin/sh -c true` hostStarts times, one after the other, and reports the
// median and p90 wall time of a start and wait.
func runHost(t *testing.T, _ settings, wl *Workload) {
	a := take(t)
	d := make([]float64, 0, hostStarts)
	for range hostStarts {
		t0 := time.Now()
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			t.Fatalf("/bin/sh -c true: %v", err)
		}
		d = append(d, float64(time.Since(t0).Microseconds()))
	}
	wl.Runs = append(wl.Runs, Run{Kind: KindFloor, Load: Between(a, take(t))})
	// In the floor column: it is no daemon's measurement.
	median := wl.Metric(fmt.Sprintf("/bin/sh -c true, started and waited for (median of %d)", hostStarts), "µs", nil)
	median.Floor = append(median.Floor, Percentile(d, 0.5))
	p90 := wl.Metric(fmt.Sprintf("/bin/sh -c true, started and waited for (p90 of %d)", hostStarts), "µs", nil)
	p90.Floor = append(p90.Floor, Percentile(d, 0.9))
}

const hostStarts = 200
