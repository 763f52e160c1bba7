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
