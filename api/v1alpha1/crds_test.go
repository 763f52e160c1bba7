package v1alpha1

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestTopologyCRD(t *testing.T) {
	raw, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal(raw, &crd.Object); err != nil {
		t.Fatal(err)
	}
	str := func(path ...string) string {
		s, _, _ := unstructured.NestedString(crd.Object, path...)
		return s
	}
	if got := crd.GetAPIVersion() + " " + crd.GetKind(); got != "apiextensions.k8s.io/v1 CustomResourceDefinition" {
		t.Errorf("kind = %s", got)
	}
	checks := map[string]string{
		"metadata.name":     TopologyPlural + ".corral.dev",
		"spec.group":        GroupName,
		"spec.scope":        "Cluster",
		"spec.names.kind":   "Topology",
		"spec.names.plural": TopologyPlural,
	}
	for path, want := range checks {
		if got := str(strings.Split(path, ".")...); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	short, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
	if !slices.Contains(short, "topo") {
		t.Errorf("shortNames = %v, want topo", short)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("%d versions, want 1", len(versions))
	}
	v := versions[0].(map[string]any)
	if v["name"] != GroupVersion.Version || v["served"] != true || v["storage"] != true {
		t.Errorf("version %v %v %v, want v1alpha1 served and stored", v["name"], v["served"], v["storage"])
	}
	if _, ok, _ := unstructured.NestedMap(v, "subresources", "status"); !ok {
		t.Error("no status subresource")
	}
	cols, _, _ := unstructured.NestedSlice(v, "additionalPrinterColumns")
	var names []string
	for _, c := range cols {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	if diff := cmp.Diff([]string{"Accepted", "Reason", "Nodes", "Age"}, names); diff != "" {
		t.Errorf("printer columns (-want +got):\n%s", diff)
	}

	// The CEL rules and schema bounds that Topology.Validate mirrors.
	levels, _, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "levels")
	rules := func(schema map[string]any) []string {
		vs, _, _ := unstructured.NestedSlice(schema, "x-kubernetes-validations")
		var out []string
		for _, r := range vs {
			out = append(out, r.(map[string]any)["rule"].(string))
		}
		return out
	}
	if diff := cmp.Diff([]string{
		"self.all(l, self.exists_one(m, m.name == l.name))",
		"self.all(l, self.exists_one(m, m.nodeLabel == l.nodeLabel))",
	}, rules(levels)); diff != "" {
		t.Errorf("spec.levels rules (-want +got):\n%s", diff)
	}
	if levels["minItems"] != int64(1) && levels["minItems"] != float64(1) {
		t.Errorf("spec.levels minItems = %v, want 1", levels["minItems"])
	}
	if levels["maxItems"] != int64(MaxTopologyLevels) && levels["maxItems"] != float64(MaxTopologyLevels) {
		t.Errorf("spec.levels maxItems = %v, want %d", levels["maxItems"], MaxTopologyLevels)
	}
	name, _, _ := unstructured.NestedMap(levels, "items", "properties", "name")
	if diff := cmp.Diff([]string{"self != 'cluster' && self != 'host'"}, rules(name)); diff != "" {
		t.Errorf("level name rules (-want +got):\n%s", diff)
	}
	if name["pattern"] != "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" {
		t.Errorf("level name pattern = %v, want a DNS label", name["pattern"])
	}
	label, _, _ := unstructured.NestedMap(levels, "items", "properties", "nodeLabel")
	if diff := cmp.Diff([]string{"!format.qualifiedName().validate(self).hasValue()"}, rules(label)); diff != "" {
		t.Errorf("nodeLabel rules (-want +got):\n%s", diff)
	}
}

// TestQueueCRD pins the Queue CRD's shape and the CEL rules that check one
// object (the rules across objects are the scheduler's: see docs/queues.md).
func TestQueueCRD(t *testing.T) {
	raw, err := os.ReadFile(deployDir + "/crds/corral.dev_corralqueues.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal(raw, &crd.Object); err != nil {
		t.Fatal(err)
	}
	if scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope"); scope != "Cluster" {
		t.Errorf("scope = %q, want Cluster", scope)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	v := versions[0].(map[string]any)
	if _, ok, _ := unstructured.NestedMap(v, "subresources", "status"); !ok {
		t.Error("no status subresource")
	}
	rules := func(path ...string) []string {
		vs, _, _ := unstructured.NestedSlice(v, append([]string{"schema", "openAPIV3Schema"}, append(path, "x-kubernetes-validations")...)...)
		var out []string
		for _, r := range vs {
			out = append(out, r.(map[string]any)["rule"].(string))
		}
		return out
	}
	spec := []string{"properties", "spec"}
	item := append(append([]string(nil), spec...), "properties", "resources", "items")
	checks := map[string]struct {
		path []string
		want []string
	}{
		"root":       {nil, []string{"self.metadata.name != 'root'", "!has(self.spec.parent) || self.spec.parent != self.metadata.name"}},
		"spec":       {spec, []string{"!has(self.defaultForNamespaces) || !has(self.namespaces) || self.defaultForNamespaces.all(n, n in self.namespaces)"}},
		"resource":   {item, []string{"!has(self.limit) || !has(self.guaranteed) || quantity(string(self.limit)).compareTo(quantity(string(self.guaranteed))) >= 0"}},
		"weight":     {append(append([]string(nil), item...), "properties", "weight"), []string{"quantity(string(self)).isGreaterThan(quantity('0'))"}},
		"guaranteed": {append(append([]string(nil), item...), "properties", "guaranteed"), []string{"!quantity(string(self)).isLessThan(quantity('0'))"}},
	}
	for name, c := range checks {
		if diff := cmp.Diff(c.want, rules(c.path...)); diff != "" {
			t.Errorf("%s rules (-want +got):\n%s", name, diff)
		}
	}
	docs := readDocs(t, examplesDir)
	team := find[*Queue](t, docs, "team-b")
	if team.Spec.Parent != "research" || team.Spec.ReclaimPolicy != ReclaimPreempt {
		t.Errorf("examples/queues.yaml team-b: %+v", team.Spec)
	}
}

// TestCRDNamesDoNotClash keeps corral's resource words apart from those of
// Kueue and Volcano (docs/api.md#names-beside-kueue-and-volcano): kubectl
// resolves a bare word to whichever group it discovers first.
func TestCRDNamesDoNotClash(t *testing.T) {
	// Plurals, singulars and short names of Kueue v0.17 (ClusterQueue,
	// LocalQueue, Topology, ResourceFlavor, Workload, Cohort) and Volcano
	// v1.16 (Queue, PodGroup, Job, HyperNode).
	taken := []string{
		"clusterqueues", "clusterqueue", "cq", "localqueues", "localqueue", "queue", "queues", "lq",
		"topologies", "topology", "resourceflavors", "resourceflavor", "flavor", "flavors", "rf",
		"workloads", "workload", "kwl", "kueueworkload", "kueueworkloads", "cohorts", "cohort",
		"q", "queue-v1beta1", "podgroups", "podgroup", "pg", "podgroup-v1beta1", "jobs", "job", "vcjob", "vj",
		"hypernodes", "hypernode", "hn",
	}
	cases := map[string]struct {
		file string
		want []string // plural, singular, short names
	}{
		"Queue":    {file: "corral.dev_corralqueues.yaml", want: []string{QueuePlural, "corralqueue", "cqu"}},
		"Topology": {file: "corral.dev_corraltopologies.yaml", want: []string{TopologyPlural, "corraltopology", "topo"}},
	}
	for kind, tc := range cases {
		t.Run(kind, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(deployDir, "crds", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var crd unstructured.Unstructured
			if err := yaml.Unmarshal(raw, &crd.Object); err != nil {
				t.Fatal(err)
			}
			plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
			singular, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "singular")
			short, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
			got := append([]string{plural, singular}, short...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			for _, w := range got {
				if slices.Contains(taken, w) {
					t.Errorf("%q is taken by Kueue or Volcano", w)
				}
			}
			if cats, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "categories"); !slices.Contains(cats, "corral") {
				t.Errorf("categories = %v, want corral", cats)
			}
		})
	}
}

