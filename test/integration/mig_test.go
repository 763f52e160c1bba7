package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// migPod asks for one instance of a MIG profile (device plugin, mixed
// strategy).
func migPod(ns, name, profile string) *corev1.Pod {
	spec := kit.GPUPodSpec(0)
	spec.Containers[0].Resources.Limits = corev1.ResourceList{
		corev1.ResourceName(v1alpha1.ResourceMIGPrefix + profile): resource.MustParse("1")}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
}

// migResources turns a GPU id -> layout map into the node's advertised
// instance counts.
func migResources(layouts map[string]string) corev1.ResourceList {
	counts := map[string]int64{}
	for _, l := range layouts {
		for _, in := range strings.Split(l, ",") {
			if p, _, ok := strings.Cut(strings.TrimSpace(in), "@"); ok {
				counts[p]++
			}
		}
	}
	out := corev1.ResourceList{}
	for p, n := range counts {
		out[corev1.ResourceName(v1alpha1.ResourceMIGPrefix+p)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}

func TestMIGExtendedResources(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	a100 := map[string]string{"gpu0": "3g.40gb@0,3g.40gb@4",
		"gpu1": "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"}
	h100 := map[string]string{"gpu0": "7g.80gb@0"}
	layoutJSON := func(m map[string]string) string { b, _ := json.Marshal(m); return string(b) }
	nodes := []framework.NodeSpec{
		{Name: "a100", Labels: map[string]string{v1alpha1.LabelGFDProduct: "NVIDIA-A100-SXM4-80GB"},
			Annotations: map[string]string{v1alpha1.AnnotationMIGLayout: layoutJSON(a100)}, Extra: migResources(a100)},
		{Name: "h100", Labels: map[string]string{v1alpha1.LabelGFDProduct: "NVIDIA-H100-80GB-HBM3"},
			Annotations: map[string]string{v1alpha1.AnnotationMIGLayout: layoutJSON(h100)}, Extra: migResources(h100)},
		{Name: "plain", GPUs: 8, Labels: map[string]string{v1alpha1.LabelGPUModel: "H100", v1alpha1.LabelGFDMemory: "81920"}},
	}
	for _, spec := range nodes {
		if _, err := c.AddGPUNode(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	for _, spec := range nodes {
		if err := c.WaitNodeReady(ctx, spec.Name); err != nil {
			t.Fatal(err)
		}
	}
	ns := kit.Namespace(t, c, "mig-")
	startCorral(t, c)

	create := func(p *corev1.Pod) {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(migPod(ns, "small", "1g.10gb"))
	create(migPod(ns, "big", "7g.80gb"))
	create(migPod(ns, "forty-gb-profile", "3g.20gb")) // an A100 40GB profile: no GPU here offers it
	fine := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "whole", Namespace: ns}, Spec: kit.GPUPodSpec(2)}
	create(fine)

	get := func(name string) *corev1.Pod {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	wantBound := map[string]struct{ node, mig string }{
		"small": {"a100", "gpu1:1g.10gb@0"}, "big": {"h100", "gpu0:7g.80gb@0"}, "whole": {"plain", ""},
	}
	eventually(t, time.Minute, "MIG pods bound to their instances, the bad one told why", func() (bool, string) {
		for name, w := range wantBound {
			p := get(name)
			if p.Spec.NodeName != w.node || p.Annotations[v1alpha1.AnnotationAssignedMIG] != w.mig {
				return false, fmt.Sprintf("%s on %q with %q", name, p.Spec.NodeName, p.Annotations[v1alpha1.AnnotationAssignedMIG])
			}
		}
		p := get("forty-gb-profile")
		if p.Spec.NodeName != "" {
			t.Fatalf("the pod asking an unsupported profile was bound to %s", p.Spec.NodeName)
		}
		reason, msg := scheduledCondition(p)
		want := "no MIG GPU in the cluster offers MIG profile 3g.20gb (profiles offered: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)"
		return reason == "Unschedulable" && strings.Contains(msg, want), fmt.Sprintf("forty-gb-profile: %s %q", reason, msg)
	})

	// No 4g instance exists; the A100's gpu0 is idle, so corral asks its MIG
	// manager to re-partition it and the pod waits for the new layout.
	create(migPod(ns, "four", "4g.40gb"))
	var wanted map[string]string
	eventually(t, time.Minute, "a re-partition of a100/gpu0 recorded, the pod waiting for it", func() (bool, string) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "a100", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		raw := n.Annotations[v1alpha1.AnnotationMIGLayoutWanted]
		if err := json.Unmarshal([]byte(raw), &wanted); err != nil || !strings.Contains(wanted["gpu0"], "4g.40gb@0") || len(wanted) != 1 {
			return false, fmt.Sprintf("wanted layouts %q", raw)
		}
		p := get("four")
		_, msg := scheduledCondition(p)
		if p.Spec.NodeName != "" {
			t.Fatalf("four was bound to %s before its instance existed", p.Spec.NodeName)
		}
		return strings.Contains(msg, "waiting for MIG re-partition of a100/gpu0"), fmt.Sprintf("four: %q", msg)
	})

	// The MIG manager applies the layout and the node reports it.
	a100["gpu0"] = wanted["gpu0"]
	// kwok renews the node's status as we write it: on a conflict, read it
	// again and write both parts again (each write is idempotent).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "a100", metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Annotations[v1alpha1.AnnotationMIGLayout] = layoutJSON(a100)
		if n, err = c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		for name := range n.Status.Allocatable {
			if strings.HasPrefix(string(name), v1alpha1.ResourceMIGPrefix) {
				delete(n.Status.Allocatable, name)
				delete(n.Status.Capacity, name)
			}
		}
		for name, q := range migResources(a100) {
			n.Status.Allocatable[name], n.Status.Capacity[name] = q, q
		}
		_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "four bound to the new 4g instance", func() (bool, string) {
		p := get("four")
		return p.Spec.NodeName == "a100" && p.Annotations[v1alpha1.AnnotationAssignedMIG] == "gpu0:4g.40gb@0",
			fmt.Sprintf("four on %q with %q", p.Spec.NodeName, p.Annotations[v1alpha1.AnnotationAssignedMIG])
	})
	// Shares of one GPU by memory: one fits a GPU of the plain node, one is
	// above any GPU's memory.
	share := func(name, mem string) *corev1.Pod {
		spec := kit.GPUPodSpec(0)
		spec.Containers[0].Resources.Limits = nil
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{v1alpha1.AnnotationGPUMemory: mem}}, Spec: spec}
	}
	create(share("share", "20Gi"))
	create(share("too-big", "100Gi"))
	eventually(t, time.Minute, "the share bound to one GPU, the oversized one told why", func() (bool, string) {
		p := get("share")
		if p.Spec.NodeName != "plain" || strings.Contains(p.Annotations[v1alpha1.AnnotationAssignedGPUs], ",") ||
			p.Annotations[v1alpha1.AnnotationAssignedGPUs] == "" {
			return false, fmt.Sprintf("share on %q with GPUs %q", p.Spec.NodeName, p.Annotations[v1alpha1.AnnotationAssignedGPUs])
		}
		p = get("too-big")
		if p.Spec.NodeName != "" {
			t.Fatalf("too-big was bound to %s", p.Spec.NodeName)
		}
		reason, msg := scheduledCondition(p)
		return reason == "Unschedulable" && strings.Contains(msg, "asks 100 GiB of one GPU; the largest accepted GPU has 80 GiB"),
			fmt.Sprintf("too-big: %s %q", reason, msg)
	})

	// Nothing else moved.
	for name, w := range wantBound {
		if p := get(name); p.Spec.NodeName != w.node {
			t.Errorf("%s moved to %q", name, p.Spec.NodeName)
		}
	}
}
