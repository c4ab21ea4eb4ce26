package bench

import (
	"fmt"
	"math"
)

// Of says what a Target limits: the median of the per-pair ratios
// daemon/floor, or the median of the daemon's values.
type Of string

const (
	OfRatio  Of = "ratio"
	OfDaemon Of = "daemon"
)

// Target is one limit of the targets: Of ≤ Max (Exact: Of == Max).
type Target struct {
	Of    Of      `json:"of"`
	Max   float64 `json:"max"`
	Exact bool    `json:"exact,omitempty"`
}

// String is the target as the table shows it: "≤ 1.10×", "≤ 3 ms", "= 3".
func (t Target) String(unit string) string {
	op := "≤"
	if t.Exact {
		op = "="
	}
	if t.Of == OfRatio {
		return fmt.Sprintf("%s %.2f×", op, t.Max)
	}
	if unit == "" {
		return fmt.Sprintf("%s %s", op, num(t.Max))
	}
	return fmt.Sprintf("%s %s %s", op, num(t.Max), unit)
}

// Metric is one measured quantity of a workload: its value in each floor
// run and each daemon run (index i of both is pair i; Floor is nil for a
// quantity without a floor), and at most one target.
type Metric struct {
	Name   string    `json:"name"`
	Unit   string    `json:"unit,omitempty"`
	Floor  []float64 `json:"floor,omitempty"`
	Daemon []float64 `json:"daemon"`
	Target *Target   `json:"target,omitempty"`

	// Set by Evaluate.
	FloorMedian  float64 `json:"floor_median"`
	DaemonMedian float64 `json:"daemon_median"`
	Ratio        float64 `json:"ratio"` // median of the per-pair ratios; NaN without a floor
	Verdict      string  `json:"verdict"`
}

// Verdicts.
const (
	Pass   = "PASS"
	Fail   = "FAIL"
	NoGoal = "" // no target: reported only
)

// Evaluate computes the medians, the median of the per-pair ratios and the
// verdict. A target whose value is NaN (nothing measured) fails.
func (m *Metric) Evaluate() {
	m.DaemonMedian = Median(m.Daemon)
	m.FloorMedian, m.Ratio = math.NaN(), math.NaN()
	if m.Floor != nil {
		m.FloorMedian = Median(m.Floor)
		m.Ratio = Median(PairRatios(m.Floor, m.Daemon))
	}
	m.Verdict = NoGoal
	if m.Target == nil {
		return
	}
	v := m.DaemonMedian
	if m.Target.Of == OfRatio {
		v = m.Ratio
	}
	ok := v <= m.Target.Max
	if m.Target.Exact {
		ok = v == m.Target.Max
	}
	m.Verdict = Fail
	if ok && !math.IsNaN(v) {
		m.Verdict = Pass
	}
}

// num formats a value with about 3 significant digits, "-" for NaN.
func num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "-"
	case v == math.Trunc(v) && a < 1e7:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}
