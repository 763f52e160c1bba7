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
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// rackGang is a running 2-pod gang "train" (8 GPUs a pod, rack required)
// in rack r0 of two racks of three nodes, with two nodes of r1 taken, so
// that r0 keeps one node free for a replacement and r1 one free node that a
// replacement placed anywhere could take.
type rackGang struct {
	c    *framework.Cluster
	ns   string
	pods []corev1.Pod            // the gang's pods, running, in name order
	pod  func(i int) *corev1.Pod // rank i's pod, as its owner would create it
}

func startRackGang(t *testing.T, opts framework.Options) rackGang {
	t.Helper()
	c := framework.Start(t, opts)
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	kit.AddRacks(t, c, 2, 3)
	g := rackGang{c: c, ns: kit.Namespace(t, c, "health-")}
	hogs := kit.Namespace(t, c, "hogs-")
	occupy(t, c, hogs, "r1-n0")
	occupy(t, c, hogs, "r1-n1")
	startCorral(t, c)
	g.pod = func(i int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("train-%d", i), Namespace: g.ns,
			Labels: map[string]string{"app": "train"},
			Annotations: map[string]string{v1alpha1.AnnotationGang: "train", v1alpha1.AnnotationMinMembers: "2",
				v1alpha1.AnnotationRequiredTopology: "rack"}},
			Spec: kit.GPUPodSpec(8)}
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Client.CoreV1().Pods(g.ns).Create(context.Background(), g.pod(i), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "the gang running", func() (bool, string) {
		g.pods = podsOf(t, c, g.ns, "train")
		running := 0
		for _, p := range g.pods {
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) > 0 {
				running++
			}
		}
		return running == 2, fmt.Sprintf("%d running", running)
	})
	return g
}

// TestFailedGPUReplacesTheRankInItsRack: a health agent marks a GPU under a
// running 2-node gang unhealthy; corral evicts only that rank, says why on
// the pod and on the node, and places the recreated pod on a healthy node
// of the same rack, never on the failed GPU.
func TestFailedGPUReplacesTheRankInItsRack(t *testing.T) {
	g := startRackGang(t, framework.Options{})
	c, ns, pods, gangPod := g.c, g.ns, g.pods, g.pod
	ctx := context.Background()
	used := map[string]bool{}
	for _, p := range pods {
		if !strings.HasPrefix(p.Spec.NodeName, "r0-") {
			t.Fatalf("pod %s on %s, want rack r0", p.Name, p.Spec.NodeName)
		}
		used[p.Spec.NodeName] = true
	}
	victim := pods[0]
	failedNode := victim.Spec.NodeName
	failedGPU := strings.Split(victim.Annotations[v1alpha1.AnnotationAssignedGPUs], ",")[3]
	spare := ""
	for _, n := range []string{"r0-n0", "r0-n1", "r0-n2"} {
		if !used[n] {
			spare = n
		}
	}

	// The health agent reports the GPU.
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationUnhealthyGPUs, failedGPU)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, failedNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the failed rank evicted", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != victim.UID) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("pod %s still there (deleting: %v)", p.Name, p.DeletionTimestamp != nil)
	})
	// The other rank stays where it was.
	other, err := c.Client.CoreV1().Pods(ns).Get(ctx, pods[1].Name, metav1.GetOptions{})
	if err != nil || other.UID != pods[1].UID || other.Spec.NodeName != pods[1].Spec.NodeName {
		evs, _ := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		for _, e := range evs.Items {
			t.Logf("EVENT %s %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Source.Component, e.Message)
		}
		t.Fatalf("the healthy rank was disturbed: %v %+v", err, other.Spec.NodeName)
	}
	// The replacement's rack is recorded on the healthy rank, for a
	// scheduler that restarts before the replacement arrives.
	eventually(t, 30*time.Second, "the pin recorded on the healthy rank", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pods[1].Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := p.Annotations[v1alpha1.AnnotationReplaceWithin]
		return got == "rack/r0", "annotation " + got
	})

	// Its owner recreates the pod, as a Job or JobSet controller would.
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, gangPod(0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the replacement bound in rack r0", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName != "", "not bound yet: " + p.Spec.NodeName
	})
	p, _ := c.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
	if p.Spec.NodeName != spare {
		t.Errorf("replacement on %s, want %s (the free node of rack r0)", p.Spec.NodeName, spare)
	}

	// Nothing corral placed holds the failed GPU.
	all, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + failedNode})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range all.Items {
		for _, id := range strings.Split(q.Annotations[v1alpha1.AnnotationAssignedGPUs], ",") {
			if id == failedGPU && q.DeletionTimestamp == nil {
				t.Errorf("pod %s/%s holds the failed GPU %s", q.Namespace, q.Name, failedGPU)
			}
		}
	}

	// The events say why.
	eventually(t, 30*time.Second, "events on the pod and the node", func() (bool, string) {
		evs, err := c.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var onPod, onNode bool
		var seen []string
		for _, e := range evs.Items {
			seen = append(seen, e.Reason+": "+e.Note)
			if e.Reason == "DeviceFailed" && e.Regarding.Name == victim.Name && strings.Contains(e.Note, failedGPU) {
				onPod = true
			}
			if e.Reason == "RepairNeeded" && e.Regarding.Name == failedNode && strings.Contains(e.Note, failedGPU) {
				onNode = true
			}
		}
		return onPod && onNode, strings.Join(seen, " | ")
	})
}

