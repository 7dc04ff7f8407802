package signals

import "math"

// CanaryHist counts canary runs by ratio to the baseline in logarithmic bins (2% wide,
// from 0.5 to 8): cumulative counts that two snapshots subtract, so that any window's
// median ratio is known without keeping the runs.
type CanaryHist [canaryBins]uint32

const (
	canaryBins = 141
	canaryLo   = 0.5
	canaryQ    = 1.02
)

// Add counts one ratio (out of range: the end bins).
func (h *CanaryHist) Add(ratio float64) {
	i := int(math.Floor(math.Log(ratio/canaryLo) / math.Log(canaryQ)))
	h[min(max(i, 0), canaryBins-1)]++
}

// Sub is h minus an earlier snapshot.
func (h CanaryHist) Sub(earlier CanaryHist) CanaryHist {
	var d CanaryHist
	for i := range h {
		if h[i] > earlier[i] {
			d[i] = h[i] - earlier[i]
		}
	}
	return d
}

// Count is the number of runs counted.
func (h CanaryHist) Count() int {
	n := 0
	for _, v := range h {
		n += int(v)
	}
	return n
}

// Median is the median ratio (the geometric centre of its bin; 0 without runs).
func (h CanaryHist) Median() float64 {
	n := h.Count()
	if n == 0 {
		return 0
	}
	half, acc := (n+1)/2, 0
	for i, v := range h {
		acc += int(v)
		if acc >= half {
			return canaryLo * math.Pow(canaryQ, float64(i)+0.5)
		}
	}
	return 0
}
