// Package charttest lints and renders the Helm chart in charts/corral with
// Helm's own Go module, as `helm lint` and `helm template` do.
//
// It is a module of its own (make chart-test runs it) because Helm v4.3.1
// builds on k8s.io v0.37 while corral pins v0.36 to match the 1.36 test
// control plane, and because compiling Helm and its dependencies would
// add minutes to every `go test ./...` of the main module.
package charttest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	rel "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "../corral"
	repo     = "../.."
)

// TestLint: helm lint --strict passes with the default values and with
// every optional part switched on.
func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"defaults": nil,
		"everything on": {
			"metrics":   map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
			"image":     map[string]any{"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
			"dashboard": map[string]any{"enabled": true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := action.NewLint()
			l.Strict = true
			l.Namespace = "corral-system"
			res := l.Run([]string{chartDir}, vals)
			for _, m := range res.Messages {
				t.Logf("lint: %s", m)
			}
			if len(res.Errors) > 0 {
				t.Errorf("helm lint --strict: %v", res.Errors)
			}
		})
	}
}

// render is helm template: the release's manifests, split into objects.
func render(t *testing.T, vals map[string]any) []map[string]any {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: common.DefaultCapabilities,
	}
	inst := action.NewInstall(cfg)
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = "corral"
	inst.Namespace = "corral-system"
	inst.IncludeCRDs = true
	inst.Replace = true
	// The control plane corral is tested against (Helm's default, 1.20,
	// is below the chart's kubeVersion).
	kv, err := common.ParseKubeVersion("v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	inst.KubeVersion = kv
	r, err := inst.Run(ch, vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	release, ok := r.(*rel.Release)
	if !ok {
		t.Fatalf("release of type %T", r)
	}
	var objs []map[string]any
	for _, doc := range strings.Split(release.Manifest, "\n---") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

func find(objs []map[string]any, kind, name string) map[string]any {
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] == kind && md["name"] == name {
			return o
		}
	}
	return nil
}

func dig(o map[string]any, path ...any) any {
	var v any = o
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[p]
		case int:
			s, _ := v.([]any)
			if p >= len(s) {
				return nil
			}
			v = s[p]
		}
	}
	return v
}

// TestTemplate: what the chart installs, with the default values.
func TestTemplate(t *testing.T) {
	objs := render(t, nil)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o["kind"].(string)+"/"+dig(o, "metadata", "name").(string))
	}
	slices.Sort(kinds)
	want := []string{
		"ClusterRole/corral-scheduler", "ClusterRoleBinding/corral-scheduler",
		"ConfigMap/corral-config", "ConfigMap/corral-dashboard",
		"CustomResourceDefinition/corralqueues.corral.dev", "CustomResourceDefinition/corraltopologies.corral.dev",
		"Deployment/corral-scheduler", "Role/corral-leader-election", "Role/corral-runtime-history",
		"RoleBinding/corral-leader-election", "RoleBinding/corral-runtime-history",
		"Service/corral-metrics", "ServiceAccount/corral-scheduler",
	}
	if !slices.Equal(want, kinds) {
		t.Errorf("objects:\n got %v\nwant %v", kinds, want)
	}

	dep := find(objs, "Deployment", "corral-scheduler")
	if img := dig(dep, "spec", "template", "spec", "containers", 0, "image"); img != "ghcr.io/corral-dev/corral:v0.1.0" {
		t.Errorf("image = %v, want the release's ghcr.io/corral-dev/corral:<appVersion>", img)
	}
	if got := dig(dep, "spec", "template", "spec", "serviceAccountName"); got != "corral-scheduler" {
		t.Errorf("serviceAccountName = %v", got)
	}

	// The configuration is a SchedulerConfiguration with the release's
	// namespace for the Lease.
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(dig(find(objs, "ConfigMap", "corral-config"), "data", "config.yaml").(string)), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["kind"] != "SchedulerConfiguration" || cfg["apiVersion"] != "corral.dev/v1alpha1" ||
		dig(cfg, "leaderElection", "namespace") != "corral-system" || cfg["schedulerName"] != "corral" {
		t.Errorf("config.yaml = %v", cfg)
	}

	// The dashboard is the generated one.
	want2, err := os.ReadFile(filepath.Join(repo, "deploy", "dashboards", "corral.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := dig(find(objs, "ConfigMap", "corral-dashboard"), "data", "corral.json"); got != strings.TrimRight(string(want2), "\n") {
		t.Errorf("dashboard ConfigMap differs from deploy/dashboards/corral.json")
	}
	if got := dig(find(objs, "ConfigMap", "corral-dashboard"), "metadata", "labels", "grafana_dashboard"); got != "1" {
		t.Errorf("dashboard label grafana_dashboard = %v, want 1 (Grafana's sidecar)", got)
	}
}

