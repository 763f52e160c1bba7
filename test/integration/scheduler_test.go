package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// occupy binds a pod of another scheduler taking all 8 GPUs of a node.
func occupy(t *testing.T, c *framework.Cluster, ns, node string) {
	t.Helper()
	spec := kit.GPUPodSpec(8)
	spec.SchedulerName = "default-scheduler"
	spec.NodeName = node
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog-" + node, Namespace: ns}, Spec: spec}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestGangJobRequiredRack(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	kit.AddRacks(t, c, 2, 4)
	ns := kit.Namespace(t, c, "rack-")
	startCorral(t, c)

	t.Run("the Topology reports it is in use", func(t *testing.T) {
		eventually(t, 30*time.Second, "Accepted=True on the Topology", func() (bool, string) {
			u, err := c.Dynamic.Resource(kit.TopologyGVR).Get(context.Background(), "default", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			nodes, _, _ := unstructured.NestedInt64(u.Object, "status", "nodes")
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, raw := range conds {
				m := raw.(map[string]any)
				if m["type"] == "Accepted" && m["status"] == "True" && m["reason"] == "InUse" && nodes == 8 {
					return true, ""
				}
			}
			return false, fmt.Sprintf("nodes=%d conditions=%v", nodes, conds)
		})
	})

	t.Run("four 8-GPU pods bind into one rack", func(t *testing.T) {
		createJob(t, c, gpuJob(ns, "train", 4, 8, map[string]string{v1alpha1.AnnotationRequiredTopology: "rack"}))
		var pods []corev1.Pod
		eventually(t, 60*time.Second, "4 pods bound", func() (bool, string) {
			pods = podsOf(t, c, ns, "train")
			return len(pods) == 4 && boundCount(pods) == 4, fmt.Sprintf("%d pods, %d bound", len(pods), boundCount(pods))
		})
		racks := map[string]bool{}
		gpus := map[string]bool{}
		for _, p := range pods {
			racks[strings.SplitN(p.Spec.NodeName, "-", 2)[0]] = true
			ids := p.Annotations[v1alpha1.AnnotationAssignedGPUs]
			if len(strings.Split(ids, ",")) != 8 {
				t.Errorf("pod %s: assigned GPUs %q, want 8", p.Name, ids)
			}
			gpus[p.Spec.NodeName] = true
		}
		if len(racks) != 1 {
			t.Errorf("pods span racks %v, want one", racks)
		}
		if len(gpus) != 4 {
			t.Errorf("pods on %d nodes, want 4", len(gpus))
		}
	})

	t.Run("with three free nodes per rack nothing binds and the reason says so", func(t *testing.T) {
		// The first job's pods complete at once under kwok; take one node of
		// each rack with a pod of another scheduler that never ends.
		hogs := kit.Namespace(t, c, "hogs-")
		occupy(t, c, hogs, "r0-n0")
		occupy(t, c, hogs, "r1-n0")
		createJob(t, c, gpuJob(ns, "wait", 4, 8, map[string]string{v1alpha1.AnnotationRequiredTopology: "rack"}))
		eventually(t, 60*time.Second, "a reason on the waiting pods", func() (bool, string) {
			pods := podsOf(t, c, ns, "wait")
			if len(pods) != 4 {
				return false, fmt.Sprintf("%d pods", len(pods))
			}
			for _, p := range pods {
				if p.Spec.NodeName != "" {
					t.Fatalf("pod %s bound to %s: a 4-node gang cannot fit in one rack", p.Name, p.Spec.NodeName)
				}
				reason, msg := scheduledCondition(&p)
				if reason != "Unschedulable" || !strings.Contains(msg, "no rack") {
					return false, fmt.Sprintf("pod %s: %s %q", p.Name, reason, msg)
				}
			}
			return true, ""
		})
		// And it stays that way: no pod of the gang binds.
		time.Sleep(2 * time.Second)
		if n := boundCount(podsOf(t, c, ns, "wait")); n != 0 {
			t.Errorf("%d pods of the waiting gang bound", n)
		}

		// corral explain says the same, and what would change it.
		ex, err := kube.New(c.Client, c.Dynamic, kube.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e, err := ex.Explain(ctx, ns, podsOf(t, c, ns, "wait")[0].Name)
		if err != nil {
			t.Fatal(err)
		}
		if e.State != "pending" || e.Level != "rack" || e.Pods != 4 || e.GangMin != 4 || len(e.Suggestions) == 0 ||
			!strings.Contains(e.Suggestions[0], "1 more of the 4 pods must fit in one rack") {
			t.Errorf("explain: %+v", e)
		}
	})
}

func TestGangsNeverDeadlock(t *testing.T) {
	// Two gangs of two 8-GPU pods on three nodes: together they do not fit.
	// The pods are bare (they never complete under kwok), so whatever corral
	// binds stays bound: exactly one gang runs, the other waits whole.
	c := framework.Start(t, framework.Options{})
	kit.AddRacks(t, c, 1, 3)
	ns := kit.Namespace(t, c, "deadlock-")
	for _, g := range []string{"a", "b"} {
		for i := 0; i < 2; i++ {
			createGangPod(t, c, ns, g, i, 8)
		}
	}
	startCorral(t, c)
	eventually(t, 60*time.Second, "one whole gang bound", func() (bool, string) {
		a, b := boundCount(podsOf(t, c, ns, "a")), boundCount(podsOf(t, c, ns, "b"))
		return (a == 2 && b == 0) || (a == 0 && b == 2), fmt.Sprintf("a=%d b=%d", a, b)
	})
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		a, b := boundCount(podsOf(t, c, ns, "a")), boundCount(podsOf(t, c, ns, "b"))
		if a+b != 2 || a == 1 {
			t.Fatalf("gangs bound a=%d b=%d; want one whole gang and nothing of the other", a, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var waiting string
	if boundCount(podsOf(t, c, ns, "a")) == 0 {
		waiting = "a"
	} else {
		waiting = "b"
	}
	eventually(t, 30*time.Second, "a reason on the waiting gang", func() (bool, string) {
		for _, p := range podsOf(t, c, ns, waiting) {
			if reason, msg := scheduledCondition(&p); reason != "Unschedulable" || msg == "" {
				return false, fmt.Sprintf("%s: %s %q", p.Name, reason, msg)
			}
		}
		return true, ""
	})
}

// createGangPod creates pod <gang>-<i> of a bare-pod gang (annotation
// corral.dev/gang) with the label app=<gang>.
func createGangPod(t *testing.T, c *framework.Cluster, ns, gang string, i, gpus int) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", gang, i), Namespace: ns,
		Labels: map[string]string{"app": gang}, Annotations: map[string]string{v1alpha1.AnnotationGang: gang}},
		Spec: kit.GPUPodSpec(gpus)}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestBadInputGetsAReason(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	kit.AddRacks(t, c, 1, 2)
	ns := kit.Namespace(t, c, "bad-")
	startCorral(t, c)

	mk := func(name string, gpus int, ann map[string]string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann}, Spec: kit.GPUPodSpec(gpus)}
		if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("nine-gpus", 9, nil)
	mk("unknown-level", 1, map[string]string{v1alpha1.AnnotationRequiredTopology: "spine"})
	mk("bad-annotation", 1, map[string]string{v1alpha1.AnnotationMinMembers: "many"})
	mk("fine", 2, nil)

	want := map[string]struct{ reason, text string }{
		"nine-gpus":      {"Unschedulable", "largest node has 8"},
		"unknown-level":  {"Unschedulable", `unknown topology level "spine"`},
		"bad-annotation": {"Invalid", "corral.dev/min-members"},
	}
	eventually(t, 60*time.Second, "reasons on the bad pods and the good pod bound", func() (bool, string) {
		for name, w := range want {
			p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			reason, msg := scheduledCondition(p)
			if reason != w.reason || !strings.Contains(msg, w.text) {
				return false, fmt.Sprintf("%s: %s %q", name, reason, msg)
			}
			if p.Spec.NodeName != "" {
				t.Fatalf("%s was bound", name)
			}
		}
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "fine", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName != "", "fine not bound"
	})
}

func TestPartlyBoundGangThatCanNeverFitIsRolledBack(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.AddRacks(t, c, 1, 2)
	ns := kit.Namespace(t, c, "rollback-")
	// A gang of three 8-GPU pods on two nodes, two of them already bound (as
	// if a scheduler had bound them and the cluster then lost a node).
	for i := 0; i < 3; i++ {
		spec := kit.GPUPodSpec(8)
		if i < 2 {
			spec.NodeName = fmt.Sprintf("r0-n%d", i)
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g-%d", i), Namespace: ns,
			Labels: map[string]string{"app": "g"}, Annotations: map[string]string{v1alpha1.AnnotationGang: "g",
				v1alpha1.AnnotationMinMembers: "3"}}, Spec: spec}
		if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startCorral(t, c)
	eventually(t, 60*time.Second, "the bound part evicted and the gang waiting whole", func() (bool, string) {
		pods := podsOf(t, c, ns, "g")
		live := 0
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
				live++
			}
		}
		if live != 0 {
			return false, fmt.Sprintf("%d bound pods left", live)
		}
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "g-2", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		// With its bound pods gone, the gang waits for its members again.
		reason, msg := scheduledCondition(p)
		return p.Spec.NodeName == "" && reason != "", reason + " " + msg
	})
}
