package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// TestNodeNotReadyBringsTheGangBackInItsRack: the node under one rank of a
// running 2-node gang goes NotReady. Kubernetes alone would leave the pod
// there for 300 s (the not-ready/unreachable tolerations every pod gets);
// corral deletes it at once (grace period 0: no kubelet will finish a
// graceful exit), says why on the pod and on the node, and places the
// recreated pod on the free node of the same rack, never on the dead one.
func TestNodeNotReadyBringsTheGangBackInItsRack(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	kit.AddRacks(t, c, 2, 3)
	ns := kit.Namespace(t, c, "notready-")
	hogs := kit.Namespace(t, c, "hogs-")
	// r1 has one free node, so the gang (rack required) goes to r0, which
	// keeps one node free for the replacement. r1-n2 stays free as well: a
	// replacement placed anywhere could take it.
	occupy(t, c, hogs, "r1-n0")
	occupy(t, c, hogs, "r1-n1")
	reg := prometheus.NewRegistry()
	startCorralWith(t, c, kube.Options{Registry: reg})

	ctx := context.Background()
	pods := runGang(t, c, ns, "train", func(int) corev1.PodSpec { return kit.GPUPodSpec(8) })
	victim, survivor := pods[0], pods[1]
	deadNode := victim.Spec.NodeName
	spare := freeNodeOfRack(pods, "r0", 3)
	if !hasNotReadyToleration(victim) {
		t.Fatalf("pod %s lacks the 300 s not-ready toleration the DefaultTolerationSeconds admission plugin adds: %+v",
			victim.Name, victim.Spec.Tolerations)
	}

	// Watch the rank from before the failure: a graceful deletion would
	// show the pod terminating first; a forced one only removes it.
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + victim.Name,
		ResourceVersion: victim.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	failedAt := time.Now()
	setNodeNotReady(t, c, deadNode)
	timeout := time.After(30 * time.Second)
	for deleted := false; !deleted; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch on the rank ended early")
			}
			p, _ := ev.Object.(*corev1.Pod)
			switch {
			case p == nil || p.UID != victim.UID:
			case ev.Type == watch.Deleted:
				deleted = true
			case p.DeletionTimestamp != nil && (p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds > 0):
				t.Fatalf("pod %s deleted gracefully (grace period %d s) on a NotReady node, where no kubelet will finish it",
					p.Name, ptrValue(p.DeletionGracePeriodSeconds))
			}
		case <-timeout:
			logEvents(t, c, ns)
			t.Fatal("the rank on the NotReady node was not deleted within 30s")
		}
	}
	t.Logf("the rank on the NotReady node was force-deleted %.1fs after the node went NotReady (Kubernetes alone: 300s)",
		time.Since(failedAt).Seconds())
	expectUndisturbed(t, c, survivor)

	// Its owner recreates the pod, as a Job or JobSet controller would.
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, gangMember(ns, "train", 0, kit.GPUPodSpec(8)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replacement := waitBound(t, c, ns, victim.Name)
	if replacement.Spec.NodeName != spare {
		t.Errorf("replacement on %s, want %s (the free node of rack r0)", replacement.Spec.NodeName, spare)
	}
	expectNothingBoundTo(t, c, deadNode)
	expectNodeNotReady(t, c, deadNode)

	expectFailureEvents(t, c, victim.Name, deadNode, deadNode, "NotReady", "replacing 1 of 2 pods in rack r0")
	// The failure's eviction counts with every other cause's.
	if got := evictionsOf(t, reg, "DeviceFailed"); got != 1 {
		t.Errorf("corral_evictions_total{cause=DeviceFailed} = %v, want 1", got)
	}
}

// evictionsOf reads corral_evictions_total for one cause from a registry.
func evictionsOf(t *testing.T, reg *prometheus.Registry, cause string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "corral_evictions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cause" && l.GetValue() == cause {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// setNodeNotReady makes a kwok node report Ready=False, as a kubelet whose
// container runtime went down does. kwok answers any node status without
// Ready=True by playing its node-initialize stage (which writes Ready=True
// again), so the node first leaves kwok's management: kwok filters nodes by
// the kwok.x-k8s.io/node annotation on every watch event.
func setNodeNotReady(t *testing.T, c *framework.Cluster, name string) {
	t.Helper()
	ctx := context.Background()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, framework.KwokNodeAnnotation)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "node "+name+" Ready=False", func() (bool, string) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		now := metav1.Now()
		for i := range n.Status.Conditions {
			cond := &n.Status.Conditions[i]
			if cond.Type != corev1.NodeReady {
				continue
			}
			if cond.Status == corev1.ConditionFalse {
				return true, ""
			}
			cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, "KubeletNotReady", "container runtime is down"
			cond.LastTransitionTime, cond.LastHeartbeatTime = now, now
		}
		_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return false, fmt.Sprint(err)
	})
}

// expectNodeNotReady checks that the node is still NotReady: kwok must not
// have revived it while the test looked at what corral did.
func expectNodeNotReady(t *testing.T, c *framework.Cluster, name string) {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			t.Fatalf("node %s is Ready again: the test did not hold the failure", name)
		}
	}
}

