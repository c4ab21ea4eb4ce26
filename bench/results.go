package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Run kinds.
const (
	KindFloor  = "floor"
	KindDaemon = "daemon"
	// KindBaseline is a daemon run of the baseline binary
	// (CRONLOCK_BENCH_BASELINE); its values stand in a metric's Floor.
	KindBaseline = "baseline"
	// KindSideBySide is a pair of daemon runs, of this build and of the
	// baseline binary, at the same time (the side-by-side workload).
	KindSideBySide = "this + baseline"
)

// Run is one measured run of a workload: a floor or a daemon run of pair
// Pair (0-based), with the machine's load during it.
type Run struct {
	Pair int    `json:"pair"`
	Kind string `json:"kind"`
	Load Load   `json:"load"`
}

// Workload is one workload's runs and metrics. Err is set when the
// workload could not be measured (its metrics are then incomplete).
type Workload struct {
	Name    string    `json:"name"`
	Desc    string    `json:"description"`
	Metrics []*Metric `json:"metrics"`
	Runs    []Run     `json:"runs"`
	Err     string    `json:"error,omitempty"`
}

// Metric returns the workload's metric called name, adding it (with unit
// and target) on first use. Later calls ignore unit and target.
func (w *Workload) Metric(name, unit string, target *Target) *Metric {
	for _, m := range w.Metrics {
		if m.Name == name {
			return m
		}
	}
	m := &Metric{Name: name, Unit: unit, Target: target}
	w.Metrics = append(w.Metrics, m)
	return m
}

// Results is what one invocation of the driver measured.
type Results struct {
	Started   time.Time   `json:"started"`
	Seconds   float64     `json:"seconds"`
	Commit    string      `json:"commit"`
	CPUs      int         `json:"cpus"`
	Workloads []*Workload `json:"workloads"`
}

// Evaluate evaluates every metric and returns the number of failed
// targets (a workload with Err counts as one).
func (r *Results) Evaluate() int {
	failed := 0
	for _, w := range r.Workloads {
		if w.Err != "" {
			failed++
		}
		for _, m := range w.Metrics {
			m.Evaluate()
			if m.Verdict == Fail {
				failed++
			}
		}
	}
	return failed
}

// WriteTable writes the results as two Markdown tables: the metrics with
// their verdicts, then every run's load (a run whose others' CPU exceeds
// Polluted is marked "polluted"). Call Evaluate first.
func (r *Results) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| workload | metric | floor | daemon | ratio | target | verdict |\n|---|---|---|---|---|---|---|\n")
	for _, wl := range r.Workloads {
		if wl.Err != "" {
			fmt.Fprintf(&b, "| %s | not measured: %s | | | | | %s |\n", wl.Name, strings.ReplaceAll(wl.Err, "|", "/"), Fail)
		}
		for _, m := range wl.Metrics {
			target := ""
			if m.Target != nil {
				target = m.Target.String(m.Unit)
			}
			ratio := "-"
			if !math.IsNaN(m.Ratio) {
				ratio = fmt.Sprintf("%.2f×", m.Ratio)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", wl.Name, withUnit(m.Name, m.Unit),
				num(m.FloorMedian), num(m.DaemonMedian), ratio, target, m.Verdict)
		}
	}
	fmt.Fprintf(&b, "\n| workload | pair | run | seconds | load avg (1 min) | our CPU (cores) | others' CPU (cores) |\n|---|---|---|---|---|---|---|\n")
	for _, wl := range r.Workloads {
		for _, run := range wl.Runs {
			mark := ""
			if run.Load.OthersCores > Polluted {
				mark = " polluted"
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %.1f | %.2f | %.2f | %.2f%s |\n", wl.Name, run.Pair+1, run.Kind,
				run.Load.Seconds, run.Load.Load1, run.Load.OursCores, run.Load.OthersCores, mark)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func withUnit(name, unit string) string {
	if unit == "" {
		return name
	}
	return name + " (" + unit + ")"
}

// MarshalJSON writes NaN (nothing measured, no floor) as null, which
// encoding/json cannot encode as a number.
func (m *Metric) MarshalJSON() ([]byte, error) {
	type plain Metric // without the method
	return json.Marshal(struct {
		*plain
		Floor        []*float64 `json:"floor,omitempty"`
		Daemon       []*float64 `json:"daemon"`
		FloorMedian  *float64   `json:"floor_median"`
		DaemonMedian *float64   `json:"daemon_median"`
		Ratio        *float64   `json:"ratio"`
	}{(*plain)(m), nullable(m.Floor), nullable(m.Daemon), nullNaN(m.FloorMedian), nullNaN(m.DaemonMedian), nullNaN(m.Ratio)})
}

func nullNaN(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func nullable(v []float64) []*float64 {
	if v == nil {
		return nil
	}
	out := make([]*float64, len(v))
	for i, x := range v {
		out[i] = nullNaN(x)
	}
	return out
}
