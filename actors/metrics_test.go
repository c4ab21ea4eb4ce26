package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

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
	m.Skip("backup", ledger.SkipOverlap)
	m.RunFinished("backup", ledger.ResultSuccess, 1500*time.Millisecond, time.Unix(1_800_000_000, 0))
	m.ObserveFireDelay("backup", 3*time.Millisecond)
	m.SetRedisUp(true)
	m.OccurrencesMissed("backup", 3)
	m.StateRepaired("backup")
	want := `
# HELP cronlock_skips_total Slots not run by this node, by skip reason.
# TYPE cronlock_skips_total counter
cronlock_skips_total{job="backup",reason="claim_late"} 0
cronlock_skips_total{job="backup",reason="claimed_elsewhere"} 0
cronlock_skips_total{job="backup",reason="clock_skew"} 0
cronlock_skips_total{job="backup",reason="disabled"} 0
cronlock_skips_total{job="backup",reason="expired"} 0
cronlock_skips_total{job="backup",reason="lock_lost"} 0
cronlock_skips_total{job="backup",reason="max_runs"} 0
cronlock_skips_total{job="backup",reason="no_record"} 0
cronlock_skips_total{job="backup",reason="node_busy"} 0
cronlock_skips_total{job="backup",reason="not_replicated"} 0
cronlock_skips_total{job="backup",reason="outside_claim_window"} 0
cronlock_skips_total{job="backup",reason="outside_retention"} 0
cronlock_skips_total{job="backup",reason="overlap"} 1
cronlock_skips_total{job="backup",reason="overlap_local"} 0
cronlock_skips_total{job="backup",reason="paused"} 0
cronlock_skips_total{job="backup",reason="redis_error"} 0
cronlock_skips_total{job="backup",reason="redis_unsafe"} 0
cronlock_skips_total{job="backup",reason="shutting_down"} 0
cronlock_skips_total{job="backup",reason="state_lost"} 0
# HELP cronlock_occurrences_missed_total Occurrences this node recorded missed in the ledger: due, no record after their answer window (docs/protocol.md, R8). Summed over nodes, each missed occurrence counts once.
# TYPE cronlock_occurrences_missed_total counter
cronlock_occurrences_missed_total{job="backup"} 3
# HELP cronlock_state_repairs_total Claims that found the job's ledger behind what this node had seen (Redis lost data) and repaired it (docs/protocol.md, R5).
# TYPE cronlock_state_repairs_total counter
cronlock_state_repairs_total{job="backup"} 1
# HELP cronlock_last_success_timestamp_seconds Unix time of the last successful run on this node (0 = none).
# TYPE cronlock_last_success_timestamp_seconds gauge
cronlock_last_success_timestamp_seconds{job="backup"} 1.8e+09
# HELP cronlock_redis_up 1 when a claim would succeed now (the backend runs the claim scripts and the Redis policy guard allows claims), else 0.
# TYPE cronlock_redis_up gauge
cronlock_redis_up 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cronlock_skips_total",
		"cronlock_occurrences_missed_total", "cronlock_state_repairs_total",
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

// A job with no update yet (its series are made at the first) is exported
// at zero like any other, SetRunning(0) leaves it so, and its first update
// counts.
func TestMetrics_IdleJobExportedAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.InitJob("idle")
	m.InitJob("busy")
	m.Skip("busy", ledger.SkipDisabled)
	m.SetRunning("idle", 0)
	perJob := func(name string) int {
		n, err := testutil.GatherAndCount(reg, name)
		if err != nil {
			t.Fatalf("gather %s: %v", name, err)
		}
		return n / 2
	}
	for _, name := range []string{"cronlock_runs_total", "cronlock_skips_total", "cronlock_job_running",
		"cronlock_fire_delay_seconds", "cronlock_hook_failures_total"} {
		if n, _ := testutil.GatherAndCount(reg, name); n == 0 || n%2 != 0 {
			t.Errorf("%s: %d series for two jobs, want the same number for each (%d)", name, n, perJob(name))
		}
	}
	want := `
