package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/corral-dev/corral/internal/metrics"
)

// span is the x range of one series over all runs that have it.
func span(c *comparison, series func(r metrics.Result) []metrics.Point) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range c.Policies {
		for _, r := range p.Runs {
			for _, pt := range series(r) {
				if finite(pt.X) && finite(pt.Y) {
					lo, hi = min(lo, pt.X), max(hi, pt.X)
				}
			}
		}
	}
	return lo, hi, lo <= hi
}

// buildCharts makes the charts whose series some run recorded, in a fixed
// order: allocation vs arrivals, utilization over time, wait distribution.
func buildCharts(c *comparison) []chartSpec {
	styles := policyStyles(c)
	var charts []chartSpec
	for _, build := range []func(*comparison, map[string]seriesStyle) (chartSpec, bool){
		allocChart, utilChart, waitChart, pendingChart,
	} {
		if ch, ok := build(c, styles); ok {
			charts = append(charts, ch)
		}
	}
	charts = append(charts, queueCharts(c, styles)...)
	return append(charts, heatCharts(c, styles)...)
}

// allocChart plots GPU allocated against GPU requested, both as % of
// capacity: the fgd protocol's curve. Several seeds are averaged on a
// common grid; a grey diagonal marks "everything that arrived is placed".
func allocChart(c *comparison, styles map[string]seriesStyle) (chartSpec, bool) {
	lo, hi, ok := span(c, func(r metrics.Result) []metrics.Point { return r.Series.AllocVsArrived })
	if !ok {
		return chartSpec{}, false
	}
	step := gridStep(lo, hi)
	var series []ecSeries
	xmax := 0.0
	for _, p := range c.Policies {
		var curves [][]metrics.Point
		for _, r := range p.Runs {
			curves = append(curves, r.Series.AllocVsArrived)
		}
		pts := meanCurve(curves, step)
		if len(pts) == 0 {
			continue
		}
		xmax = max(xmax, pts[len(pts)-1].X)
		series = append(series, line(p.Name, pts, styles[p.Name]))
	}
	if len(series) == 0 {
		return chartSpec{}, false
	}
	// The diagonal gets a point every 1%: the zoom window drops lines whose
	// points all lie outside it.
	var ideal []metrics.Point
	for x := 0.0; x < xmax; x++ {
		ideal = append(ideal, metrics.Point{X: x, Y: min(x, 100)})
	}
	ideal = append(ideal, metrics.Point{X: xmax, Y: min(xmax, 100)})
	ref := line("all arrived placed", ideal, referenceStyle)
	ref.ShowSymbol = false
	series = append(series, ref)
	sub := "seed " + seedList(c.Seeds)
	if len(c.Seeds) > 1 {
		sub = fmt.Sprintf("mean of seeds %s on a common x grid", seedList(c.Seeds))
	}
	opt := baseOption("GPU allocation vs arrivals", sub,
		ecAxis{Type: "value", Name: "GPU requested, % of capacity", Min: 0, Max: math.Ceil(xmax)},
		ecAxis{Type: "value", Name: "GPU allocated, %", Max: 100, Scale: true})
	// Policies part where the cluster fills up: open on the last 40% of
	// arrivals, with the y axis fitted to what is in view ("weakFilter"
	// keeps segments that cross the window's edge).
	for i := range opt.DataZoom {
		opt.DataZoom[i].FilterMode = "weakFilter"
		opt.DataZoom[i].StartValue = 10 * math.Floor(0.6*xmax/10)
	}
	opt.Series = series
	return chartSpec{
		ID: "chart-alloc", XFormat: "pct", YFormat: "pct", Option: opt,
		Caption: "Opens on the last 40% of arrivals; drag the slider for the whole run. Where a curve leaves " +
			"the diagonal, requests arrive that no node can hold; the gap at the right edge is the unallocated GPU share.",
	}, true
}

// gpuCurves are the GPU-over-time series the utilization chart draws, two
// per policy: GPUs doing useful work in the policy's own style, GPUs
// allocated faint (thin, half transparent) in the same colour and dash, so
// the policy's dash keeps telling policies apart. A series a run does not
// record is left out.
var gpuCurves = []struct {
	label string // after the policy's name in the legend
	faint bool
	get   func(metrics.Series) []metrics.Point
}{
	{"doing useful work", false, func(s metrics.Series) []metrics.Point { return s.Utilization }},
	{"allocated", true, func(s metrics.Series) []metrics.Point { return s.Allocated }},
}

