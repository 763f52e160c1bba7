package report

import _ "embed" // the chart library is compiled in so reports work offline

// echartsJS is Apache ECharts' "common" build (line, bar, pie, scatter charts;
// title, legend, tooltip, grid, dataZoom, markers), vendored from the npm
// package; assets/README.md says which version and how to update it. It is
// inlined in every HTML report that has a chart.
//
//go:embed assets/echarts.common.min.js
var echartsJS string

// echartsVersion is the vendored ECharts release, named in each report.
const echartsVersion = "6.1.0"
