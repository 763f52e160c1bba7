package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

var podGroupGVR = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1alpha2", Resource: "podgroups"}

// TestUpstreamPodGroup: pods naming an upstream PodGroup (v1alpha2, as 1.36
// serves it) form one gang with its minCount and topology key, and the
// PodGroup's PodGroupScheduled condition follows.
func TestUpstreamPodGroup(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	kit.AddRacks(t, c, 2, 2)
	ns := kit.Namespace(t, c, "pg-")
	ctx := context.Background()
	mkGroup := func(name string, min int) {
		pg := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{
				"schedulingPolicy":      map[string]any{"gang": map[string]any{"minCount": int64(min)}},
				"schedulingConstraints": map[string]any{"topology": []any{map[string]any{"key": "corral.dev/rack"}}},
			},
		}}
		if _, err := c.Dynamic.Resource(podGroupGVR).Namespace(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating PodGroup: %v", err)
		}
	}
	mkPod := func(group string, i, gpus int) {
		spec := kit.GPUPodSpec(gpus)
		g := group
		spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &g}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", group, i), Namespace: ns,
			Labels: map[string]string{"app": group}}, Spec: spec}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// fits: two 8-GPU pods in one rack. too-wide: three, with a rack of two nodes.
	mkGroup("fits", 2)
	mkPod("fits", 0, 8)
	mkPod("fits", 1, 8)
	mkGroup("too-wide", 3)
	for i := 0; i < 3; i++ {
		mkPod("too-wide", i, 8)
	}
	startCorral(t, c)

	condition := func(name string) (string, string) {
		u, err := c.Dynamic.Resource(podGroupGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, raw := range conds {
			m := raw.(map[string]any)
			if m["type"] == "PodGroupScheduled" {
				return fmt.Sprint(m["status"]), fmt.Sprint(m["message"])
			}
		}
		return "", "no condition"
	}
	eventually(t, 60*time.Second, "the fitting group bound in one rack, condition True", func() (bool, string) {
		pods := podsOf(t, c, ns, "fits")
		if boundCount(pods) != 2 {
			return false, fmt.Sprintf("%d bound", boundCount(pods))
		}
		if pods[0].Spec.NodeName[:2] != pods[1].Spec.NodeName[:2] {
			t.Fatalf("group spans racks: %s, %s", pods[0].Spec.NodeName, pods[1].Spec.NodeName)
		}
		st, msg := condition("fits")
		return st == "True", st + " " + msg
	})
	eventually(t, 60*time.Second, "the group wider than a rack waits, condition False with the reason", func() (bool, string) {
		if n := boundCount(podsOf(t, c, ns, "too-wide")); n != 0 {
			t.Fatalf("%d pods of a 3-node group bound on 2-node racks", n)
		}
		st, msg := condition("too-wide")
		return st == "False" && msg != "", st + " " + msg
	})
}
