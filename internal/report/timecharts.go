package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/corral-dev/corral/internal/metrics"
)

// The charts of a replay over time beyond utilization: jobs waiting, each
// queue's GPUs, and a heat map of allocation per rack. Each is drawn only
// when some run recorded its series.

// pendingChart plots the jobs waiting to start over time, each policy's
// first seed: a policy whose queue never drains shows it here first.
func pendingChart(c *comparison, styles map[string]seriesStyle) (chartSpec, bool) {
	lo, hi, ok := span(c, func(r metrics.Result) []metrics.Point {
		if r.Seed != c.firstSeed(r.Policy) {
			return nil
		}
		return r.Series.Pending
	})
	if !ok {
		return chartSpec{}, false
	}
	step := gridStep(lo, hi)
	var series []ecSeries
	top := 0.0
	for _, p := range c.Policies {
		pts := p.Runs[0].Series.Pending
		if len(pts) == 0 {
			continue
		}
		avg := timeAverage(pts, step)
		for _, q := range avg {
			top = max(top, q.Y)
		}
		series = append(series, line(p.Name, avg, styles[p.Name]))
	}
	if len(series) == 0 {
		return chartSpec{}, false
	}
	opt := baseOption("Jobs waiting over time", firstSeedSubtitle(c),
		ecAxis{Type: "value", Name: "hours since the first arrival", Min: 0, Max: roundUp(hi)},
		ecAxis{Type: "value", Name: "jobs waiting to start", Min: 0, Max: roundUp(max(top, 1))})
	opt.Series = series
	return chartSpec{ID: "chart-pending", XFormat: "hours", YFormat: "count", Option: opt,
		Caption: "Jobs submitted and not yet started (a restarted job waits again); each point is the time-average over its slice. " +
			"Lower is better; a line that does not come back to 0 is a queue that never drained."}, true
}

// queueCharts plots, for each policy that ran with queues, the GPUs each
// leaf queue's started jobs held over time (the first seed): who got the
// cluster, and when.
func queueCharts(c *comparison, _ map[string]seriesStyle) []chartSpec {
	var out []chartSpec
	for _, p := range c.Policies {
		r := p.Runs[0]
		if len(r.Series.QueueGPUs) == 0 {
			continue
		}
		names := make([]string, 0, len(r.Series.QueueGPUs))
		lo, hi := math.Inf(1), math.Inf(-1)
		for q, pts := range r.Series.QueueGPUs {
			names = append(names, q)
			for _, pt := range pts {
				lo, hi = min(lo, pt.X), max(hi, pt.X)
			}
		}
		if !(lo <= hi) {
			continue
		}
		slices.Sort(names)
		step := gridStep(lo, hi)
		var series []ecSeries
		for i, q := range names {
			st := seriesStyle{Colour: otherColours[i%len(otherColours)], Width: 2, Dash: dashes[(i/len(otherColours))%len(dashes)], Z: 2}
			series = append(series, line(q, timeAverage(r.Series.QueueGPUs[q], step), st))
		}
		opt := baseOption("GPUs per queue over time: "+p.Name, fmt.Sprintf("seed %d", r.Seed),
			ecAxis{Type: "value", Name: "hours since the first arrival", Min: 0, Max: roundUp(hi)},
			ecAxis{Type: "value", Name: "GPUs held, % of capacity", Min: 0, Max: 100})
		opt.Series = series
		out = append(out, chartSpec{ID: "chart-queues-" + p.Name, XFormat: "hours", YFormat: "pct", Option: opt,
			Caption: "GPU-milli held by each leaf queue's started jobs, as % of the cluster; compare with each queue's guarantee and fair share."})
	}
	return out
}

// heatColumns is how many time slices a heat map has at most.
const heatColumns = 120

// heatCharts draw, for each policy's first seed, the GPU allocation of
// every domain of one topology level (racks) over time: a rack left idle
// while jobs wait, or filled one by one, shows at a glance.
func heatCharts(c *comparison, _ map[string]seriesStyle) []chartSpec {
	var out []chartSpec
	for _, p := range c.Policies {
		r := p.Runs[0]
		d := r.Series.Domains
		if d == nil || len(d.Hours) == 0 || len(d.Names) == 0 {
			continue
		}
		first, last := d.Hours[0], d.Hours[len(d.Hours)-1]
		step := niceStep((last - first) / heatColumns)
		var xs []string
		var data [][]float64
		for k := range d.Names {
			pts := make([]metrics.Point, 0, len(d.Hours))
			for t, h := range d.Hours {
				if k < len(d.Alloc[t]) {
					pts = append(pts, metrics.Point{X: h, Y: d.Alloc[t][k]})
				}
			}
			for i, pt := range timeAverage(pts, step) {
				if k == 0 {
					xs = append(xs, strconv.FormatFloat(round(pt.X), 'f', -1, 64))
				}
				if i < len(xs) {
					data = append(data, []float64{float64(i), float64(k), round(pt.Y)})
				}
			}
		}
		if len(data) == 0 {
			continue
		}
		opt := baseOption(fmt.Sprintf("GPU allocation per %s over time: %s", d.Level, p.Name),
			fmt.Sprintf("seed %d; white 0%% → pale blue 50%% → dark blue 100%% allocated", r.Seed),
			ecAxis{Type: "category", Name: "hours since the first arrival", Data: xs},
			ecAxis{Type: "category", Name: d.Level, Data: d.Names})
		opt.DataZoom = nil
		opt.Tooltip.Trigger = "item"
		opt.Grid.Left = 90
		// A scatter of square cells: the inlined ECharts "common" build has
		// neither the heatmap series nor visualMap, so the page script sizes
		// the squares to the grid and colours each by its value.
		opt.Series = []ecSeries{{Name: p.Name, Type: "scatter", Symbol: "rect", Data: data, Emphasis: ecEmphasis{Focus: "self"}}}
		out = append(out, chartSpec{ID: "chart-heat-" + p.Name, Kind: "heatmap", Option: opt,
			Caption: fmt.Sprintf("Each cell: the %% of one %s's GPUs held (or out of service) over a %s-hour slice, time-averaged. "+
				"Darker is fuller; a pale row while jobs wait is capacity left idle.", d.Level, strconv.FormatFloat(step, 'f', -1, 64))})
	}
	return out
}

func firstSeedSubtitle(c *comparison) string {
	seeds := map[int64]bool{}
	for _, p := range c.Policies {
		seeds[p.Runs[0].Seed] = true
	}
	if len(seeds) == 1 {
		for s := range seeds {
			return fmt.Sprintf("seed %d", s)
		}
	}
	return "first seed of each policy"
}
