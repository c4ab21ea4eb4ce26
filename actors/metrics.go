package actors

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds cronlock's Prometheus series. Every job's
// series exist from InitJob on, so "never ran" can be alerted on.
//
// It is a custom prometheus.Collector over compact per-job counters rather
// than *Vec types: a CounterVec child costs ~530 bytes, so the ~20 series
// of each of 10,000 jobs would take over 100 MB (the target is < 60 MiB
// RSS for 10,000 jobs); here a job costs a few hundred bytes and the series
// are built at scrape time. Safe for concurrent use.
type Metrics struct {
	mu sync.RWMutex
	// jobs holds every initialised job; its series are made at the job's
	// first update (nil until then: all zero, 10,000 idle jobs keep none).
	jobs map[string]*jobSeries
	// totalRunning is the sum of the exported jobs' running (TotalRunning).
	totalRunning atomic.Int64

	redisUp   atomic.Uint64 // float64 bits
	clockSkew atomic.Uint64 // float64 bits
}

// Histogram buckets, in seconds.
var (
	fireDelayBuckets = []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	durationBuckets  = prometheus.ExponentialBuckets(0.01, 4, 12)
)

// Hook names, the values of the `hook` label.
var hookNames = [...]string{"on_success", "on_failure"}

// Hook failure reasons, the values of the `reason` label of
// cronlock_hook_failures_total (README.md, "Hooks").
const (
	HookFailStart    = "start"    // the hook's process could not start
	HookFailExit     = "exit"     // it exited non-zero (or its wait failed)
	HookFailTimeout  = "timeout"  // it ran longer than hook_timeout and was terminated
	HookFailDropped  = "dropped"  // not run: the job's hook queue was full and it was the oldest pending
	HookFailShutdown = "shutdown" // not run, or terminated, because the shutdown's drain time ran out
)

// hookReasons lists every hook failure reason, in metric order.
var hookReasons = [...]string{HookFailStart, HookFailExit, HookFailTimeout, HookFailDropped, HookFailShutdown}

type jobSeries struct {
	runs        [len(results)]atomic.Uint64     // by results index
	skips       [len(skipReasons)]atomic.Uint64 // by skipReasons index
	leaseLost   atomic.Uint64
	dropped     atomic.Uint64
	missed      atomic.Uint64
	occMissed   atomic.Uint64
	repairs     atomic.Uint64
	running     atomic.Int64
	lastSuccess atomic.Uint64 // float64 bits
	duration    histogram
	fireDelay   histogram

	hookFails [len(hookNames)][len(hookReasons)]atomic.Uint64 // by hookNames, hookReasons index
}

// histogram is a minimal fixed-bucket histogram (cumulative at scrape).
type histogram struct {
	mu     sync.Mutex
	counts []uint64 // per bucket, non-cumulative; len(buckets)+1 with +Inf
	sum    float64
}

func (h *histogram) observe(buckets []float64, v float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts == nil {
		h.counts = make([]uint64, len(buckets)+1)
	}
	i, _ := slices.BinarySearch(buckets, v)
	h.counts[i]++
	h.sum += v
}

func (h *histogram) metric(desc *prometheus.Desc, buckets []float64, job string) prometheus.Metric {
	h.mu.Lock()
	defer h.mu.Unlock()
	cum := make(map[float64]uint64, len(buckets))
	var n uint64
	for i, b := range buckets {
		if h.counts != nil {
			n += h.counts[i]
		}
		cum[b] = n
	}
	if h.counts != nil {
		n += h.counts[len(buckets)]
	}
	return prometheus.MustNewConstHistogram(desc, n, h.sum, cum, job)
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered, e.g. in tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{jobs: map[string]*jobSeries{}}
	if reg != nil {
		reg.MustRegister(m)
	}
	return m
}

