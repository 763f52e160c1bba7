package report

import (
	"strings"
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
		const useful = ", doing useful work"
		co, sp, bp := byName["corral"+useful], byName["spread"+useful], byName["binpack"+useful]
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

// TestUtilChartShowsUsefulAndAllocated: each policy draws GPUs doing useful
// work and GPUs allocated, two series in its colour and dash, the allocated
// one faint, each with its own values: a baseline that holds 99% of the
// GPUs while 1% do useful work shows both figures.
func TestUtilChartShowsUsefulAndAllocated(t *testing.T) {
	corral := result("corral").Protocol("replay").Util(pts(0, 40, 5, 60, 10, 60)...).Obj()
	corral.Series.Allocated = pts(0, 45, 5, 62, 10, 62)
	kube := result("kube").Protocol("replay").Util(pts(0, 1, 10, 1)...).Obj()
	kube.Series.Allocated = pts(0, 99, 10, 99)
	page := writeHTML(t, []metrics.Result{corral, kube})
	for _, c := range chartData(t, page) {
		if c.ID != "chart-util" {
			continue
		}
		byName := map[string]ecSeries{}
		for _, s := range c.Option.Series {
			byName[s.Name] = s
		}
		if len(byName) != 4 {
			t.Fatalf("series %v: want useful and allocated for each of two policies", names(c.Option.Series))
		}
		for _, p := range []struct {
			policy            string
			useful, allocated float64
		}{{"corral", 60, 62}, {"kube", 1, 99}} {
			u, a := byName[p.policy+", doing useful work"], byName[p.policy+", allocated"]
			if lastY(u) != p.useful || lastY(a) != p.allocated {
				t.Errorf("%s: useful ends at %v, allocated at %v; want %v and %v", p.policy, lastY(u), lastY(a), p.useful, p.allocated)
			}
			if u.LineStyle.Color != a.LineStyle.Color || u.LineStyle.Type != a.LineStyle.Type {
				t.Errorf("%s: useful %+v, allocated %+v: want one colour and dash", p.policy, u.LineStyle, a.LineStyle)
			}
			if !(a.LineStyle.Opacity > 0 && a.LineStyle.Opacity < 1) || a.LineStyle.Width >= u.LineStyle.Width {
				t.Errorf("%s: allocated %+v: want it fainter and thinner than useful %+v", p.policy, a.LineStyle, u.LineStyle)
			}
		}
		if !strings.Contains(c.Option.Title.Text, "doing useful work vs GPUs allocated") {
			t.Errorf("title %q", c.Option.Title.Text)
		}
		return
	}
	t.Fatal("no utilization chart")
}

func names(ss []ecSeries) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func lastY(s ecSeries) float64 {
	if len(s.Data) == 0 {
		return -1
	}
	return s.Data[len(s.Data)-1][1]
}
