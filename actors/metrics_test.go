package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// The collector exports every series of a job from InitJob on, with the
// names and labels documented in README.md, and the values recorded.
func TestMetrics_ExportsSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.InitJob("backup")
	m.Skip("backup", SkipOverlap)
	m.RunFinished("backup", ResultSuccess, 1500*time.Millisecond, time.Unix(1_800_000_000, 0))
	m.ObserveFireDelay("backup", 3*time.Millisecond)
	m.SetRedisUp(true)
	want := `
# HELP cronlock_skips_total Slots not run by this node, by skip reason.
# TYPE cronlock_skips_total counter
cronlock_skips_total{job="backup",reason="claimed_elsewhere"} 0
cronlock_skips_total{job="backup",reason="disabled"} 0
cronlock_skips_total{job="backup",reason="max_runs"} 0
cronlock_skips_total{job="backup",reason="no_record"} 0
cronlock_skips_total{job="backup",reason="node_busy"} 0
cronlock_skips_total{job="backup",reason="not_replicated"} 0
cronlock_skips_total{job="backup",reason="overlap"} 1
cronlock_skips_total{job="backup",reason="overlap_local"} 0
cronlock_skips_total{job="backup",reason="paused"} 0
cronlock_skips_total{job="backup",reason="redis_error"} 0
cronlock_skips_total{job="backup",reason="redis_unsafe"} 0
cronlock_skips_total{job="backup",reason="shutting_down"} 0
# HELP cronlock_last_success_timestamp_seconds Unix time of the last successful run on this node (0 = none).
# TYPE cronlock_last_success_timestamp_seconds gauge
cronlock_last_success_timestamp_seconds{job="backup"} 1.8e+09
# HELP cronlock_redis_up 1 when a claim would succeed now (the backend runs the claim scripts and the Redis policy guard allows claims), else 0.
# TYPE cronlock_redis_up gauge
cronlock_redis_up 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cronlock_skips_total",
		"cronlock_last_success_timestamp_seconds", "cronlock_redis_up"); err != nil {
		t.Error(err)
	}
	if n, _ := testutil.GatherAndCount(reg, "cronlock_fire_delay_seconds", "cronlock_run_duration_seconds",
		"cronlock_runs_total", "cronlock_hook_failures_total", "cronlock_lease_lost_total", "cronlock_job_running"); n != 2+5+2*5+1+1+1 { // runs_total: one series per result, replaced included
		t.Errorf("got %d series, want 20", n)
	}
	m.DropJob("backup")
	if n, _ := testutil.GatherAndCount(reg, "cronlock_runs_total"); n != 0 {
		t.Errorf("after DropJob: got %d runs series, want 0", n)
	}
}

func TestHistogram_Cumulative(t *testing.T) {
	var h histogram
	for _, v := range []float64{0.0004, 0.001, 0.003, 20} {
		h.observe(fireDelayBuckets, v)
	}
	d := prometheus.NewDesc("x", "x", []string{"job"}, nil)
	var got = &dtoMetric{}
	if err := h.metric(d, fireDelayBuckets, "j").Write(&got.Metric); err != nil {
		t.Fatal(err)
	}
	hist := got.GetHistogram()
	if hist.GetSampleCount() != 4 {
		t.Errorf("count: got %d, want 4", hist.GetSampleCount())
	}
	for _, b := range hist.GetBucket() {
		want := map[float64]uint64{0.0005: 1, 0.001: 2, 0.002: 2, 0.005: 3, 10: 3}
		if w, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("bucket le=%v: got %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
}

type dtoMetric struct{ dto.Metric }
