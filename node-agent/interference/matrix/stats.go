package matrix

import (
	"math"
	"math/rand/v2"
	"sort"
)

// CI is a median with its 95% confidence interval over the rounds of a cell.
type CI struct {
	Median float64 `json:"median"`
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
	N      int     `json:"n"`
	// Method: "order" (distribution-free order-statistic interval of the median, n >= 6),
	// "bootstrap" (percentile bootstrap of the median, 2000 resamples, fixed seed, n < 6)
	// or "single" (n = 1: no interval).
	Method string `json:"method"`
}

// Width is High - Low.
func (c CI) Width() float64 { return c.High - c.Low }

// Median of xs (NaNs and infinities dropped); NaN when empty.
func Median(xs []float64) float64 { return Quantile(xs, 0.5) }

// Quantile of xs at q in [0,1] with linear interpolation between order statistics (NaNs
// dropped); NaN when empty.
func Quantile(xs []float64, q float64) float64 {
	s := sorted(xs)
	return quantileSorted(s, q)
}

func quantileSorted(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	if q <= 0 {
		return s[0]
	}
	if q >= 1 {
		return s[len(s)-1]
	}
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	f := pos - float64(i)
	return s[i]*(1-f) + s[i+1]*f
}

func sorted(xs []float64) []float64 {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			s = append(s, x)
		}
	}
	sort.Float64s(s)
	return s
}

// orderRank is the largest k (1-based) such that [x_(k), x_(n-k+1)] covers the median
// with probability >= 95%: P(Binomial(n, 1/2) < k) <= 2.5%. 0 when no such k (n < 6).
func orderRank(n int) int {
	k := 0
	cdf := 0.0 // P(B <= j-1)
	for j := 1; j <= n/2; j++ {
		cdf += binomPMF(n, j-1)
		if cdf <= 0.025 {
			k = j
		} else {
			break
		}
	}
	return k
}

func binomPMF(n, j int) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
	return math.Exp(lg(n) - lg(j) - lg(n-j) - float64(n)*math.Ln2)
}

// MedianCI is the median of xs with a 95% interval: order statistics when n >= 6,
// else a percentile bootstrap (deterministic: fixed seed). NaNs are dropped; nil when
// nothing is left.
func MedianCI(xs []float64) *CI {
	s := sorted(xs)
	n := len(s)
	if n == 0 {
		return nil
	}
	c := &CI{Median: quantileSorted(s, 0.5), N: n}
	switch k := orderRank(n); {
	case n == 1:
		c.Low, c.High, c.Method = s[0], s[0], "single"
	case k > 0:
		c.Low, c.High, c.Method = s[k-1], s[n-k], "order"
	default:
		c.Low, c.High = bootstrapMedian(s, 2000)
		c.Method = "bootstrap"
	}
	return c
}

func bootstrapMedian(s []float64, b int) (lo, hi float64) {
	r := rand.New(rand.NewPCG(1, 2))
	meds := make([]float64, b)
	buf := make([]float64, len(s))
	for i := range meds {
		for j := range buf {
			buf[j] = s[r.IntN(len(s))]
		}
		sort.Float64s(buf)
		meds[i] = quantileSorted(buf, 0.5)
	}
	sort.Float64s(meds)
	return quantileSorted(meds, 0.025), quantileSorted(meds, 0.975)
}

// Quantiles summarises a latency sample (microseconds).
type Quantiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Summarize is the quantiles of xs; nil when empty.
func Summarize(xs []float64) *Quantiles {
	s := sorted(xs)
	if len(s) == 0 {
		return nil
	}
	return &Quantiles{N: len(s), P50: quantileSorted(s, 0.5), P90: quantileSorted(s, 0.9),
		P99: quantileSorted(s, 0.99), Max: s[len(s)-1]}
}
