package report

import (
	"math"
	"slices"

	"github.com/corral-dev/corral/internal/metrics"
)

// Every chart puts all policies on one shared x grid, so a curve holds at
// most gridSteps+2 points however long the run, and the tooltip, which
// lists the series that have a point under the cursor, lists them all.
const (
	gridSteps = 1000 // steps of a round size over a chart's x range
	cdfPoints = 500  // log-spaced points of a wait distribution
	maxPoints = 2000 // what no drawn curve exceeds; the tests hold us to it
)

// gridStep is a round step that cuts [lo, hi] into at most gridSteps steps.
func gridStep(lo, hi float64) float64 {
	return niceStep((hi - lo) / gridSteps)
}

// niceStep rounds a positive step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*pow >= raw*(1-1e-9) {
			return m * pow
		}
	}
	return 10 * pow
}

// sortedByX returns the curves that have points, each in x order and
// without NaN or infinite coordinates (a clone when it had to change).
func sortedByX(curves [][]metrics.Point) [][]metrics.Point {
	var out [][]metrics.Point
	for _, c := range curves {
		if slices.ContainsFunc(c, func(p metrics.Point) bool { return !finite(p.X) || !finite(p.Y) }) {
			c = slices.DeleteFunc(slices.Clone(c), func(p metrics.Point) bool { return !finite(p.X) || !finite(p.Y) })
		}
		if len(c) == 0 {
			continue
		}
		if !slices.IsSortedFunc(c, byX) {
			c = slices.Clone(c)
			slices.SortStableFunc(c, byX)
		}
		out = append(out, c)
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func byX(a, b metrics.Point) int {
	switch {
	case a.X < b.X:
		return -1
	case a.X > b.X:
		return 1
	}
	return 0
}

// meanCurve averages curves (one per seed) at the multiples of step. A
// curve's value at x is y of its first sample with X >= x, the way
// Summary.UnallocatedAt reads "when arrivals first reached x". Only the x
// every curve covers is drawn, so each point is a mean over all of them;
// the common end is kept even off the grid (e.g. 129.98% arrived).
func meanCurve(curves [][]metrics.Point, step float64) []metrics.Point {
	curves = sortedByX(curves)
	if len(curves) == 0 {
		return nil
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	for _, c := range curves {
		lo = max(lo, c[0].X)
		hi = min(hi, c[len(c)-1].X)
	}
	if hi < lo {
		return nil // the curves share no x
	}
	var xs []float64
	for k := math.Ceil(lo/step - 1e-9); k*step <= hi; k++ {
		xs = append(xs, k*step)
	}
	if len(xs) == 0 || xs[len(xs)-1] < hi {
		xs = append(xs, hi)
	}
	out := make([]metrics.Point, len(xs))
	for i, x := range xs {
		var sum float64
		for _, c := range curves {
			j, _ := slices.BinarySearchFunc(c, x, func(p metrics.Point, x float64) int {
				return byX(p, metrics.Point{X: x})
			})
			sum += c[j].Y // j < len(c): x <= hi <= the curve's last X
		}
		out[i] = metrics.Point{X: x, Y: sum / float64(len(curves))}
	}
	return out
}

// timeAverage reads a sampled curve as a step function (each y holds until
// the next sample) and draws one point per slice [k*step, (k+1)*step) it
// covers: the mean of y over that slice, at the slice's middle. For
// utilization this is exactly the utilization of that slice of the run, and
// bursts shorter than a slice still count, as area.
func timeAverage(pts []metrics.Point, step float64) []metrics.Point {
	if c := sortedByX([][]metrics.Point{pts}); len(c) == 1 {
		pts = c[0]
	} else {
		return nil
	}
	first, last := pts[0].X, pts[len(pts)-1].X
	if first == last {
		return []metrics.Point{{X: first, Y: pts[len(pts)-1].Y}}
	}
	var out []metrics.Point
	i := 0 // pts[i] holds at the start of the slice
	for k := math.Floor(first / step); k*step < last; k++ {
		a, b := max(k*step, first), min((k+1)*step, last)
		if b <= a {
			continue
		}
		for i+1 < len(pts) && pts[i+1].X <= a {
			i++
		}
		var area float64
		for j, t := i, a; t < b; {
			next := b
			if j+1 < len(pts) {
				next = min(next, pts[j+1].X)
			}
			area += pts[j].Y * (next - t)
			t = next
			if j+1 < len(pts) && pts[j+1].X <= t {
				j++
			}
		}
		out = append(out, metrics.Point{X: (k + 0.5) * step, Y: area / (b - a)})
	}
	return out
}

// logGrid is n points from 1 to top, evenly spaced on a log axis; a single
// point when top <= 1.
func logGrid(top float64, n int) []float64 {
	if !(top > 1) || n < 2 {
		return []float64{1}
	}
	xs := make([]float64, n)
	for k := range n {
		xs[k] = math.Pow(top, float64(k)/float64(n-1))
	}
	xs[n-1] = top // exactly: the last point holds every job
	return xs
}

// cdf is the empirical distribution of waits read at each x: the % of jobs
// that waited at most x seconds, out of the waits plus missing jobs that
// never started (and so waited longer than any x). NaN and infinite waits
// are left out. With no job at all there is nothing to draw.
func cdf(waits []float64, missing int, xs []float64) []metrics.Point {
	vs := slices.DeleteFunc(slices.Clone(waits), func(v float64) bool { return !finite(v) })
	total := len(vs) + max(0, missing)
	if total == 0 {
		return nil
	}
	slices.Sort(vs)
	out := make([]metrics.Point, len(xs))
	for i, x := range xs {
		// n is the first index past x: the count of waits of at most x.
		n, _ := slices.BinarySearchFunc(vs, x, func(v, x float64) int {
			if v <= x {
				return -1
			}
			return 1
		})
		out[i] = metrics.Point{X: x, Y: 100 * float64(n) / float64(total)}
	}
	return out
}
