package report

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/corral-dev/corral/internal/metrics"
)

// chromium finds a Chromium or Chrome binary: $CORRAL_CHROMIUM, then the
// names Debian and others install it under.
func chromium() string {
	if p := os.Getenv("CORRAL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// chartCheck is what the page reports about one chart, measured by the
// browser after it drew.
type chartCheck struct {
	ID     string     `json:"id"`
	Width  float64    `json:"width"`
	Height float64    `json:"height"`
	Series []struct { // as ECharts holds them after setOption
		Name   string `json:"name"`
		Points int    `json:"points"`
	} `json:"series"`
	Title  []float64 `json:"title"`  // x, y, width, height in the chart
	Legend []float64 `json:"legend"` // the same
	// Inked is how many canvas pixels are neither white nor transparent
	// inside the plot area: a chart with axes but no curve has few.
	Inked int `json:"inked"`
}

// inspect runs in the page once the charts are drawn. It reads the title
// and legend boxes from ECharts' component views: ECharts lays them out
// itself, so only the drawn page knows whether they overlap.
const inspect = `(() => {
  const box = (inst, type) => {
    const views = inst._componentsViews || [];
    for (const v of views) {
      if (v.__model && v.__model.mainType === type) {
        const r = v.group.getBoundingRect().clone();
        if (v.group.transform) { r.applyTransform(v.group.transform); }
        return [r.x, r.y, r.width, r.height];
      }
    }
    return null;
  };
  return Array.from(document.querySelectorAll(".chart")).map(div => {
    const inst = echarts.getInstanceByDom(div);
    const opt = inst.getOption();
    const canvas = div.querySelector("canvas");
    const ctx = canvas.getContext("2d");
    const g = opt.grid[0];
    const dpr = canvas.width / div.clientWidth;
    const x0 = Math.round(g.left * dpr), y0 = Math.round(g.top * dpr);
    const w = Math.round((div.clientWidth - g.left - g.right) * dpr), h = Math.round((div.clientHeight - g.top - g.bottom) * dpr);
    const px = ctx.getImageData(x0, y0, w, h).data;
    let inked = 0;
    for (let i = 0; i < px.length; i += 4) {
      const r = px[i], gr = px[i+1], b = px[i+2], a = px[i+3];
      // Curves are coloured; grid lines and labels are grey.
      if (a > 0 && (Math.max(r, gr, b) - Math.min(r, gr, b)) > 40) { inked++; }
    }
    return {
      id: div.id, width: div.clientWidth, height: div.clientHeight,
      series: opt.series.map(s => ({ name: s.name, points: (s.data || []).length })),
      title: box(inst, "title"), legend: box(inst, "legend"), inked: inked,
    };
  });
})()`

// TestReportInBrowser opens generated reports in headless Chromium and
// checks what a reader sees: the page runs without script errors, every
// chart has a canvas of its size with coloured curves in its plot area,
// every series has points, and no legend covers its chart's title.
func TestReportInBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("no Chromium found (apt-get install -y chromium, or set CORRAL_CHROMIUM): the in-browser checks of the report did not run")
	}
	never := waitRun("spread", 300, 105, 10)
	never.Series.Utilization = pts(0, 10, 5, 40, 10, 35)
	never.Series.Allocated = pts(0, 60, 5, 99, 10, 99)
	never.Series.Pending = pts(0, 10, 5, 150, 10, 195)
	pages := map[string][]metrics.Result{
		"fgd, three policies, two seeds": {synthetic("corral", 42, "fgd", 1), synthetic("spread", 42, "fgd", 0.4),
			synthetic("binpack", 42, "fgd", 0.6), synthetic("corral", 43, "fgd", 0.95), synthetic("spread", 43, "fgd", 0.45),
			synthetic("binpack", 43, "fgd", 0.55)},
		"replay, a policy that left jobs waiting": {
			func() metrics.Result {
				r := waitRun("corral", 300, 300, 600)
				r.Series.Utilization = pts(0, 20, 5, 70, 10, 65)
				r.Series.Allocated = pts(0, 20, 5, 72, 10, 66)
				r.Series.Pending = pts(0, 3, 5, 40, 10, 0)
				r.Series.QueueGPUs = map[string][]metrics.Point{"team-a": pts(0, 10, 5, 40, 10, 20), "team-b": pts(0, 5, 5, 30, 10, 45)}
				r.Series.Domains = &metrics.DomainSeries{Level: "rack", Names: []string{"r0", "r1", "r2"},
					Hours: []float64{0, 5, 10}, Alloc: [][]float64{{10, 0, 50}, {90, 100, 20}, {40, 60, 80}}}
				return r
			}(), never},
	}
	dir := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin),
		chromedp.NoSandbox, chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	browser, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Run(browser); err != nil {
		t.Skipf("Chromium at %s does not start (%v): the in-browser checks of the report did not run", bin, err)
	}
	for name, results := range pages {
		t.Run(name, func(t *testing.T) {
			page := writeHTML(t, results)
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".html")
			if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := chromedp.NewContext(browser)
			defer cancel()
			ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
			defer cancelT()
			var mu sync.Mutex
			var errs []string
			chromedp.ListenTarget(ctx, func(ev any) {
				switch e := ev.(type) {
				case *runtime.EventExceptionThrown:
					mu.Lock()
					errs = append(errs, e.ExceptionDetails.Error())
					mu.Unlock()
				case *runtime.EventConsoleAPICalled:
					if e.Type == runtime.APITypeError {
						mu.Lock()
						errs = append(errs, "console.error")
						mu.Unlock()
					}
				}
			})
			var checks []chartCheck
			if err := chromedp.Run(ctx,
				chromedp.Navigate("file://"+file),
				chromedp.WaitVisible(".chart canvas", chromedp.ByQuery),
				chromedp.Evaluate(inspect, &checks),
			); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(errs) > 0 {
				t.Errorf("script errors: %v", errs)
			}
			want := len(chartData(t, page))
			if len(checks) != want || want == 0 {
				t.Fatalf("%d charts drawn, the page has %d", len(checks), want)
			}
			for _, c := range checks {
				if c.Width < 300 || c.Height < 300 {
					t.Errorf("%s: drawn %gx%g", c.ID, c.Width, c.Height)
				}
				for _, s := range c.Series {
					if s.Points == 0 {
						t.Errorf("%s: series %q has no points", c.ID, s.Name)
					}
				}
				if c.Inked < 500 {
					t.Errorf("%s: only %d coloured pixels in the plot area: no curve drawn", c.ID, c.Inked)
				}
				if len(c.Title) != 4 {
					t.Errorf("%s: no title drawn", c.ID)
					continue
				}
				if len(c.Legend) != 4 {
					if !strings.HasPrefix(c.ID, "chart-heat-") { // a heat map has a colour scale, not a legend
						t.Errorf("%s: no legend drawn", c.ID)
					}
					continue
				}
				if overlap(c.Title, c.Legend) {
					t.Errorf("%s: the legend %v covers the title %v", c.ID, c.Legend, c.Title)
				}
			}
		})
	}
}

// overlap reports whether two x, y, width, height boxes intersect.
func overlap(a, b []float64) bool {
	return a[0] < b[0]+b[2] && b[0] < a[0]+a[2] && a[1] < b[1]+b[3] && b[1] < a[1]+a[3]
}
