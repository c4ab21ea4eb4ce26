package actors

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are cronlock's Prometheus series (SPEC.md §8). Every job's series
// exist from InitJob on, so "never ran" can be alerted on. Safe for
// concurrent use.
type Metrics struct {
	Runs         *prometheus.CounterVec   // cronlock_runs_total{job,result}
	RunDuration  *prometheus.HistogramVec // cronlock_run_duration_seconds{job}
	FireDelay    *prometheus.HistogramVec // cronlock_fire_delay_seconds{job}
	Skips        *prometheus.CounterVec   // cronlock_skips_total{job,reason}
	LeaseLost    *prometheus.CounterVec   // cronlock_lease_lost_total{job}
	LastSuccess  *prometheus.GaugeVec     // cronlock_last_success_timestamp_seconds{job}
	JobRunning   *prometheus.GaugeVec     // cronlock_job_running{job}
	RedisUp      prometheus.Gauge         // cronlock_redis_up
	ClockSkew    prometheus.Gauge         // cronlock_clock_skew_seconds
	HookFailures *prometheus.CounterVec   // cronlock_hook_failures_total{job,hook}
	FiresDropped *prometheus.CounterVec   // cronlock_fires_dropped_total{job}
	MissedSlots  *prometheus.CounterVec   // cronlock_missed_slots_total{job}
}

// NewMetrics creates the series and registers them with reg (nil: not
// registered, e.g. in tests). It panics only if reg already holds series of
// the same names, which is a programming error.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	delayBuckets := []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &Metrics{
		Runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cronlock_runs_total",
			Help: "Runs finished, by final result."}, []string{"job", "result"}),
		RunDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cronlock_run_duration_seconds",
			Help: "Run duration in seconds, all attempts included.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 12)}, []string{"job"}),
		FireDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cronlock_fire_delay_seconds",
			Help: "Seconds from a slot's nominal instant to the start of its process.", Buckets: delayBuckets}, []string{"job"}),
		Skips: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cronlock_skips_total",
			Help: "Slots not run by this node, by skip reason."}, []string{"job", "reason"}),
		LeaseLost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cronlock_lease_lost_total",
			Help: "Runs whose lease was lost while running."}, []string{"job"}),
		LastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cronlock_last_success_timestamp_seconds",
			Help: "Unix time of the last successful run on this node (0 = none)."}, []string{"job"}),
		JobRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cronlock_job_running",
			Help: "Runs of the job in progress on this node."}, []string{"job"}),
		RedisUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cronlock_redis_up",
			Help: "1 when the coordination backend answers, else 0."}),
		ClockSkew: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cronlock_clock_skew_seconds",
			Help: "Local clock minus Redis TIME, in seconds."}),
		HookFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cronlock_hook_failures_total",
			Help: "Hooks that failed or timed out."}, []string{"job", "hook"}),
		FiresDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cronlock_fires_dropped_total",
			Help: "Fire messages the ticker dropped because a job actor's inbox was full."}, []string{"job"}),
		MissedSlots: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cronlock_missed_slots_total",
			Help: "Slots passed over because the ticker woke up after a newer slot was already due."}, []string{"job"}),
	}
	if reg != nil {
		reg.MustRegister(m.Runs, m.RunDuration, m.FireDelay, m.Skips, m.LeaseLost, m.LastSuccess,
			m.JobRunning, m.RedisUp, m.ClockSkew, m.HookFailures, m.FiresDropped, m.MissedSlots)
	}
	return m
}

// InitJob creates every series of a job at zero.
func (m *Metrics) InitJob(job string) {
	for _, r := range Results {
		m.Runs.WithLabelValues(job, r)
	}
	for _, r := range SkipReasons {
		m.Skips.WithLabelValues(job, r)
	}
	m.RunDuration.WithLabelValues(job)
	m.FireDelay.WithLabelValues(job)
	m.LeaseLost.WithLabelValues(job)
	m.LastSuccess.WithLabelValues(job)
	m.JobRunning.WithLabelValues(job)
	m.HookFailures.WithLabelValues(job, "on_success")
	m.HookFailures.WithLabelValues(job, "on_failure")
	m.FiresDropped.WithLabelValues(job)
	m.MissedSlots.WithLabelValues(job)
}

// DropJob deletes a removed job's series.
func (m *Metrics) DropJob(job string) {
	l := prometheus.Labels{"job": job}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.Runs, m.Skips,
		m.RunDuration, m.FireDelay, m.LeaseLost, m.LastSuccess, m.JobRunning, m.HookFailures,
		m.FiresDropped, m.MissedSlots} {
		v.DeletePartialMatch(l)
	}
}

// Skip counts one skipped slot.
func (m *Metrics) Skip(job, reason string) { m.Skips.WithLabelValues(job, reason).Inc() }

// ObserveFireDelay records start − slot in seconds.
func (m *Metrics) ObserveFireDelay(job string, d time.Duration) {
	m.FireDelay.WithLabelValues(job).Observe(d.Seconds())
}
