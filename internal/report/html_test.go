package report

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/metrics"
)

var meta = Meta{
	Title:     "corral sim openb",
	Command:   "corral sim --protocol fgd --seeds 42-44",
	Machine:   "2 cores, linux/amd64",
	Generated: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
}

func writeHTML(t *testing.T, results []metrics.Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, results, meta); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// chartData returns the chart specs embedded in a page.
func chartData(t *testing.T, page string) []chartSpec {
	t.Helper()
	m := regexp.MustCompile(`var specs = (.*);\n`).FindStringSubmatch(page)
	if m == nil {
		return nil
	}
	var specs []chartSpec
	if err := json.Unmarshal([]byte(m[1]), &specs); err != nil {
		t.Fatalf("chart data: %v", err)
	}
	return specs
}

func TestWriteHTMLIsOffline(t *testing.T) {
	page := writeHTML(t, []metrics.Result{synthetic("corral", 42, "fgd", 1), synthetic("spread", 42, "fgd", 0.5)})
	if !strings.Contains(page, "<script>"+echartsJS+"</script>") {
		t.Error("page does not inline the ECharts library")
	}
	if !strings.Contains(page, "echarts.init(") {
		t.Error("page does not start its charts")
	}
	// Nothing is fetched: no element with a src or href, no CSS import.
	// The library is checked apart (TestEChartsAssetIsInlineSafe): its own
	// text builds such markup for its save-as-image and SVG features.
	own := strings.Replace(page, echartsJS, "", 1)
	for _, re := range []string{`(?i)<[a-z]+[^>]*\s(src|href)\s*=`, `(?i)@import`, `(?i)url\(`, `(?i)https?:`} {
		if loc := regexp.MustCompile(re).FindStringIndex(own); loc != nil {
			t.Errorf("page loads something (%s): %q", re, own[loc[0]:min(loc[1]+60, len(own))])
		}
	}
}

// TestEChartsAssetIsInlineSafe guards the vendored file: inlined in a
// <script> element, it must not end the element early or open an HTML
// comment, which would swallow the rest of the page.
func TestEChartsAssetIsInlineSafe(t *testing.T) {
	if len(echartsJS) < 100_000 {
		t.Fatalf("echarts asset is %d bytes; is it a Git LFS pointer?", len(echartsJS))
	}
	lower := strings.ToLower(echartsJS)
	for _, s := range []string{"</script", "<!--", "<script"} {
		if strings.Contains(lower, s) {
			t.Errorf("echarts asset contains %q", s)
		}
	}
}

func TestWriteHTMLCharts(t *testing.T) {
	full := synthetic("corral", 42, "fgd", 1)
	cases := map[string]struct {
		results []metrics.Result
		want    []string // chart ids
	}{
		"every series": {
			results: []metrics.Result{full},
			want:    []string{"chart-alloc", "chart-util", "chart-waits"},
		},
		"no series": {
			results: []metrics.Result{result("corral").Obj(), result("spread").Obj()},
		},
		"only waits, one policy": {
			results: []metrics.Result{result("corral").Waits(0, 5, 60).Obj(), result("spread").Obj()},
			want:    []string{"chart-waits"},
		},
		"empty curves beside full ones": {
			results: []metrics.Result{full, result("spread").Alloc().Util().Waits().Obj()},
			want:    []string{"chart-alloc", "chart-util", "chart-waits"},
		},
		"NaN points and figures": {
			results: []metrics.Result{result("corral").Alloc(pts(math.NaN(), 1, 50, 50, 60, 55)...).
				Util(pts(0, math.NaN(), 1, 10, 2, 10)...).Waits(math.NaN(), 5).
				Sum(func(s *metrics.Summary) { s.FragPct, s.DecisionMeanUS = math.NaN(), math.Inf(1) }).Obj()},
			want: []string{"chart-alloc", "chart-util", "chart-waits"},
		},
		"one-point curves": {
			results: []metrics.Result{result("corral").Alloc(pts(50, 50)...).Util(pts(0, 10)...).Waits(0).Obj()},
			want:    []string{"chart-alloc", "chart-util", "chart-waits"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			page := writeHTML(t, tc.results)
			var got []string
			for _, c := range chartData(t, page) {
				got = append(got, c.ID)
				if !strings.Contains(page, `<div class="chart" id="`+c.ID+`">`) {
					t.Errorf("no element for chart %s", c.ID)
				}
				for _, s := range c.Option.Series {
					if len(s.Data) > maxPoints {
						t.Errorf("chart %s series %s has %d points, want at most %d", c.ID, s.Name, len(s.Data), maxPoints)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("charts (-want +got):\n%s", diff)
			}
			if hasLib := strings.Contains(page, echartsJS); hasLib != (len(tc.want) > 0) {
				t.Errorf("library inlined = %v, want %v", hasLib, len(tc.want) > 0)
			}
			for _, p := range tc.results {
				if !strings.Contains(page, `<td class="name">`+p.Policy+`</td>`) {
					t.Errorf("table lacks policy %s", p.Policy)
				}
			}
		})
	}
}

func TestWriteHTMLHeaderAndTable(t *testing.T) {
	page := writeHTML(t, []metrics.Result{result("corral").Unalloc(1, 2, 3, 4).Obj(), result("binpack").Unalloc(2, 3, 4, 5).Obj()})
	for _, s := range []string{
		"<title>corral sim openb</title>",
		"<code>corral sim --protocol fgd --seeds 42-44</code>",
		"<dd>2 cores, linux/amd64</dd>",
		"<dd>2026-03-01 12:00:00 UTC</dd>",
		"cluster openb · trace default · protocol fgd · seed 42",
		`<th class="num">unalloc<br>@130% ↓</th>`,
		// The best cell is marked, not corral's row.
		`<tr><td class="name">corral</td><td class="num best">1.00<span class="mark" title="best in this column"> ★</span></td>`,
		`<tr><td class="name">binpack</td>`,
		"No run recorded a series to draw.",
	} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
}

// TestWriteHTMLEscapes feeds markup through every text the page shows.
func TestWriteHTMLEscapes(t *testing.T) {
	evil := `</script><img src=x onerror=alert(1)>`
	r := result(evil).Waits(1, 2).Obj()
	r.Cluster = evil
	var b bytes.Buffer
	if err := WriteHTML(&b, []metrics.Result{r}, Meta{Command: evil, Machine: evil}); err != nil {
		t.Fatal(err)
	}
	own := strings.Replace(b.String(), echartsJS, "[echarts]", 1)
	if strings.Contains(own, "<img") || strings.Count(own, "</script>") != 2 {
		t.Errorf("markup in the input reached the page unescaped:\n%s", own)
	}
}

// TestWriteHTMLSample writes a report of synthetic runs to the file named by
// $CORRAL_REPORT_SAMPLE, to look at in a browser.
func TestWriteHTMLSample(t *testing.T) {
	path := os.Getenv("CORRAL_REPORT_SAMPLE")
	if path == "" {
		t.Skip("set CORRAL_REPORT_SAMPLE=/tmp/r.html to write a sample report")
	}
	protocol := os.Getenv("CORRAL_REPORT_PROTOCOL")
	if protocol == "" {
		protocol = "fgd"
	}
	var results []metrics.Result
	for i, p := range []string{"corral", "spread", "binpack"} {
		for seed := int64(42); seed < 45; seed++ {
			results = append(results, synthetic(p, seed, protocol, 1-0.3*float64(i)))
		}
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, results, meta); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
