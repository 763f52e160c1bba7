package report

import (
	"fmt"
	"math"

	"github.com/corral-dev/corral/internal/metrics"
)

// chartSpec is one chart as the page script receives it: an ECharts option
// (https://echarts.apache.org/en/option.html) plus the names of the
// formatters the script attaches to its axes and tooltip, which JSON
// cannot carry as functions.
type chartSpec struct {
	ID      string      `json:"id"`
	XFormat string      `json:"xFormat"` // pct | hours | duration
	YFormat string      `json:"yFormat"`
	Option  chartOption `json:"option"`
	Caption string      `json:"-"` // rendered under the chart by the page
}

// chartOption is the subset of the ECharts option this report uses; every
// component it names is in the echarts.common build we inline.
type chartOption struct {
	Animation bool       `json:"animation"` // off: a report is read, not watched
	Title     ecTitle    `json:"title"`
	Tooltip   ecTrigger  `json:"tooltip"`
	Legend    ecLegend   `json:"legend"`
	Grid      ecGrid     `json:"grid"`
	XAxis     ecAxis     `json:"xAxis"`
	YAxis     ecAxis     `json:"yAxis"`
	DataZoom  []ecZoom   `json:"dataZoom"`
	Series    []ecSeries `json:"series"`
}

type ecTitle struct {
	Text    string `json:"text"`
	Subtext string `json:"subtext,omitempty"`
}

type ecTrigger struct {
	Trigger string `json:"trigger"`
}

type ecLegend struct {
	Top  int    `json:"top"`
	Left string `json:"left"`
}

type ecGrid struct {
	Top    int `json:"top"`
	Bottom int `json:"bottom"`
	Left   int `json:"left"`
	Right  int `json:"right"`
}

type ecAxis struct {
	Type         string `json:"type"` // value | log
	LogBase      int    `json:"logBase,omitempty"`
	Name         string `json:"name"`
	NameLocation string `json:"nameLocation"`
	NameGap      int    `json:"nameGap"`
	Min          any    `json:"min,omitempty"` // a number, or "dataMin"
	Max          any    `json:"max,omitempty"` // a number, or "dataMax"
	Scale        bool   `json:"scale"`         // unfixed ends need not include 0
	MinorTick    ecShow `json:"minorTick"`
	MinorSplit   ecShow `json:"minorSplitLine"`
	// AxisLabel is completed by the page script, which adds the formatter.
	AxisLabel *ecAxisLabel `json:"axisLabel,omitempty"`
}

type ecAxisLabel struct {
	ShowMaxLabel bool `json:"showMaxLabel"` // false: no odd label where data ends
}

type ecShow struct {
	Show bool `json:"show"`
}

// ecZoom zooms the x axis. With filterMode "filter" the y axis fits the
// points in view; "none" keeps it fixed.
type ecZoom struct {
	Type       string `json:"type"` // inside | slider
	XAxisIndex int    `json:"xAxisIndex"`
	FilterMode string `json:"filterMode"`
	StartValue any    `json:"startValue,omitempty"`
	Bottom     int    `json:"bottom,omitempty"`
	Height     int    `json:"height,omitempty"`
}

type ecSeries struct {
	Name       string       `json:"name"`
	Type       string       `json:"type"`
	Data       [][2]float64 `json:"data"`
	ShowSymbol bool         `json:"showSymbol"`
	Z          int          `json:"z"`
	LineStyle  ecLineStyle  `json:"lineStyle"`
	ItemStyle  ecItemStyle  `json:"itemStyle"`
	Emphasis   ecEmphasis   `json:"emphasis"`
}

type ecLineStyle struct {
	Color string  `json:"color"`
	Width float64 `json:"width"`
	Type  string  `json:"type"` // solid | dashed
}

type ecItemStyle struct {
	Color string `json:"color"`
}

type ecEmphasis struct {
	Focus string `json:"focus"`
}

// baseOption is what the three charts share: a legend under the title, room
// for axis names, wheel and slider zoom on x (the slider under the axis name).
func baseOption(title, subtitle string, x, y ecAxis) chartOption {
	x.NameLocation, x.NameGap = "middle", 30
	y.NameLocation, y.NameGap = "middle", 45
	return chartOption{
		Title:    ecTitle{Text: title, Subtext: subtitle},
		Tooltip:  ecTrigger{Trigger: "axis"},
		Legend:   ecLegend{Top: 48, Left: "center"},
		Grid:     ecGrid{Top: 90, Bottom: 95, Left: 60, Right: 40},
		XAxis:    x,
		YAxis:    y,
		DataZoom: []ecZoom{{Type: "inside", FilterMode: "none"}, {Type: "slider", FilterMode: "none", Bottom: 8, Height: 22}},
	}
}

