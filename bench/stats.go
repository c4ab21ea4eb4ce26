package bench

import (
	"math"
	"slices"
)

// Percentile returns the p-quantile (0 ≤ p ≤ 1) of v by the nearest-rank
// method (the smallest value with at least p·len(v) values at or below
// it), or NaN for an empty v. v is not modified.
func Percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	rank := int(math.Ceil(p * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Median returns the median of v (the mean of the two middle values for an
// even length), or NaN for an empty v. NaN values are ignored.
func Median(v []float64) float64 {
	s := make([]float64, 0, len(v))
	for _, x := range v {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// PairRatios returns daemon[i]/floor[i] for each pair i that has both
// values (a workload cut short has a floor without its daemon run). A pair
// whose floor is 0 or NaN, or whose daemon value is NaN, gives NaN (Median
// skips it).
func PairRatios(floor, daemon []float64) []float64 {
	out := make([]float64, min(len(floor), len(daemon)))
	for i := range out {
		if floor[i] == 0 || math.IsNaN(floor[i]) || math.IsNaN(daemon[i]) {
			out[i] = math.NaN()
			continue
		}
		out[i] = daemon[i] / floor[i]
	}
	return out
}
