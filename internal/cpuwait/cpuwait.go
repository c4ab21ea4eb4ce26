// Package cpuwait tells whether this process's own goroutines waited for a
// CPU between two readings (runtime/metrics "/sched/latencies:seconds").
// It is about this process, not about any server: the Redis backend's
// readiness probe uses it to discount a probe that timed out while the
// daemon itself could not run (redislock, readiness.go).
package cpuwait

import (
	"runtime/metrics"
	"time"
)

// schedLatencies is the runtime's histogram of how long goroutines were
// runnable before they ran (runtime/metrics "/sched/latencies:seconds":
// bucket counts that only grow; the runtime samples one scheduling
// transition in eight).
const schedLatencies = "/sched/latencies:seconds"

// Meter tells whether this process's own goroutines waited for a CPU
// between two readings: each fork holds its P until the child has exec'd
// (vfork), so on a small machine (one or two Ps) a herd of thousands of
// run starts keeps every other goroutine (the Redis client's reader, the
// readiness probe) waiting for up to seconds. A probe timeout in such a
// window says nothing about the server. Not safe for concurrent use (one
// goroutine owns a Meter: the readiness check's caller).
type Meter struct {
	s [1]metrics.Sample
}

// NewMeter returns a Meter; it does no I/O.
func NewMeter() *Meter {
	m := &Meter{}
	m.s[0].Name = schedLatencies
	return m
}

// Read returns the histogram's bucket counts now (a copy), nil when the
// runtime does not publish the metric.
func (m *Meter) Read() []uint64 {
	metrics.Read(m.s[:])
	if m.s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return append([]uint64(nil), m.s[0].Value.Float64Histogram().Counts...)
}

// LongestSince is a lower bound of the longest time a goroutine of this
// process waited runnable for a CPU between the reading before (Read) and
// now: the lower edge of the highest bucket whose count grew, 0 if none
// grew or the metric is missing. It does not block.
func (m *Meter) LongestSince(before []uint64) time.Duration {
	metrics.Read(m.s[:])
	if m.s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := m.s[0].Value.Float64Histogram() // len(Counts)+1 bucket edges, seconds
	if len(before) != len(h.Counts) {
		return 0
	}
	for i := len(h.Counts) - 1; i >= 0; i-- {
		if h.Counts[i] > before[i] {
			lo := h.Buckets[i]
			if lo <= 0 { // the first bucket starts at -Inf or 0
				return 0
			}
			return time.Duration(lo * float64(time.Second))
		}
	}
	return 0
}
