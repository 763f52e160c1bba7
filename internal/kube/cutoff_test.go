package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// cacheWith is a Cache whose informer stores hold objs and a one-level
// Topology (rack, label corral.dev/rack); the informers never run.
func cacheWith(t *testing.T, objs ...runtime.Object) *Cache {
	t.Helper()
	client := fake.NewClientset()
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "corral.dev/v1alpha1",
		APIResources: []metav1.APIResource{{Name: v1alpha1.TopologyPlural, Kind: "Topology"}}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{topologyGVR: "TopologyList"})
	c, err := NewCache(client, dyn, testCfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.topologies == nil {
		t.Fatal("the fake discovery does not serve Topology")
	}
	topo := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "corral.dev/v1alpha1", "kind": "Topology",
		"metadata": map[string]any{"name": "default"},
		"spec":     map[string]any{"levels": []any{map[string]any{"name": "rack", "nodeLabel": "corral.dev/rack"}}}}}
	must(t, c.topologies.GetStore().Add(topo))
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Node:
			must(t, c.nodes.GetStore().Add(o))
		case *corev1.Pod:
			must(t, c.pods.GetStore().Add(o))
		}
	}
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func rackNode(name, rack string, gpus int64) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"corral.dev/rack": rack, v1alpha1.LabelGPUModel: "H100"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
				"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// TestCutOffGangJoinsItsPeers: the missing member of a gang cut off
// mid-bind is placed in the rack its bound peers share, even where a node
// of another rack fits it better on its own. Nothing is remembered: the
// engine reads the peers from the snapshot, as a restarted scheduler would.
func TestCutOffGangJoinsItsPeers(t *testing.T) {
	member := func(name string) *podB {
		return pod(name).gpus(8).ann(v1alpha1.AnnotationGang, "g")
	}
	nodes := []runtime.Object{
		rackNode("a-0", "a", 8), rackNode("a-1", "a", 8), rackNode("a-2", "a", 16), rackNode("b-0", "b", 8),
		// Other work holds 4 GPUs of a-2 and all of a-0 and a-1: b-0 is
		// the tighter fit for one 8-GPU pod on its own.
		pod("other").gpus(4).ann(v1alpha1.AnnotationAssignedGPUs, "gpu0,gpu1,gpu2,gpu3").boundTo("a-2").obj(),
	}
	place := func(job workload.JobID, objs ...runtime.Object) string {
		c := cacheWith(t, append(append([]runtime.Object{}, nodes...), objs...)...)
		w, err := c.buildWorld(time.Unix(2000, 0))
		must(t, err)
		plan := engine.New(engine.Config{Policy: engine.Corral}).Cycle(w.snap)
		for _, gb := range plan.Binds {
			if gb.Job == job && len(gb.Pods) == 1 {
				return gb.Pods[0].Node
			}
		}
		t.Fatalf("%s: the waiting pod was not placed: %+v", job, plan.Pending)
		return ""
	}
	alone := place("pod/ns/solo", pod("a0").gpus(8).boundTo("a-0").obj(), pod("a1").gpus(8).boundTo("a-1").obj(),
		pod("solo").gpus(8).obj())
	if alone != "b-0" {
		t.Fatalf("the scenario needs b-0 to be the better fit on its own; the engine chose %s", alone)
	}
	got := place("gang/ns/g", member("g-0").boundTo("a-0").obj(), member("g-1").boundTo("a-1").obj(), member("g-2").obj())
	if got != "a-2" {
		t.Errorf("cut-off gang's missing member placed on %s, want a-2 beside its peers in rack a", got)
	}
}