// utilChart plots the GPUs held over time for each policy's first seed:
// averaging over seeds would blur the bursts it is there to show.
func utilChart(c *comparison, styles map[string]seriesStyle) (chartSpec, bool) {
	lo, hi, ok := span(c, func(r metrics.Result) []metrics.Point {
		if r.Seed != c.firstSeed(r.Policy) {
			return nil
		}
		var all []metrics.Point
		for _, g := range gpuCurves {
			all = append(all, g.get(r.Series)...)
		}
		return all
	})
	if !ok {
		return chartSpec{}, false
	}
	step := gridStep(lo, hi)
	var series []ecSeries
	seeds := map[int64]bool{}
	drawn := map[string]bool{}
	for _, p := range c.Policies {
		r := p.Runs[0]
		for _, g := range gpuCurves {
			pts := g.get(r.Series)
			if len(pts) == 0 {
				continue
			}
			seeds[r.Seed] = true
			drawn[g.label] = true
			st := styles[p.Name]
			if g.faint {
				st.Width, st.Opacity = 1.5, 0.5
			}
			name := p.Name
			if len(gpuCurves) > 1 {
				name += ", " + g.label
			}
			series = append(series, line(name, timeAverage(pts, step), st))
		}
	}
	if len(series) == 0 {
		return chartSpec{}, false
	}
	sub := "first seed of each policy"
	if len(seeds) == 1 {
		for s := range seeds {
			sub = fmt.Sprintf("seed %d", s)
		}
	}
	var what []string
	for _, g := range gpuCurves {
		if drawn[g.label] {
			what = append(what, "GPUs "+g.label)
		}
	}
	opt := baseOption(strings.Join(what, " vs ")+" over time", sub,
		ecAxis{Type: "value", Name: "hours since the first arrival", Min: 0, Max: roundUp(hi)},
		ecAxis{Type: "value", Name: "GPUs, % of capacity", Min: 0, Max: 100})
	opt.Series = series
	return chartSpec{ID: "chart-util", XFormat: "hours", YFormat: "pct", Option: opt,
		Caption: "Each policy twice, in its colour: full, GPU-milli of running jobs doing useful work; faint, GPU-milli allocated at all, also to " +
			"gangs still gathering their pods, jobs hung on a failure and rendezvous that never complete; both as % " +
			"of capacity, each point the time-average over its slice of the run. The gap between a policy's two " +
			"lines is capacity held for nothing."}, true
}

// waitChart plots the distribution of queueing delays as a CDF on a log
// axis with ticks at 1 s, 1 min, 1 h: waits span seconds to days. Jobs
// that never started count too, at infinity: each curve is a share of the
// jobs submitted, so a policy that started 105 of 300 jobs tops out at 35%
// instead of drawing above one that started them all, and its legend
// entry says how many never started.
func waitChart(c *comparison, styles map[string]seriesStyle) (chartSpec, bool) {
	top := 0.0
	for _, p := range c.Policies {
		for _, r := range p.Runs {
			for _, w := range r.Series.Waits {
				if finite(w) {
					top = max(top, w)
				}
			}
		}
	}
	xs := logGrid(top, cdfPoints)
	var series []ecSeries
	anyMissing := false
	for _, p := range c.Policies {
		var waits []float64
		missing := 0
		for _, r := range p.Runs {
			waits = append(waits, r.Series.Waits...)
			missing += neverStarted(r)
		}
		pts := cdf(waits, missing, xs)
		if len(pts) == 0 {
			continue
		}
		name := p.Name
		if missing > 0 {
			anyMissing = true
			name = fmt.Sprintf("%s (%s never started)", p.Name, plural(missing, "job"))
		}
		series = append(series, line(name, pts, styles[p.Name]))
	}
	if len(series) == 0 {
		return chartSpec{}, false
	}
	sub := "seed " + seedList(c.Seeds) + "; the 1 s point counts every wait up to 1 s"
	if len(c.Seeds) > 1 {
		sub = fmt.Sprintf("jobs of seeds %s pooled; the 1 s point counts every wait up to 1 s", seedList(c.Seeds))
	}
	var xmax any = "dataMax"
	if top < 60 {
		xmax = 60 // a log axis needs some width; one minute is the first round tick
	}
	x := ecAxis{Type: "log", LogBase: 60, Name: "wait (log scale)", Min: 1, Max: xmax,
		MinorTick: ecShow{true}, MinorSplit: ecShow{true}, AxisLabel: &ecAxisLabel{ShowMaxLabel: false}}
	opt := baseOption("Queueing delay distribution", sub, x,
		ecAxis{Type: "value", Name: "jobs submitted that started within, %", Min: 0, Max: 100})
	opt.Series = series
	caption := "Share of all submitted jobs that waited at most x; further left and higher is better."
	if anyMissing {
		caption += " A curve that ends below 100% has jobs that never started (they waited forever): " +
			"the gap at the right edge is their share, and the legend gives their number."
	}
	return chartSpec{ID: "chart-waits", XFormat: "duration", YFormat: "pct", Option: opt, Caption: caption}, true
}

// neverStarted is how many of a run's jobs never started, rejected ones
// included: to the user who submitted them they waited forever.
func neverStarted(r metrics.Result) int {
	return max(0, r.Summary.JobsSubmitted-r.Summary.JobsStarted)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