// sparse is how few points a curve has when its points are marked: a
// one-point curve is otherwise invisible.
const sparse = 30

// line makes a policy's curve, rounded to what a chart can show so the
// page stays small.
func line(name string, pts []metrics.Point, st seriesStyle) ecSeries {
	data := make([][2]float64, len(pts))
	for i, p := range pts {
		data[i] = [2]float64{round(p.X), round(p.Y)}
	}
	return ecSeries{
		Name: name, Type: "line", Data: data, Z: st.Z,
		ShowSymbol: len(data) <= sparse,
		LineStyle:  ecLineStyle{Color: st.Colour, Width: st.Width, Type: st.Dash},
		ItemStyle:  ecItemStyle{Color: st.Colour},
		Emphasis:   ecEmphasis{Focus: "series"},
	}
}

// round keeps three decimals, or four significant figures for values under 1.
func round(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	scale := math.Pow(10, max(3, 3-math.Floor(math.Log10(math.Abs(v)))))
	return math.Round(v*scale) / scale
}

// roundUp rounds an axis end up to a round number, so the last tick has one.
func roundUp(v float64) float64 {
	if v <= 0 {
		return 1
	}
	step := niceStep(v / 10)
	return step * math.Ceil(v/step-1e-9)
}

// span is the x range of one series over all runs that have it.
func span(c *comparison, series func(r metrics.Result) []metrics.Point) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range c.Policies {
		for _, r := range p.Runs {
			for _, pt := range series(r) {
				lo, hi = min(lo, pt.X), max(hi, pt.X)
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
		allocChart, utilChart, waitChart,
	} {
		if ch, ok := build(c, styles); ok {
			charts = append(charts, ch)
		}
	}
	return charts
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

// utilChart plots GPU utilization over time for each policy's first seed:
// averaging over seeds would blur the bursts it is there to show.
func utilChart(c *comparison, styles map[string]seriesStyle) (chartSpec, bool) {
	lo, hi, ok := span(c, func(r metrics.Result) []metrics.Point {
		if r.Seed != c.firstSeed(r.Policy) {
			return nil
		}
		return r.Series.Utilization
	})
	if !ok {
		return chartSpec{}, false
	}
	step := gridStep(lo, hi)
	var series []ecSeries
	seeds := map[int64]bool{}
	for _, p := range c.Policies {
		r := p.Runs[0]
		if len(r.Series.Utilization) == 0 {
			continue
		}
		seeds[r.Seed] = true
		series = append(series, line(p.Name, timeAverage(r.Series.Utilization, step), styles[p.Name]))
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
	opt := baseOption("GPU utilization over time", sub,
		ecAxis{Type: "value", Name: "hours since the first arrival", Min: 0, Max: roundUp(hi)},
		ecAxis{Type: "value", Name: "GPU allocated, %", Min: 0, Max: 100})
	opt.Series = series
	return chartSpec{ID: "chart-util", XFormat: "hours", YFormat: "pct", Option: opt,
		Caption: "GPU-milli allocated as % of capacity; each point is the time-average over its slice of the run."}, true
}

// waitChart plots the distribution of queueing delays as a CDF on a log
// axis with ticks at 1 s, 1 min, 1 h: waits span seconds to days.
func waitChart(c *comparison, styles map[string]seriesStyle) (chartSpec, bool) {
	top := 0.0
	for _, p := range c.Policies {
		for _, r := range p.Runs {
			for _, w := range r.Series.Waits {
				top = max(top, w)
			}
		}
	}
	xs := logGrid(top, cdfPoints)
	var series []ecSeries
	for _, p := range c.Policies {
		var waits []float64
		for _, r := range p.Runs {
			waits = append(waits, r.Series.Waits...)
		}
		pts := cdf(waits, xs)
		if len(pts) == 0 {
			continue
		}
		series = append(series, line(p.Name, pts, styles[p.Name]))
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
		ecAxis{Type: "value", Name: "jobs started within, %", Min: 0, Max: 100})
	opt.Series = series
	return chartSpec{ID: "chart-waits", XFormat: "duration", YFormat: "pct", Option: opt,
		Caption: "Share of started jobs that waited at most x; further left and higher is better."}, true
}