var (
	descRuns = prometheus.NewDesc("cronlock_runs_total", "Runs finished, by final result.", []string{"job", "result"}, nil)
	descDur  = prometheus.NewDesc("cronlock_run_duration_seconds", "Run duration in seconds, all attempts included.", []string{"job"}, nil)
	descFire = prometheus.NewDesc("cronlock_fire_delay_seconds",
		"Seconds from a slot's nominal instant to the start of its process.", []string{"job"}, nil)
	descSkips = prometheus.NewDesc("cronlock_skips_total", "Slots not run by this node, by skip reason.", []string{"job", "reason"}, nil)
	descLost  = prometheus.NewDesc("cronlock_lease_lost_total", "Runs whose lease was lost while running.", []string{"job"}, nil)
	descLast  = prometheus.NewDesc("cronlock_last_success_timestamp_seconds",
		"Unix time of the last successful run on this node (0 = none).", []string{"job"}, nil)
	descRunning = prometheus.NewDesc("cronlock_job_running", "Runs of the job in progress on this node.", []string{"job"}, nil)
	descUp      = prometheus.NewDesc("cronlock_redis_up", "1 when a claim would succeed now (the backend runs the claim scripts and the Redis policy guard allows claims), else 0.", nil, nil)
	descSkew    = prometheus.NewDesc("cronlock_clock_skew_seconds", "Local clock minus Redis TIME, in seconds.", nil, nil)
	descHooks   = prometheus.NewDesc("cronlock_hook_failures_total",
		"Hooks that failed, timed out, or were not run (queue full, shutdown), by reason.", []string{"job", "hook", "reason"}, nil)
	descDropped = prometheus.NewDesc("cronlock_fires_dropped_total",
		"Fire messages the ticker dropped because a job actor's inbox was full.", []string{"job"}, nil)
	descMissed = prometheus.NewDesc("cronlock_missed_slots_total",
		"Slots this node's ticker passed over because it woke late (the process was paused or starved); the ledger records them missed if no node ran them (cronlock_occurrences_missed_total).",
		[]string{"job"}, nil)
	descOccMissed = prometheus.NewDesc("cronlock_occurrences_missed_total",
		"Occurrences this node recorded missed in the ledger: due, no record after their answer window (docs/protocol.md, R8). Summed over nodes, each missed occurrence counts once.",
		[]string{"job"}, nil)
	descRepairs = prometheus.NewDesc("cronlock_state_repairs_total",
		"Claims that found the job's ledger behind what this node had seen (Redis lost data) and repaired it (docs/protocol.md, R5).",
		[]string{"job"}, nil)
)

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRuns, descDur, descFire, descSkips, descLost, descLast,
		descRunning, descUp, descSkew, descHooks, descDropped, descMissed, descOccMissed, descRepairs} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, loadFloat(&m.redisUp))
	ch <- prometheus.MustNewConstMetric(descSkew, prometheus.GaugeValue, loadFloat(&m.clockSkew))
	m.mu.RLock()
	defer m.mu.RUnlock()
	var zero *jobSeries // for the jobs without updates yet, made at the first
	for job, s := range m.jobs {
		if s == nil {
			if zero == nil {
				zero = &jobSeries{}
			}
			s = zero
		}
		counter := func(d *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{job}, labels...)...)
		}
		for i, r := range results {
			counter(descRuns, s.runs[i].Load(), r)
		}
		for i, r := range skipReasons {
			counter(descSkips, s.skips[i].Load(), r)
		}
		for i, h := range hookNames {
			for k, r := range hookReasons {
				counter(descHooks, s.hookFails[i][k].Load(), h, r)
			}
		}
		counter(descLost, s.leaseLost.Load())
		counter(descDropped, s.dropped.Load())
		counter(descMissed, s.missed.Load())
		counter(descOccMissed, s.occMissed.Load())
		counter(descRepairs, s.repairs.Load())
		ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(s.running.Load()), job)
		ch <- prometheus.MustNewConstMetric(descLast, prometheus.GaugeValue, loadFloat(&s.lastSuccess), job)
		ch <- s.duration.metric(descDur, durationBuckets, job)
		ch <- s.fireDelay.metric(descFire, fireDelayBuckets, job)
	}
}

// InitJob creates every series of a job at zero (idempotent).
func (m *Metrics) InitJob(job string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.jobs[job]; !ok {
		m.jobs[job] = nil // exported at zero; the series are made at the first update
	}
}

// DropJob deletes a removed job's series.
func (m *Metrics) DropJob(job string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.jobs[job]; s != nil {
		m.totalRunning.Add(-s.running.Load())
	}
	delete(m.jobs, job)
}

