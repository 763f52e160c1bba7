package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/metrics"
)

// Meta is what the HTML report says about its own making, so a reader can
// repeat the run: DESIGN.md asks every benchmark to state the machine, the
// command and the seeds (the seeds come from the results).
type Meta struct {
	Title     string    // empty: "corral sim: <cluster> / <trace> (<protocol>)"
	Command   string    // the command line that produced the results
	Machine   string    // e.g. CPU model, cores, OS
	Version   string    // the corral release that ran it (internal/version)
	Generated time.Time // zero: not shown
}

// WriteHTML writes one self-contained HTML page: a header from meta, the
// comparison table of Table, and charts of allocation vs arrivals,
// utilization over time and the wait distribution, each drawn only when
// some run recorded its series. The page loads nothing: the chart library
// (Apache ECharts) and the data are inlined, so it opens offline; with no
// chart to draw the library is left out. Curves hold at most 2,000 points.
// It fails on an empty input or on results of different inputs.
func WriteHTML(w io.Writer, results []metrics.Result, meta Meta) error {
	c, err := compare(results)
	if err != nil {
		return err
	}
	if meta.Title == "" {
		meta.Title = fmt.Sprintf("corral sim: %s / %s (%s)", c.Cluster, c.Trace, c.Protocol)
	}
	charts := buildCharts(c)
	data, err := json.Marshal(charts) // escapes <, > and & so the data cannot close its <script>
	if err != nil {
		return fmt.Errorf("report: encoding charts: %w", err)
	}
	p := page{Meta: meta, Grid: buildGrid(c), Charts: charts, EChartsVersion: echartsVersion}
	if !meta.Generated.IsZero() {
		p.Generated = meta.Generated.Format("2006-01-02 15:04:05 MST")
	}
	if len(charts) > 0 {
		p.EChartsJS = template.JS(echartsJS) // trusted: vendored, checked by TestEChartsAssetIsInlineSafe
		p.ChartsJSON = template.JS(data)
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p); err != nil {
		return fmt.Errorf("report: rendering HTML: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("report: writing HTML: %w", err)
	}
	return nil
}

// page is the template's data.
type page struct {
	Meta           Meta
	Generated      string
	Grid           grid
	Charts         []chartSpec
	EChartsVersion string
	EChartsJS      template.JS
	ChartsJSON     template.JS
}

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"lines": func(s string) []string { return strings.Split(s, "\n") },
	"cell":  func(c string) string { t, _ := splitBest(c); return t },
	"best":  func(c string) bool { _, b := splitBest(c); return b },
}).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Meta.Title}}</title>
<style>
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; margin: 0; }
main { max-width: 1150px; margin: 0 auto; padding: 1.5em 1.5em 3em; }
h1 { font-size: 1.6em; margin: 0 0 .4em; }
h2 { font-size: 1.25em; margin: 1.6em 0 .4em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
h3 { font-size: 1.05em; margin: 1.2em 0 .3em; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: .15em 1em; margin: 0; }
dl.meta dt { color: #666; }
dl.meta dd { margin: 0; }
code { font: .92em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f4f4f4; padding: .1em .3em; border-radius: 3px; word-break: break-all; }
.caption { color: #444; margin: .3em 0 .6em; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: .3em 0 .8em; }
th, td { padding: .3em .7em; border-bottom: 1px solid #e3e3e3; }
th { font-weight: 600; vertical-align: bottom; background: #fafafa; }
td.num, th.num { text-align: right; white-space: nowrap; }
th.name, td.name { text-align: left; }
td.best { font-weight: 700; background: #eef6ee; }
td.best .mark { color: #2e7d32; }
.notes { color: #555; font-size: .9em; margin: 0; padding-left: 1.2em; }
figure { margin: 1.5em 0; }
.chart { width: 100%; height: 460px; }
figcaption { color: #555; font-size: .9em; margin-top: .2em; }
footer { color: #777; font-size: .85em; margin-top: 3em; }
</style>
</head>
<body>
<main>
<header>
<h1>{{.Meta.Title}}</h1>
<dl class="meta">
{{- if .Meta.Command}}
<dt>command</dt><dd><code>{{.Meta.Command}}</code></dd>
{{- end}}
{{- if .Meta.Machine}}
<dt>machine</dt><dd>{{.Meta.Machine}}</dd>
{{- end}}
{{- if .Meta.Version}}
<dt>corral</dt><dd>{{.Meta.Version}}</dd>
{{- end}}
{{- if .Generated}}
<dt>generated</dt><dd>{{.Generated}}</dd>
{{- end}}
</dl>
</header>

<h2>Comparison</h2>
<p class="caption">{{.Grid.Caption}}</p>
{{- range .Grid.Sections}}
{{- if .Title}}
<h3>{{.Title}}</h3>
{{- end}}
<table>
<thead><tr>
{{- range $i, $h := .Header}}<th class="{{if $i}}num{{else}}name{{end}}">{{range $j, $l := lines $h}}{{if $j}}<br>{{end}}{{$l}}{{end}}</th>{{end -}}
</tr></thead>
<tbody>
{{- range $row := .Rows}}
<tr>
{{- range $i, $v := $row}}<td class="{{if $i}}num{{else}}name{{end}}{{if best $v}} best{{end}}">{{cell $v}}{{if best $v}}<span class="mark" title="best in this column"> ★</span>{{end}}</td>{{end -}}
</tr>
{{- end}}
</tbody>
</table>
{{- end}}
{{- if .Grid.Notes}}
<ul class="notes">
{{- range .Grid.Notes}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}

<h2>Charts</h2>
{{- if .Charts}}
<noscript><p>The charts need JavaScript.</p></noscript>
{{- range .Charts}}
<figure>
<div class="chart" id="{{.ID}}"></div>
<figcaption>{{.Caption}}</figcaption>
</figure>
{{- end}}
{{- else}}
<p>No run recorded a series to draw.</p>
{{- end}}

<footer>
Written by corral's report package.
{{- if .Charts}} Charts drawn with Apache ECharts {{.EChartsVersion}} (Apache License 2.0), inlined in this file.{{end}}
</footer>
</main>
{{- if .Charts}}
<script>{{.EChartsJS}}</script>
<script>
"use strict";
(function () {
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  // Mirrors humanDuration in internal/report/format.go.
  function duration(s) {
    if (!(s >= 0)) { return "–"; }
    if (s === 0) { return "0s"; }
    if (s < 0.05) { return "<0.1s"; }
    if (s < 9.95 && s !== Math.trunc(s)) { return s.toFixed(1) + "s"; }
    s = Math.round(s);
    if (s < 60) { return s + "s"; }
    if (s < 3600) { return Math.floor(s / 60) + "m" + pad(s % 60) + "s"; }
    var m = Math.floor((s + 30) / 60);
    if (m < 1440) { return Math.floor(m / 60) + "h" + pad(m % 60) + "m"; }
    var h = Math.floor((m + 30) / 60);
    return Math.floor(h / 24) + "d" + pad(h % 24) + "h";
  }
  var axisFormat = {
    count: function (v) { return String(v); },
    pct: function (v) { return v + "%"; },
    hours: function (v) { return v + " h"; },
    // Ticks fall on round units: "1m", not "1m00s".
    duration: function (v) { return duration(v).replace(/^(\d+[mhd])00[smh]$/, "$1"); }
  };
  var tipFormat = {
    count: function (v) { return v.toFixed(1); },
    pct: function (v) { return v.toFixed(1) + "%"; },
    hours: function (v) { return v.toFixed(2) + " h"; },
    duration: duration
  };
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }
  var specs = {{.ChartsJSON}};
  specs.forEach(function (spec) {
    var o = spec.option;
    if (spec.kind === "heatmap") {
      // Category axes, one value per cell: ECharts' own item tooltip.
      o.tooltip.formatter = function (it) {
        return esc(o.yAxis.data[it.value[1]]) + ", " + esc(o.xAxis.data[it.value[0]]) + " h: <b>" + it.value[2].toFixed(1) + "%</b>";
      };
      var heat = echarts.init(document.getElementById(spec.id), null, { renderer: "canvas" });
      // Cells fill the grid: one column per time slice, one row per domain.
      var size = function () {
        return [Math.max(1, (heat.getWidth() - o.grid.left - o.grid.right) / o.xAxis.data.length),
                Math.max(1, (heat.getHeight() - o.grid.top - o.grid.bottom) / o.yAxis.data.length)];
      };
      // White at 0%, pale blue at 50%, dark blue at 100%: fuller is darker.
      var stops = [[247, 251, 255], [107, 174, 214], [8, 48, 107]];
      var colour = function (v) {
        var t = Math.max(0, Math.min(100, v)) / 50, i = Math.min(1, Math.floor(t)), f = t - i;
        var a = stops[i], b = stops[i + 1];
        return "rgb(" + [0, 1, 2].map(function (k) { return Math.round(a[k] + (b[k] - a[k]) * f); }).join(",") + ")";
      };
      o.series[0].data = o.series[0].data.map(function (v) { return { value: v, itemStyle: { color: colour(v[2]) } }; });
      o.series[0].symbolSize = size();
      o.legend = { show: false }; // one series: the colours are the scale, said in the subtitle
      heat.setOption(o);
      window.addEventListener("resize", function () {
        heat.resize();
        heat.setOption({ series: [{ symbolSize: size() }] });
      });
      return;
    }
    var fx = tipFormat[spec.xFormat], fy = tipFormat[spec.yFormat];
    o.xAxis.axisLabel = Object.assign(o.xAxis.axisLabel || {}, { formatter: axisFormat[spec.xFormat] });
    o.yAxis.axisLabel = Object.assign(o.yAxis.axisLabel || {}, { formatter: axisFormat[spec.yFormat] });
    o.tooltip.formatter = function (items) {
      if (!items.length) { return ""; }
      var out = [esc(fx(items[0].value[0]))];
      items.forEach(function (it) {
        out.push(it.marker + esc(it.seriesName) + ": <b>" + esc(fy(it.value[1])) + "</b>");
      });
      return out.join("<br>");
    };
    var chart = echarts.init(document.getElementById(spec.id), null, { renderer: "canvas" });
    chart.setOption(o);
    window.addEventListener("resize", function () { chart.resize(); });
  });
})();
</script>
{{- end}}
</body>
</html>
`
