package report

import (
	"math"

	"github.com/corral-dev/corral/internal/metrics"
)

// chartSpec is one chart as the page script receives it: an ECharts option
// (https://echarts.apache.org/en/option.html) plus the names of the
// formatters the script attaches to its axes and tooltip, which JSON
// cannot carry as functions.
type chartSpec struct {
	ID      string      `json:"id"`
	Kind    string      `json:"kind,omitempty"` // "heatmap": item tooltips, category axes
	XFormat string      `json:"xFormat"`        // pct | hours | duration | count | "" (category)
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
	// Data names the categories of a category axis (a heat map's).
	Data       []string `json:"data,omitempty"`
	MinorTick  ecShow   `json:"minorTick"`
	MinorSplit ecShow   `json:"minorSplitLine"`
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
	Name       string      `json:"name"`
	Type       string      `json:"type"`
	Data       [][]float64 `json:"data"` // [x, y], or [x, y, value] in a heat map
	ShowSymbol bool        `json:"showSymbol"`
	Symbol     string      `json:"symbol,omitempty"` // a heat map's cells: "rect"
	Z          int         `json:"z"`
	LineStyle  ecLineStyle `json:"lineStyle"`
	ItemStyle  ecItemStyle `json:"itemStyle"`
	Emphasis   ecEmphasis  `json:"emphasis"`
}

type ecLineStyle struct {
	Color   string  `json:"color"`
	Width   float64 `json:"width"`
	Type    string  `json:"type"` // solid | dashed
	Opacity float64 `json:"opacity,omitempty"`
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
	data := make([][]float64, len(pts))
	for i, p := range pts {
		data[i] = []float64{round(p.X), round(p.Y)}
	}
	return ecSeries{
		Name: name, Type: "line", Data: data, Z: st.Z,
		ShowSymbol: len(data) <= sparse,
		LineStyle:  ecLineStyle{Color: st.Colour, Width: st.Width, Type: st.Dash, Opacity: st.Opacity},
		ItemStyle:  ecItemStyle{Color: st.Colour},
		Emphasis:   ecEmphasis{Focus: "series"},
	}
}

// round keeps three decimals, or four significant figures for values under
// 1. Points reach it finite: the series builders drop the others.
func round(v float64) float64 {
	if v == 0 || !finite(v) {
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