// TestQueuePrinterColumns: kubectl get shows what the scheduler writes in
// the status, so each column's path must name a status field that exists.
func TestQueuePrinterColumns(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "crds", "corral.dev_corralqueues.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal(raw, &crd.Object); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	cols, _, _ := unstructured.NestedSlice(versions[0].(map[string]any), "additionalPrinterColumns")
	var got []string
	for _, c := range cols {
		m := c.(map[string]any)
		prio, _ := m["priority"].(int64)
		if f, ok := m["priority"].(float64); ok {
			prio = int64(f)
		}
		got = append(got, fmt.Sprintf("%s %s %d", m["name"], m["jsonPath"], prio))
	}
	want := []string{
		"Parent .spec.parent 0",
		`Accepted .status.conditions[?(@.type=="Accepted")].status 0`,
		`GPUs .status.allocated.nvidia\.com/gpu 0`,
		`Fair Share .status.fairShare.nvidia\.com/gpu 0`,
		`Pending .status.pending.nvidia\.com/gpu 0`,
		`Borrowed .status.borrowed.nvidia\.com/gpu 1`,
		"CPU .status.allocated.cpu 1",
		"Reclaim .spec.reclaimPolicy 1",
		`Reason .status.conditions[?(@.type=="Accepted")].reason 1`,
		"Age .metadata.creationTimestamp 0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("printer columns (-want +got):\n%s", diff)
	}
	// The status fields the columns read are the Go type's JSON names.
	for _, f := range []string{"allocated", "fairShare", "pending", "borrowed"} {
		if _, ok := reflectJSONField(QueueStatus{}, f); !ok {
			t.Errorf("QueueStatus has no field %q", f)
		}
	}
}

func reflectJSONField(v any, name string) (reflect.StructField, bool) {
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		f := rt.Field(i)
		if strings.Split(f.Tag.Get("json"), ",")[0] == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