// job returns the job's series; a job never initialised gets a throwaway
// value (its updates are not exported).
func (m *Metrics) job(job string) *jobSeries {
	m.mu.RLock()
	s, ok := m.jobs[job]
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	if !ok {
		return &jobSeries{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok = m.jobs[job]
	switch {
	case s != nil:
	case ok:
		s = &jobSeries{}
		m.jobs[job] = s
	default: // dropped meanwhile
		s = &jobSeries{}
	}
	return s
}

// Skip counts one skipped slot.
func (m *Metrics) Skip(job, reason string) {
	if i := slices.Index(skipReasons[:], reason); i >= 0 {
		m.job(job).skips[i].Add(1)
	}
}

// RunFinished counts a run's final result and duration; a success also
// sets the last-success time.
func (m *Metrics) RunFinished(job, result string, d time.Duration, finished time.Time) {
	s := m.job(job)
	if i := slices.Index(results[:], result); i >= 0 {
		s.runs[i].Add(1)
	}
	s.duration.observe(durationBuckets, d.Seconds())
	if result == ledger.ResultSuccess {
		storeFloat(&s.lastSuccess, float64(finished.UnixNano())/1e9)
	}
}

// ObserveFireDelay records start − slot.
func (m *Metrics) ObserveFireDelay(job string, d time.Duration) {
	m.job(job).fireDelay.observe(fireDelayBuckets, d.Seconds())
}

// LeaseLost counts one lost lease.
func (m *Metrics) LeaseLost(job string) { m.job(job).leaseLost.Add(1) }

// SetRunning sets the number of runs in progress.
// A job without series stays so when n is 0.
func (m *Metrics) SetRunning(job string, n int) {
	for {
		m.mu.RLock()
		s, ok := m.jobs[job]
		if s != nil {
			// Under the read lock: DropJob (write lock) takes the job's
			// count out of the total before or after, never in between.
			m.totalRunning.Add(int64(n) - s.running.Swap(int64(n)))
			m.mu.RUnlock()
			return
		}
		m.mu.RUnlock()
		if !ok || n == 0 {
			return // a job not (or no longer) exported; or 0 on a series never made
		}
		m.job(job) // make the series, then set it
	}
}

// TotalRunning is the number of runs in progress over all exported jobs
// (kept as SetRunning and DropJob change it: STATUS= asks every second,
// and walking 10,000 jobs' series each time was most of an idle daemon's
// CPU in its first seconds).
func (m *Metrics) TotalRunning() int64 { return m.totalRunning.Load() }

// Running returns the runs in progress by job, for the jobs that have
// any; nil when none has.
func (m *Metrics) Running() map[string]int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out map[string]int64
	for job, s := range m.jobs {
		if s == nil {
			continue
		}
		if n := s.running.Load(); n > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[job] = n
		}
	}
	return out
}

// HookFailed counts a hook ("on_success"/"on_failure") that failed or was
// not run, by reason (one of the HookFail* constants); unknown names are
// ignored.
func (m *Metrics) HookFailed(job, hook, reason string) {
	i, k := slices.Index(hookNames[:], hook), slices.Index(hookReasons[:], reason)
	if i >= 0 && k >= 0 {
		m.job(job).hookFails[i][k].Add(1)
	}
}

// FireDropped counts a fire the ticker could not deliver.
func (m *Metrics) FireDropped(job string) { m.job(job).dropped.Add(1) }

// SlotsMissed counts missed slots: passed over by the ticker, or found
// unclaimed at start or when Redis returned.
func (m *Metrics) SlotsMissed(job string, n int) { m.job(job).missed.Add(uint64(n)) }

// OccurrencesMissed counts occurrences this node recorded missed in the
// ledger (cronlock_occurrences_missed_total).
func (m *Metrics) OccurrencesMissed(job string, n int) { m.job(job).occMissed.Add(uint64(n)) }

// StateRepaired counts a claim that repaired the job's state in Redis.
func (m *Metrics) StateRepaired(job string) { m.job(job).repairs.Add(1) }

// SetRedisUp sets cronlock_redis_up.
func (m *Metrics) SetRedisUp(up bool) {
	v := 0.0
	if up {
		v = 1
	}
	storeFloat(&m.redisUp, v)
}

// SetClockSkew sets cronlock_clock_skew_seconds.
func (m *Metrics) SetClockSkew(d time.Duration) { storeFloat(&m.clockSkew, d.Seconds()) }

// ClockSkew is the last SetClockSkew: this node's clock minus Redis TIME as
// the health check last measured it (0 before the first measure).
func (m *Metrics) ClockSkew() time.Duration {
	return time.Duration(loadFloat(&m.clockSkew) * float64(time.Second))
}

func loadFloat(v *atomic.Uint64) float64     { return math.Float64frombits(v.Load()) }
func storeFloat(v *atomic.Uint64, f float64) { v.Store(math.Float64bits(f)) }