// TestTemplateOptions: the ServiceMonitor, a digest and turning parts off.
func TestTemplateOptions(t *testing.T) {
	objs := render(t, map[string]any{
		"metrics":   map[string]any{"service": map[string]any{"enabled": true}, "serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}}},
		"image":     map[string]any{"digest": "sha256:abc"},
		"dashboard": map[string]any{"enabled": false},
		"config":    map[string]any{"schedulerName": "gpu-batch", "leaderElection": map[string]any{"leaseName": "gpu-batch"}},
	})
	sm := find(objs, "ServiceMonitor", "corral-scheduler")
	if sm == nil || dig(sm, "metadata", "labels", "release") != "prom" || dig(sm, "spec", "endpoints", 0, "port") != "metrics" {
		t.Errorf("ServiceMonitor = %v", sm)
	}
	if find(objs, "ConfigMap", "corral-dashboard") != nil {
		t.Error("dashboard ConfigMap rendered with dashboard.enabled=false")
	}
	dep := find(objs, "Deployment", "corral-scheduler")
	if img := dig(dep, "spec", "template", "spec", "containers", 0, "image"); img != "ghcr.io/corral-dev/corral@sha256:abc" {
		t.Errorf("image = %v", img)
	}
	role := find(objs, "Role", "corral-leader-election")
	if got := dig(role, "rules", 1, "resourceNames", 0); got != "gpu-batch" {
		t.Errorf("Lease Role names %v, want the configured lease gpu-batch", got)
	}
	if got := dig(find(render(t, nil), "Role", "corral-runtime-history"), "rules", 1, "resourceNames", 0); got != "corral-runtime-history" {
		t.Errorf("runtime history Role names %v, want corral-runtime-history", got)
	}
	named := render(t, map[string]any{"config": map[string]any{"runtimeHistory": "gpu-batch-runtimes"}})
	if got := dig(find(named, "Role", "corral-runtime-history"), "rules", 1, "resourceNames", 0); got != "gpu-batch-runtimes" {
		t.Errorf("runtime history Role names %v, want the configured gpu-batch-runtimes", got)
	}
	off := render(t, map[string]any{"config": map[string]any{"runtimeHistory": "0"}})
	if find(off, "Role", "corral-runtime-history") != nil || find(off, "RoleBinding", "corral-runtime-history") != nil {
		t.Error("runtime history Role rendered with runtimeHistory: \"0\"")
	}
}

// TestChartMatchesDeploy: the chart installs the same CRDs and grants the
// same permissions as deploy/ (kubectl apply -k), so the two stay one
// product.
func TestChartMatchesDeploy(t *testing.T) {
	crds, err := filepath.Glob(filepath.Join(repo, "deploy", "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in deploy/crds: %v", err)
	}
	for _, f := range crds {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(f)))
		if err != nil || !bytes.Equal(want, got) {
			t.Errorf("charts/corral/crds/%s differs from deploy/crds (make chart-crds copies them): %v", filepath.Base(f), err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(repo, "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var deployRules any
	for _, doc := range strings.Split(string(raw), "\n---") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err == nil && o["kind"] == "ClusterRole" {
			deployRules = o["rules"]
		}
	}
	chartRules := find(render(t, nil), "ClusterRole", "corral-scheduler")["rules"]
	a, _ := yaml.Marshal(deployRules)
	b, _ := yaml.Marshal(chartRules)
	if deployRules == nil || !bytes.Equal(a, b) {
		t.Errorf("ClusterRole rules differ:\ndeploy/rbac.yaml:\n%s\nchart:\n%s", a, b)
	}
}
