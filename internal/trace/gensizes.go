package trace

import (
	"math/rand/v2"
	"slices"
)

// sizeDist draws job sizes.
type sizeDist struct {
	sizes []int
	cdf   []float64
	mean  float64
}

func (d sizeDist) draw(rng *rand.Rand) int {
	u := rng.Float64()
	i, _ := slices.BinarySearch(d.cdf, u)
	return d.sizes[min(i, len(d.sizes)-1)]
}

// powerOfTwoSizes is P(size = 2^k) proportional to r^k for 2^k <= maxSize,
// with r found by bisection so that the mean is target: one parameter that
// gives many small jobs and a long tail of large ones, as Kalos reports. For
// maxSize 1024 and target 26.8, r is about 0.685: 32% of jobs take one GPU,
// 79% fit in one 8-GPU node, and 0.7% take 1,024.
func powerOfTwoSizes(maxSize int, target float64) sizeDist {
	var sizes []int
	for s := 1; s <= maxSize; s *= 2 {
		sizes = append(sizes, s)
	}
	mean := func(r float64) float64 {
		var w, m, rk float64 = 0, 0, 1
		for _, s := range sizes {
			w += rk
			m += rk * float64(s)
			rk *= r
		}
		return m / w
	}
	lo, hi := 1e-9, 1e3
	for range 200 {
		mid := (lo + hi) / 2
		if mean(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	r := (lo + hi) / 2
	d := sizeDist{sizes: sizes, mean: mean(r)}
	var w, rk float64 = 0, 1
	for range sizes {
		w += rk
		d.cdf = append(d.cdf, w)
		rk *= r
	}
	for i := range d.cdf {
		d.cdf[i] /= w
	}
	return d
}

func floorPow2(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}