// TestSuspectNodeIsAvoided: a node whose kubelet rejected three pods at
// admission (UnexpectedAdmissionError) gets no new pods while it is suspect,
// even though it is the best fit.
func TestSuspectNodeIsAvoided(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.AddRacks(t, c, 1, 2)
	ns := kit.Namespace(t, c, "suspect-")
	hogs := kit.Namespace(t, c, "hogs-")
	ctx := context.Background()
	// r0-n0 is half full, so best fit would choose it for a 4-GPU pod.
	half := kit.GPUPodSpec(4)
	half.SchedulerName, half.NodeName = "default-scheduler", "r0-n0"
	if _, err := c.Client.CoreV1().Pods(hogs).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "half"}, Spec: half}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Three pods the kubelet of r0-n0 rejected at admission.
	for i := 0; i < 3; i++ {
		spec := kit.GPUPodSpec(1)
		spec.SchedulerName, spec.NodeName = "default-scheduler", "r0-n0"
		name := fmt.Sprintf("rejected-%d", i)
		if _, err := c.Client.CoreV1().Pods(hogs).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// kwok writes the pod's status too: retry on conflict until the
		// rejection sticks, as the kubelet's would.
		eventually(t, 30*time.Second, "pod "+name+" rejected at admission", func() (bool, string) {
			p, err := c.Client.CoreV1().Pods(hogs).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if p.Status.Phase == corev1.PodFailed && p.Status.Reason == v1alpha1.ReasonUnexpectedAdmissionError {
				return true, ""
			}
			p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: v1alpha1.ReasonUnexpectedAdmissionError,
				Message: "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices nvidia.com/gpu"}
			_, err = c.Client.CoreV1().Pods(hogs).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return false, fmt.Sprint(err)
		})
	}
	startCorral(t, c)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: ns, Labels: map[string]string{"app": "job"}}, Spec: kit.GPUPodSpec(4)}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the pod bound", func() (bool, string) {
		pods := podsOf(t, c, ns, "job")
		return boundCount(pods) == 1, fmt.Sprintf("%d bound", boundCount(pods))
	})
	if got := podsOf(t, c, ns, "job")[0].Spec.NodeName; got != "r0-n1" {
		t.Errorf("pod on %s, want r0-n1 (r0-n0 is suspect)", got)
	}
}
