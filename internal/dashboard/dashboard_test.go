package dashboard

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/corral-dev/corral/internal/kube"
)

// TestCommittedDashboardIsGenerated: the JSON in the tree is what the
// generator writes; edit internal/dashboard and run go run ./hack/dashboard.
func TestCommittedDashboardIsGenerated(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Files {
		got, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run go run ./hack/dashboard", f)
		}
	}
}

// recorder is a Registerer that remembers what was registered, so that the
// test can list every metric family, including vectors with no series yet
// (Gather shows only families with samples).
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// schedulerMetrics lists the metric names the scheduler registers, read
// from the registry kube.New fills, with the series names Prometheus derives
// from histograms and summaries (_bucket, _sum, _count).
func schedulerMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := &recorder{Registry: prometheus.NewRegistry()}
	if _, err := kube.New(fake.NewClientset(), dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		kube.Options{Registry: reg}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, c := range reg.collectors {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read the name of %s", d)
			}
			names[m[1]] = true
			switch c.(type) {
			case prometheus.Histogram, *prometheus.HistogramVec, prometheus.Summary, *prometheus.SummaryVec:
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					names[m[1]+suffix] = true
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("the scheduler registered no metrics")
	}
	return names
}

// exprs walks a dashboard's JSON for every "expr" (the Prometheus queries)
// and returns them with the panel titles they belong to.
func exprs(v any, title string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if t, ok := v["title"].(string); ok {
			title = t
		}
		if e, ok := v["expr"].(string); ok {
			out[e] = title
		}
		for _, c := range v {
			exprs(c, title, out)
		}
	case []any:
		for _, c := range v {
			exprs(c, title, out)
		}
	}
}

// A metric name in a query: corral's are prefixed, and no label, function
// or keyword of PromQL starts with "corral_".
var metricRef = regexp.MustCompile(`\bcorral_[a-zA-Z0-9_:]+`)

// TestDashboardQueriesNameRegisteredMetrics: every query reads at least one
// metric, and every metric it reads is one the scheduler registers.
func TestDashboardQueriesNameRegisteredMetrics(t *testing.T) {
	registered := schedulerMetrics(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", Files[0]))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	queries := map[string]string{}
	exprs(doc, "", queries)
	if len(queries) < 10 {
		t.Fatalf("only %d queries found", len(queries))
	}
	used := map[string]bool{}
	for q, panel := range queries {
		refs := metricRef.FindAllString(q, -1)
		if len(refs) == 0 {
			t.Errorf("panel %q: query %q reads no corral metric", panel, q)
		}
		for _, m := range refs {
			used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")] = true
			if !registered[m] {
				t.Errorf("panel %q: %s is not a metric the scheduler registers", panel, m)
			}
		}
	}
	// Operators need these on the dashboard (issue 18): fail if one goes.
	for _, m := range []string{"corral_job_wait_seconds", "corral_pending_jobs_by_reason", "corral_gpus",
		"corral_fragmented_gpus", "corral_evictions_total", "corral_cycle_duration_seconds", "corral_build_info"} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
	var unused []string
	for m := range registered {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")
		if base == m && strings.HasPrefix(m, "corral_") && !used[m] && !slices.Contains(unused, m) {
			unused = append(unused, m)
		}
	}
	sort.Strings(unused)
	t.Logf("registered corral metrics no panel shows: %v", unused)
}