// hasNotReadyToleration: Kubernetes' own answer to a NotReady node is the
// taint node.kubernetes.io/not-ready:NoExecute, which pods tolerate for
// 300 s by default.
func hasNotReadyToleration(p corev1.Pod) bool {
	for _, tol := range p.Spec.Tolerations {
		if tol.Key == corev1.TaintNodeNotReady && tol.Effect == corev1.TaintEffectNoExecute &&
			tol.TolerationSeconds != nil && *tol.TolerationSeconds == 300 {
			return true
		}
	}
	return false
}

// gangMember is pod i of a 2-pod gang that must fit in one rack.
func gangMember(ns, gang string, i int, spec corev1.PodSpec) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", gang, i), Namespace: ns,
		Labels: map[string]string{"app": gang},
		Annotations: map[string]string{v1alpha1.AnnotationGang: gang, v1alpha1.AnnotationMinMembers: "2",
			v1alpha1.AnnotationRequiredTopology: "rack"}},
		Spec: spec}
}

// runGang creates a 2-pod gang and waits until both pods are bound in rack
// r0, returned in name order.
func runGang(t *testing.T, c *framework.Cluster, ns, gang string, spec func(i int) corev1.PodSpec) []corev1.Pod {
	t.Helper()
	for i := 0; i < 2; i++ {
		if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), gangMember(ns, gang, i, spec(i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var pods []corev1.Pod
	eventually(t, 60*time.Second, "the gang bound", func() (bool, string) {
		pods = podsOf(t, c, ns, gang)
		return boundCount(pods) == 2, fmt.Sprintf("%d bound", boundCount(pods))
	})
	if pods[0].Name > pods[1].Name {
		pods[0], pods[1] = pods[1], pods[0]
	}
	for _, p := range pods {
		if !strings.HasPrefix(p.Spec.NodeName, "r0-") {
			t.Fatalf("pod %s on %s, want rack r0", p.Name, p.Spec.NodeName)
		}
	}
	return pods
}

// freeNodeOfRack names the node of rack r<i>-n0..n<size-1> that holds none
// of the pods.
func freeNodeOfRack(pods []corev1.Pod, rack string, size int) string {
	used := map[string]bool{}
	for _, p := range pods {
		used[p.Spec.NodeName] = true
	}
	for i := 0; i < size; i++ {
		if n := fmt.Sprintf("%s-n%d", rack, i); !used[n] {
			return n
		}
	}
	return ""
}

// expectUndisturbed checks that a healthy rank kept its pod and its node.
func expectUndisturbed(t *testing.T, c *framework.Cluster, p corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	now, err := c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil || now.UID != p.UID || now.Spec.NodeName != p.Spec.NodeName || now.DeletionTimestamp != nil {
		logEvents(t, c, p.Namespace)
		t.Fatalf("the healthy rank %s was disturbed: %v", p.Name, err)
	}
}

// waitBound waits until the pod is bound and returns it.
func waitBound(t *testing.T, c *framework.Cluster, ns, name string) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	eventually(t, 60*time.Second, name+" bound", func() (bool, string) {
		var err error
		p, err = c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, msg := scheduledCondition(p)
		return p.Spec.NodeName != "", "not bound yet: " + msg
	})
	return p
}

// expectNothingBoundTo checks that no pod of corral's, other than ones on
// their way out, sits on the node.
func expectNothingBoundTo(t *testing.T, c *framework.Cluster, node string) {
	t.Helper()
	all, err := c.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all.Items {
		if p.Spec.SchedulerName == v1alpha1.SchedulerName && p.DeletionTimestamp == nil {
			t.Errorf("pod %s/%s is on the failed node %s", p.Namespace, p.Name, node)
		}
	}
}

// expectFailureEvents waits for corral's DeviceFailed event on the evicted
// pod and its RepairNeeded event on the node, both naming what failed
// (what) and why (reason); the pod's also says onPod (what corral did).
func expectFailureEvents(t *testing.T, c *framework.Cluster, pod, node, what, reason, onPod string) {
	t.Helper()
	eventually(t, 30*time.Second, "events on the pod and the node", func() (bool, string) {
		evs, err := c.Client.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var podNote, nodeNote string
		var seen []string
		for _, e := range evs.Items {
			seen = append(seen, e.Regarding.Name+" "+e.Reason+": "+e.Note)
			mentions := strings.Contains(e.Note, what) && strings.Contains(e.Note, reason)
			if e.Reason == "DeviceFailed" && e.Regarding.Name == pod && mentions && strings.Contains(e.Note, onPod) {
				podNote = e.Note
			}
			if e.Reason == "RepairNeeded" && e.Regarding.Kind == "Node" && e.Regarding.Name == node && mentions {
				nodeNote = e.Note
			}
		}
		if podNote == "" || nodeNote == "" {
			return false, strings.Join(seen, " | ")
		}
		t.Logf("event on pod %s: DeviceFailed: %s", pod, podNote)
		t.Logf("event on node %s: RepairNeeded: %s", node, nodeNote)
		return true, ""
	})
}

func logEvents(t *testing.T, c *framework.Cluster, ns string) {
	t.Helper()
	evs, _ := c.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if evs == nil {
		return
	}
	for _, e := range evs.Items {
		t.Logf("EVENT %s %s %s: %s", e.Regarding.Name, e.Reason, e.ReportingController, e.Note)
	}
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// startCorralStoppable runs corral's scheduler in this process until the
// returned stop is called or the test ends.
func startCorralStoppable(t *testing.T, c *framework.Cluster) (stop func()) {
	t.Helper()
	_, stop = startCorralWith(t, c, kube.Options{})
	return stop
}