# HELP cronlock_skips_total Slots not run by this node, by skip reason.
# TYPE cronlock_skips_total counter
cronlock_skips_total{job="busy",reason="claim_late"} 0
cronlock_skips_total{job="busy",reason="claimed_elsewhere"} 0
cronlock_skips_total{job="busy",reason="clock_skew"} 0
cronlock_skips_total{job="busy",reason="disabled"} 1
cronlock_skips_total{job="busy",reason="expired"} 0
cronlock_skips_total{job="busy",reason="lock_lost"} 0
cronlock_skips_total{job="busy",reason="max_runs"} 0
cronlock_skips_total{job="busy",reason="no_record"} 0
cronlock_skips_total{job="busy",reason="node_busy"} 0
cronlock_skips_total{job="busy",reason="not_replicated"} 0
cronlock_skips_total{job="busy",reason="outside_claim_window"} 0
cronlock_skips_total{job="busy",reason="outside_retention"} 0
cronlock_skips_total{job="busy",reason="overlap"} 0
cronlock_skips_total{job="busy",reason="overlap_local"} 0
cronlock_skips_total{job="busy",reason="paused"} 0
cronlock_skips_total{job="busy",reason="redis_error"} 0
cronlock_skips_total{job="busy",reason="redis_unsafe"} 0
cronlock_skips_total{job="busy",reason="shutting_down"} 0
cronlock_skips_total{job="busy",reason="state_lost"} 0
cronlock_skips_total{job="idle",reason="claim_late"} 0
cronlock_skips_total{job="idle",reason="claimed_elsewhere"} 0
cronlock_skips_total{job="idle",reason="clock_skew"} 0
cronlock_skips_total{job="idle",reason="disabled"} 0
cronlock_skips_total{job="idle",reason="expired"} 0
cronlock_skips_total{job="idle",reason="lock_lost"} 0
cronlock_skips_total{job="idle",reason="max_runs"} 0
cronlock_skips_total{job="idle",reason="no_record"} 0
cronlock_skips_total{job="idle",reason="node_busy"} 0
cronlock_skips_total{job="idle",reason="not_replicated"} 0
cronlock_skips_total{job="idle",reason="outside_claim_window"} 0
cronlock_skips_total{job="idle",reason="outside_retention"} 0
cronlock_skips_total{job="idle",reason="overlap"} 0
cronlock_skips_total{job="idle",reason="overlap_local"} 0
cronlock_skips_total{job="idle",reason="paused"} 0
cronlock_skips_total{job="idle",reason="redis_error"} 0
cronlock_skips_total{job="idle",reason="redis_unsafe"} 0
cronlock_skips_total{job="idle",reason="shutting_down"} 0
cronlock_skips_total{job="idle",reason="state_lost"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cronlock_skips_total"); err != nil {
		t.Error(err)
	}
	m.Skip("idle", ledger.SkipDisabled)
	m.SetRunning("idle", 2)
	if got := m.TotalRunning(); got != 2 {
		t.Errorf("TotalRunning after the idle job's first update: got %d, want 2", got)
	}
	if n := m.Running()["idle"]; n != 2 {
		t.Errorf("Running()[idle]: got %d, want 2", n)
	}
}

// TotalRunning follows SetRunning and DropJob: the runs in progress of the
// exported jobs, not of a job never initialised or dropped.
func TestMetrics_TotalRunning(t *testing.T) {
	m := NewMetrics(nil)
	m.InitJob("a")
	m.InitJob("b")
	m.SetRunning("a", 0) // a series never made stays unmade
	m.SetRunning("a", 2)
	m.SetRunning("b", 1)
	m.SetRunning("ghost", 5) // never initialised: not exported, not counted
	if got := m.TotalRunning(); got != 3 {
		t.Fatalf("TotalRunning = %d, want 3", got)
	}
	m.SetRunning("a", 1)
	m.DropJob("b") // removed by a reload while its run goes on
	m.SetRunning("b", 0)
	if got := m.TotalRunning(); got != 1 {
		t.Fatalf("after a's run ended and b was dropped: TotalRunning = %d, want 1", got)
	}
	m.InitJob("b") // added again
	m.SetRunning("b", 1)
	m.SetRunning("a", 0)
	if got := m.TotalRunning(); got != 1 {
		t.Fatalf("after b came back with one run and a has none: TotalRunning = %d, want 1", got)
	}
}
