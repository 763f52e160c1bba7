package report

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/metrics"
)

func twoSeeds() []metrics.Result {
	return []metrics.Result{
		result("corral").Seed(43).Unalloc(1, 2, 3, 6).Sum(func(s *metrics.Summary) {
			s.JobsCompleted, s.FragPct, s.PartialGangs, s.WaitP95S = 13, 2, 1, 100
			s.MinDomainShare = map[string]float64{"rack": 1}
		}).Obj(),
		result("spread").Seed(42).Unalloc(2, 4, 6, 8).Obj(),
		result("corral").Seed(42).Unalloc(1, 2, 3, 4).Sum(func(s *metrics.Summary) {
			s.JobsCompleted, s.FragPct, s.PartialGangs, s.WaitP95S = 12, 1, 0, 50
			s.MinDomainShare = map[string]float64{"rack": 0.5, "spine": 1}
		}).Obj(),
	}
}

func decode(t *testing.T, results []metrics.Result) map[string]any {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJSON(&b, results); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, b.String())
	}
	return doc
}

func keys(m any) []string {
	var out []string
	for k := range m.(map[string]any) {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestWriteJSONKeys(t *testing.T) {
	doc := decode(t, twoSeeds())
	if diff := cmp.Diff([]string{"cluster", "policies", "protocol", "seeds", "trace"}, keys(doc)); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"corral", "spread"}, keys(doc["policies"])); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
	corral := doc["policies"].(map[string]any)["corral"].(map[string]any)
	mean := corral["mean"].(map[string]any)
	run := corral["runs"].([]any)[0].(map[string]any)
	for _, k := range []string{"unallocated_gpu_pct", "gpu_alloc_pct", "frag_pct", "partial_gangs", "wait_p95_s",
		"min_domain_share", "unallocated_at", "utilization_pct", "decision_mean_us"} {
		if _, ok := mean[k]; !ok {
			t.Errorf("mean lacks %q", k)
		}
		if _, ok := run[k]; !ok {
			t.Errorf("run lacks %q", k)
		}
	}
	// The mean has exactly the keys a run has, but the seed.
	if diff := cmp.Diff(slices.DeleteFunc(keys(run), func(k string) bool { return k == "seed" }), keys(mean)); diff != "" {
		t.Errorf("mean keys vs run keys (-run +mean):\n%s", diff)
	}
}

func TestWriteJSONMeans(t *testing.T) {
	doc := decode(t, twoSeeds())
	corral := doc["policies"].(map[string]any)["corral"].(map[string]any)
	mean := corral["mean"].(map[string]any)
	want := map[string]any{
		"jobs_completed":      12.5,
		"frag_pct":            1.5,
		"partial_gangs":       0.5,
		"wait_p95_s":          75.0,
		"unallocated_gpu_pct": 5.0,
		"unallocated_at":      map[string]any{"100": 1.0, "110": 2.0, "120": 3.0, "130": 5.0},
		// Per key, over the runs that have it.
		"min_domain_share": map[string]any{"rack": 0.75, "spine": 1.0},
	}
	got := map[string]any{}
	for k := range want {
		got[k] = mean[k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("corral means (-want +got):\n%s", diff)
	}
	var seeds []float64
	for _, r := range corral["runs"].([]any) {
		seeds = append(seeds, r.(map[string]any)["seed"].(float64))
	}
	if diff := cmp.Diff([]float64{42, 43}, seeds); diff != "" {
		t.Errorf("runs in seed order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{42.0, 43.0}, doc["seeds"]); diff != "" {
		t.Errorf("seeds (-want +got):\n%s", diff)
	}
}

// TestWriteJSONRoundTrip reads the runs back into metrics.Summary: each run
// carries its whole summary.
func TestWriteJSONRoundTrip(t *testing.T) {
	in := []metrics.Result{synthetic("corral", 42, "replay", 1), synthetic("corral", 43, "replay", 1)}
	var b bytes.Buffer
	if err := WriteJSON(&b, in); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cluster, Trace, Protocol string
		Policies                 map[string]struct {
			Runs []struct {
				Seed int64 `json:"seed"`
				metrics.Summary
			}
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	runs := doc.Policies["corral"].Runs
	if len(runs) != 2 {
		t.Fatalf("got %d runs, want 2", len(runs))
	}
	for i, r := range runs {
		if r.Seed != in[i].Seed {
			t.Errorf("run %d: seed %d, want %d", i, r.Seed, in[i].Seed)
		}
		if diff := cmp.Diff(in[i].Summary, r.Summary); diff != "" {
			t.Errorf("run %d summary (-want +got):\n%s", i, diff)
		}
	}
	if doc.Cluster != "openb" || doc.Trace != "default" || doc.Protocol != "replay" {
		t.Errorf("input = %s/%s/%s, want openb/default/replay", doc.Cluster, doc.Trace, doc.Protocol)
	}
}

func TestWriteJSONIsRepeatable(t *testing.T) {
	in := twoSeeds()
	var a, b bytes.Buffer
	if err := WriteJSON(&a, in); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(in)
	if err := WriteJSON(&b, in); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("input order changed the output:\n%s\n---\n%s", a.String(), b.String())
	}
}

func TestWriteJSONRejectsNaN(t *testing.T) {
	in := []metrics.Result{result("corral").Sum(func(s *metrics.Summary) { s.FragPct = math.NaN() }).Obj()}
	err := WriteJSON(&bytes.Buffer{}, in)
	if err == nil || !strings.Contains(err.Error(), "corral") {
		t.Errorf("error %v, want one naming the policy", err)
	}
}

// TestDocsListEverySummaryKey keeps docs/report.md in step with
// metrics.Summary: each JSON key must appear there in backquotes.
func TestDocsListEverySummaryKey(t *testing.T) {
	doc, err := os.ReadFile("../../docs/report.md")
	if err != nil {
		t.Fatal(err)
	}
	s := metrics.Summary{UnallocatedAt: map[string]float64{"100": 1}, FragAt: map[string]float64{"100": 1}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys(m) {
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/report.md does not describe summary key %q", k)
		}
	}
}
