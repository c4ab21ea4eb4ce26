package engine

import (
	"runtime/metrics"
	"time"
)

// schedLatencies is the runtime's histogram of how long goroutines were
// runnable before they ran (runtime/metrics "/sched/latencies:seconds":
// bucket counts that only grow; the runtime samples one scheduling
// transition in eight).
const schedLatencies = "/sched/latencies:seconds"

// stallMeter tells whether this process's own goroutines waited for a CPU
// between two readings: each fork holds its P until the child has exec'd
// (vfork), so on a small machine (one or two Ps) a herd of thousands of
// run starts keeps every other goroutine (the Redis client's reader, the
// health check) waiting for up to seconds. A probe timeout in such a window says
// nothing about Redis. Not safe for concurrent use (the health actor owns
// it).
type stallMeter struct {
	s [1]metrics.Sample
}

func newStallMeter() *stallMeter {
	m := &stallMeter{}
	m.s[0].Name = schedLatencies
	return m
}

// read returns the histogram's bucket counts now (a copy), nil when the
// runtime does not publish the metric.
func (m *stallMeter) read() []uint64 {
	metrics.Read(m.s[:])
	if m.s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return append([]uint64(nil), m.s[0].Value.Float64Histogram().Counts...)
}

// longestSince is a lower bound of the longest time a goroutine of this
// process waited runnable for a CPU between the reading before (read) and
// now: the lower edge of the highest bucket whose count grew, 0 if none
// grew or the metric is missing. It does not block.
func (m *stallMeter) longestSince(before []uint64) time.Duration {
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
