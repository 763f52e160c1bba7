package report

import (
	"math"
	"slices"

	"github.com/corral-dev/corral/internal/metrics"
)

// maxPoints caps every drawn curve: more points than pixels only make the
// file larger and the page slower.
const maxPoints = 2000

// meanCurve averages step curves over seeds on a common x grid. A curve's
// value at x is y of its first sample with X >= x, the way
// Summary.UnallocatedAt reads "when arrivals first reached x". The grid
// spans only the x every curve covers, so each point is a mean over all of
// them, and has at most maxGrid steps of a round size. Empty curves are
// left out; a single curve is only downsampled.
func meanCurve(curves [][]metrics.Point, maxGrid int) []metrics.Point {
	curves = slices.DeleteFunc(slices.Clone(curves), func(c []metrics.Point) bool { return len(c) == 0 })
	for i, c := range curves { // the search below needs x order
		if !slices.IsSortedFunc(c, byX) {
			c = slices.Clone(c)
			slices.SortStableFunc(c, byX)
			curves[i] = c
		}
	}
	switch len(curves) {
	case 0:
		return nil
	case 1:
		return downsample(curves[0], maxPoints)
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	for _, c := range curves {
		lo = max(lo, c[0].X)
		hi = min(hi, c[len(c)-1].X)
	}
	if hi < lo {
		return nil // the curves share no x
	}
	step := niceStep((hi - lo) / float64(maxGrid))
	var xs []float64
	for k := math.Ceil(lo / step); k*step <= hi; k++ {
		xs = append(xs, k*step)
	}
	if len(xs) == 0 || xs[len(xs)-1] < hi {
		xs = append(xs, hi) // keep the common end, e.g. just under 130% arrived
	}
	out := make([]metrics.Point, len(xs))
	for i, x := range xs {
		var sum float64
		for _, c := range curves {
			j, _ := slices.BinarySearchFunc(c, x, func(p metrics.Point, x float64) int {
				switch {
				case p.X < x:
					return -1
				case p.X > x:
					return 1
				}
				return 0
			})
			sum += c[j].Y // j < len(c): x <= hi <= the curve's last X
		}
		out[i] = metrics.Point{X: x, Y: sum / float64(len(curves))}
	}
	return out
}

func byX(a, b metrics.Point) int {
	switch {
	case a.X < b.X:
		return -1
	case a.X > b.X:
		return 1
	}
	return 0
}

// niceStep rounds a positive step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw*(1-1e-9) {
			return m * pow
		}
	}
	return 10 * pow
}

// downsample keeps at most n points of a curve with largest-triangle-three-
// buckets (Steinarsson 2013): the first and last points stay, and each
// bucket between keeps the point that spans the largest triangle with its
// neighbours, so peaks and steps survive where striding would drop them.
func downsample(pts []metrics.Point, n int) []metrics.Point {
	if n < 3 || len(pts) <= n {
		return pts
	}
	out := make([]metrics.Point, 0, n)
	out = append(out, pts[0])
	every := float64(len(pts)-2) / float64(n-2) // inner points per bucket
	a := 0                                      // index of the last kept point
	for i := 0; i < n-2; i++ {
		// The next bucket's mean is the third corner of the triangle.
		nlo := int(float64(i+1)*every) + 1
		nhi := min(int(float64(i+2)*every)+1, len(pts))
		var mx, my float64
		for _, p := range pts[nlo:nhi] {
			mx += p.X
			my += p.Y
		}
		if cnt := float64(nhi - nlo); cnt > 0 {
			mx, my = mx/cnt, my/cnt
		} else {
			last := pts[len(pts)-1]
			mx, my = last.X, last.Y
		}
		lo, hi := int(float64(i)*every)+1, int(float64(i+1)*every)+1
		best, bestArea := lo, -1.0
		for j := lo; j < hi; j++ {
			area := math.Abs((pts[a].X-mx)*(pts[j].Y-pts[a].Y) - (pts[a].X-pts[j].X)*(my-pts[a].Y))
			if area > bestArea {
				best, bestArea = j, area
			}
		}
		out = append(out, pts[best])
		a = best
	}
	return append(out, pts[len(pts)-1])
}

// cdf is the empirical distribution of waits as (seconds, % of jobs waiting
// at most that long), one point per distinct value, downsampled to n
// points by stride (it is monotone, so stride loses nothing that shows).
// Waits under floor seconds are drawn at floor so a log axis can hold them.
func cdf(waits []float64, floor float64, n int) []metrics.Point {
	vs := slices.DeleteFunc(slices.Clone(waits), func(v float64) bool { return math.IsNaN(v) })
	if len(vs) == 0 {
		return nil
	}
	for i, v := range vs {
		vs[i] = max(v, floor)
	}
	slices.Sort(vs)
	var pts []metrics.Point
	for i, v := range vs {
		if i+1 < len(vs) && vs[i+1] == v {
			continue // the last of equal values carries their whole count
		}
		pts = append(pts, metrics.Point{X: v, Y: 100 * float64(i+1) / float64(len(vs))})
	}
	if len(pts) <= n {
		return pts
	}
	out := make([]metrics.Point, 0, n)
	for k := range n {
		out = append(out, pts[k*(len(pts)-1)/(n-1)])
	}
	return out
}
