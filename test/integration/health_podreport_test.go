package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// TestPodReportedUnhealthyGPUIsRemediated: the kubelet reports in a running
// rank's status that one of its GPUs is unhealthy (allocatedResourcesStatus,
// KEP-4680); corral evicts that rank, says why, and places the recreated pod
// in the same rack on a healthy node, while the report's pod is gone.
func TestPodReportedUnhealthyGPUIsRemediated(t *testing.T) {
	g := startRackGang(t, framework.Options{FeatureGates: map[string]bool{"ResourceHealthStatus": true}})
	c, ns, pods, gangPod := g.c, g.ns, g.pods, g.pod
	ctx := context.Background()
	victim := pods[0]
	failedNode := victim.Spec.NodeName
	failedGPU := strings.Split(victim.Annotations[v1alpha1.AnnotationAssignedGPUs], ",")[2]

	// The kubelet's report, as the device plugin's health reaches it.
	patch := fmt.Sprintf(`{"status":{"containerStatuses":[{"name":"train","allocatedResourcesStatus":[{"name":%q,"resources":[{"resourceID":%q,"health":"Unhealthy"}]}]}]}}`,
		v1alpha1.ResourceGPU, failedGPU)
	if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, victim.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	got, err := c.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cs := got.Status.ContainerStatuses; len(cs) == 0 || len(cs[0].AllocatedResourcesStatus) == 0 {
		t.Fatalf("the API server dropped allocatedResourcesStatus (feature gate ResourceHealthStatus): %+v", cs)
	}
	eventually(t, 30*time.Second, "the rank on the unhealthy GPU evicted", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != victim.UID) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("still there (deleting: %v)", p.DeletionTimestamp != nil)
	})
	if other, err := c.Client.CoreV1().Pods(ns).Get(ctx, pods[1].Name, metav1.GetOptions{}); err != nil || other.UID != pods[1].UID {
		t.Fatalf("the healthy rank was disturbed: %v", err)
	}
	// The owner recreates the pod; the report left with the old one, yet
	// the GPU stays out and the replacement joins the rack.
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, gangPod(0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the replacement bound", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName != "", "not bound yet"
	})
	p, _ := c.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
	if !strings.HasPrefix(p.Spec.NodeName, "r0-") || p.Spec.NodeName == failedNode {
		t.Errorf("replacement on %s, want r0's free node (not %s)", p.Spec.NodeName, failedNode)
	}
	eventually(t, 30*time.Second, "events naming the report", func() (bool, string) {
		evs, err := c.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			seen = append(seen, e.Reason+": "+e.Note)
			if e.Reason == "DeviceFailed" && e.Regarding.Name == victim.Name && strings.Contains(e.Note, "reports") && strings.Contains(e.Note, failedGPU) {
				return true, ""
			}
		}
		return false, strings.Join(seen, " | ")
	})
}

// TestSparesAreHeldOnKubernetes: with --spares rack=8 the scheduler keeps a
// whole node of the rack free: of three 8-GPU pods on a three-node rack,
// two bind and the third waits.
func TestSparesAreHeldOnKubernetes(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	kit.AddRacks(t, c, 1, 3)
	ns := kit.Namespace(t, c, "spares-")
	startCorralWith(t, c, kube.Options{Spares: []cycle.Spare{{Level: "rack", GPUs: 8}}})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("solo-%d", i), Namespace: ns,
			Labels: map[string]string{"app": "solo"}}, Spec: kit.GPUPodSpec(8)}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "two pods bound", func() (bool, string) {
		n := boundCount(podsOf(t, c, ns, "solo"))
		return n == 2, fmt.Sprintf("%d bound", n)
	})
	// Several cycles later the third still waits: the last node is the spare.
	time.Sleep(2 * time.Second)
	if n := boundCount(podsOf(t, c, ns, "solo")); n != 2 {
		t.Errorf("%d pods bound, want 2: the rack's spare node was used", n)
	}
}
