package report

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/corral-dev/corral/internal/metrics"
)

var approx = cmpopts.EquateApprox(0, 1e-9)

func TestMeanCurve(t *testing.T) {
	cases := map[string]struct {
		curves [][]metrics.Point
		step   float64
		want   []metrics.Point
	}{
		"nothing":     {curves: [][]metrics.Point{nil, {}}, step: 1},
		"one curve":   {curves: [][]metrics.Point{pts(0, 0, 0.5, 5, 1, 10)}, step: 1, want: pts(0, 0, 1, 10)},
		"empty curve": {curves: [][]metrics.Point{nil, pts(0, 0, 1, 1)}, step: 1, want: pts(0, 0, 1, 1)},
		"first sample at or past each grid x; grid ends at the common end": {
			curves: [][]metrics.Point{
				pts(0.5, 10, 1.5, 20, 2.5, 30, 3.2, 40),
				pts(0.2, 0, 1.0, 2, 2.0, 4, 2.9, 6),
			},
			step: 1,
			want: pts(1, (20+2)/2.0, 2, (30+4)/2.0, 2.9, (40+6)/2.0),
		},
		"unsorted curve is sorted first": {
			curves: [][]metrics.Point{pts(2, 20, 1, 10), pts(1, 0, 2, 0)},
			step:   1,
			want:   pts(1, 5, 2, 10),
		},
		"no common x": {curves: [][]metrics.Point{pts(0, 0, 1, 1), pts(2, 2, 3, 3)}, step: 1},
		"NaN and infinite points are dropped": {
			curves: [][]metrics.Point{pts(0, 0, math.NaN(), 5, 1, math.Inf(1), 2, 20)},
			step:   1,
			want:   pts(0, 0, 1, 20, 2, 20),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := meanCurve(tc.curves, tc.step)
			if diff := cmp.Diff(tc.want, got, approx, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("meanCurve (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMeanCurveGrid(t *testing.T) {
	a, b := synthetic("a", 1, "fgd", 1), synthetic("a", 2, "fgd", 1)
	step := gridStep(0, 130)
	if step != 0.2 {
		t.Errorf("grid step %v, want 0.2 for a 130%% run", step)
	}
	got := meanCurve([][]metrics.Point{a.Series.AllocVsArrived, b.Series.AllocVsArrived}, step)
	if len(got) < 600 || len(got) > gridSteps+2 {
		t.Errorf("got %d points, want 600..%d", len(got), gridSteps+2)
	}
}

func TestTimeAverage(t *testing.T) {
	cases := map[string]struct {
		pts  []metrics.Point
		step float64
		want []metrics.Point
	}{
		"nothing":    {step: 1},
		"one sample": {pts: pts(3, 40), step: 1, want: pts(3, 40)},
		"each y holds until the next sample": {
			// 0 on [0, 0.5), 100 on [0.5, 1.5), 20 on [1.5, 2]
			pts:  pts(0, 0, 0.5, 100, 1.5, 20, 2, 20),
			step: 1,
			want: pts(0.5, 50, 1.5, 60),
		},
		"a burst shorter than a slice counts as area": {
			pts:  pts(0, 10, 0.1, 90, 0.2, 10, 10, 10),
			step: 5,
			want: pts(2.5, 10+80*0.1/5, 7.5, 10),
		},
		"duplicate x: the later sample holds": {
			pts:  pts(0, 0, 1, 50, 1, 70, 2, 70),
			step: 2,
			want: pts(1, 35),
		},
		"a partial last slice is averaged over what it covers": {
			pts:  pts(0, 10, 1, 30, 1.5, 30),
			step: 1,
			want: pts(0.5, 10, 1.5, 30),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := timeAverage(tc.pts, tc.step)
			if diff := cmp.Diff(tc.want, got, approx, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("timeAverage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCDF(t *testing.T) {
	cases := map[string]struct {
		waits   []float64
		missing int
		xs      []float64
		want    []metrics.Point
	}{
		"none": {xs: []float64{1, 10}},
		"share of waits at most x": {
			waits: []float64{0, 5, 60, 5, 600, math.NaN()},
			xs:    []float64{1, 5, 59, 60, 600},
			want:  pts(1, 20, 5, 60, 59, 60, 60, 80, 600, 100),
		},
		// Five started, five never did: the curve tops out at 50%, below
		// a policy that started every job.
		"jobs that never started count at infinity": {
			waits: []float64{0, 5, 60, 5, 600}, missing: 5,
			xs:   []float64{1, 5, 600},
			want: pts(1, 10, 5, 30, 600, 50),
		},
		"nothing started": {missing: 3, xs: []float64{1, 10}, want: pts(1, 0, 10, 0)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := cdf(tc.waits, tc.missing, tc.xs)
			if diff := cmp.Diff(tc.want, got, approx, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cdf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLogGrid(t *testing.T) {
	cases := map[string]struct {
		top  float64
		n    int
		want []float64
	}{
		"no wait past 1 s": {top: 0.5, n: 5, want: []float64{1}},
		"powers":           {top: 10000, n: 5, want: []float64{1, 10, 100, 1000, 10000}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, logGrid(tc.top, tc.n), approx); diff != "" {
				t.Errorf("logGrid (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNiceStep(t *testing.T) {
	cases := map[float64]float64{0.13: 0.2, 0.1: 0.1, 0.26: 0.5, 0.7: 1, 1: 1, 1.2: 2, 34: 50, 0: 1}
	for in, want := range cases {
		if got := niceStep(in); math.Abs(got-want) > 1e-12 {
			t.Errorf("niceStep(%v) = %v, want %v", in, got, want)
		}
	}
}
