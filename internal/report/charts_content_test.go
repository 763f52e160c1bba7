package report

import (
	"testing"

	"github.com/corral-dev/corral/internal/metrics"
)

// waitRun is a replay run of submitted jobs of which the first `started`
// started, each after waiting `wait` seconds.
func waitRun(policy string, submitted, started int, wait float64) metrics.Result {
	w := make([]float64, started)
	for i := range w {
		w[i] = wait
	}
	return result(policy).Protocol("replay").Waits(w...).Sum(func(s *metrics.Summary) {
		s.JobsSubmitted, s.JobsStarted = submitted, started
	}).Obj()
}

// TestWaitChartCountsNeverStarted reads the chart from the generated page:
// the case, a baseline that started 105 of 300 jobs, quickly, must
// not draw above corral, which started all 300 more slowly.
func TestWaitChartCountsNeverStarted(t *testing.T) {
	page := writeHTML(t, []metrics.Result{waitRun("corral", 300, 300, 600), waitRun("spread", 300, 105, 10)})
	var waits *chartSpec
	for _, c := range chartData(t, page) {
		if c.ID == "chart-waits" {
			waits = &c
		}
	}
	if waits == nil {
		t.Fatal("no wait chart")
	}
	last := map[string]float64{}
	for _, s := range waits.Option.Series {
		last[s.Name] = s.Data[len(s.Data)-1][1]
	}
	if got := last["corral"]; got != 100 {
		t.Errorf("corral ends at %.1f%%, want 100%%", got)
	}
	if got, ok := last["spread (195 jobs never started)"]; !ok || got != 35 {
		t.Errorf("spread: %v (series %v), want the legend to count 195 never started and the curve to end at 35%%", got, last)
	}
}

// TestIdenticalLinesStayVisible: two policies with the same curve differ in
// pattern, and the thinner one is drawn over the wider one.
func TestIdenticalLinesStayVisible(t *testing.T) {
	util := pts(0, 10, 1, 50, 2, 80)
	page := writeHTML(t, []metrics.Result{
		result("corral").Protocol("replay").Util(util...).Obj(),
		result("spread").Protocol("replay").Util(util...).Obj(),
		result("binpack").Protocol("replay").Util(util...).Obj(),
	})
	for _, c := range chartData(t, page) {
		if c.ID != "chart-util" {
			continue
		}
		byName := map[string]ecSeries{}
		for _, s := range c.Option.Series {
			byName[s.Name] = s
		}
		co, sp, bp := byName["corral"], byName["spread"], byName["binpack"]
		if sp.LineStyle.Type == co.LineStyle.Type || bp.LineStyle.Type == sp.LineStyle.Type {
			t.Errorf("patterns corral %q, spread %q, binpack %q: want each different", co.LineStyle.Type, sp.LineStyle.Type, bp.LineStyle.Type)
		}
		if !(sp.Z > co.Z && sp.LineStyle.Width < co.LineStyle.Width) {
			t.Errorf("spread z %d width %.1f over corral z %d width %.1f: want the thinner line on top", sp.Z, sp.LineStyle.Width, co.Z, co.LineStyle.Width)
		}
		return
	}
	t.Fatal("no utilization chart")
}

// TestTimeCharts reads the pending, queue and heat-map charts from the
// generated page: one queue chart and one heat map per policy that
// recorded them, a heat-map cell per rack and time slice, values kept.
func TestTimeCharts(t *testing.T) {
	r := result("corral").Protocol("replay").Util(pts(0, 10, 10, 50)...).Obj()
	r.Series.Pending = pts(0, 4, 5, 9, 10, 0)
	r.Series.QueueGPUs = map[string][]metrics.Point{"team-b": pts(0, 5, 10, 5), "team-a": pts(0, 20, 10, 40)}
	r.Series.Domains = &metrics.DomainSeries{Level: "rack", Names: []string{"r0", "r1"},
		Hours: []float64{0, 10}, Alloc: [][]float64{{100, 0}, {100, 0}}}
	page := writeHTML(t, []metrics.Result{r, result("spread").Protocol("replay").Util(pts(0, 10, 10, 50)...).Obj()})
	byID := map[string]chartSpec{}
	for _, c := range chartData(t, page) {
		byID[c.ID] = c
	}
	for _, id := range []string{"chart-util", "chart-pending", "chart-queues-corral", "chart-heat-corral"} {
		if _, ok := byID[id]; !ok {
			t.Errorf("no %s among %v", id, byID)
		}
	}
	if _, ok := byID["chart-heat-spread"]; ok {
		t.Error("a heat map for spread, which recorded no domains")
	}
	if q := byID["chart-queues-corral"].Option.Series; len(q) != 2 || q[0].Name != "team-a" {
		t.Errorf("queue series %+v: want team-a then team-b", q)
	}
	heat := byID["chart-heat-corral"]
	if heat.Kind != "heatmap" || len(heat.Option.YAxis.Data) != 2 || len(heat.Option.Series) != 1 {
		t.Fatalf("heat map %+v", heat.Option)
	}
	cols := len(heat.Option.XAxis.Data)
	if cells := heat.Option.Series[0].Data; len(cells) != 2*cols || cols == 0 {
		t.Fatalf("%d cells for 2 racks × %d slices", len(cells), cols)
	}
	for _, cell := range heat.Option.Series[0].Data {
		if want := []float64{100, 0}[int(cell[1])]; cell[2] != want {
			t.Errorf("cell %v: want %.0f%% (rack r%d)", cell, want, int(cell[1]))
		}
	}
}
