package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// TestPoolHeldForItsClass: a closed pool (nodes labelled pool=prefill)
// stays free for its class on Kubernetes: ordinary pods wait rather than
// use it, and a pod of the class lands there.
func TestPoolHeldForItsClass(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	kit.AddRacks(t, c, 1, 3)
	ctx := context.Background()
	patch := []byte(`{"metadata":{"labels":{"pool":"prefill"}}}`)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, "r0-n2", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := kit.Namespace(t, c, "pools-")
	startCorralWith(t, c, kube.Options{Pools: []cycle.Pool{{Name: "prefill", Class: "prefill",
		NodeLabels: map[string]string{"pool": "prefill"}}}})
	create := func(name string, labels map[string]string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Spec: kit.GPUPodSpec(8)}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		create(fmt.Sprintf("batch-%d", i), map[string]string{"app": "batch"})
	}
	eventually(t, 30*time.Second, "two batch pods bound", func() (bool, string) {
		n := boundCount(podsOf(t, c, ns, "batch"))
		return n == 2, fmt.Sprintf("%d bound", n)
	})
	for _, p := range podsOf(t, c, ns, "batch") {
		if p.Spec.NodeName == "r0-n2" {
			t.Fatalf("batch pod %s on the pool's node", p.Name)
		}
	}
	create("prefill-0", map[string]string{"app": "prefill", v1alpha1.LabelClass: "prefill"})
	eventually(t, 30*time.Second, "the prefill pod on the pool's node", func() (bool, string) {
		ps := podsOf(t, c, ns, "prefill")
		if len(ps) != 1 {
			return false, fmt.Sprintf("%d pods", len(ps))
		}
		return ps[0].Spec.NodeName == "r0-n2", "on " + ps[0].Spec.NodeName
	})
	if n := boundCount(podsOf(t, c, ns, "batch")); n != 2 {
		t.Errorf("%d batch pods bound, want 2", n)
	}
}
