package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// Tests with the real controllers users run (JobSet, LeaderWorkerSet,
// KubeRay), built at pinned versions by `make controllers`, applying the
// examples of docs/controllers/ verbatim: corral finds each gang's shape in
// the controllers' own objects, with no corral gang annotation.

var (
	jobSetGVR     = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	lwsGVR        = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	rayClusterGVR = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
)

// controlPlaneWith starts a control plane with the named controllers,
// corral's CRDs, a rack Topology and racks × perRack 8-GPU nodes.
func controlPlaneWith(t *testing.T, racks, perRack int, names ...framework.Controller) *framework.Cluster {
	t.Helper()
	requireControllers(t, names...)
	c := framework.Start(t, framework.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range names {
		if err := c.StartController(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	kit.AddRacks(t, c, racks, perRack)
	return c
}

// requireControllers fails the test (skips it under
// CORRAL_SKIP_INTEGRATION=1) when `make controllers` has not built them.
func requireControllers(t *testing.T, names ...framework.Controller) {
	t.Helper()
	if missing := framework.ControllersMissing(names...); len(missing) > 0 {
		if os.Getenv("CORRAL_SKIP_INTEGRATION") == "1" {
			t.Skipf("CORRAL_SKIP_INTEGRATION=1: controllers missing: %v", missing)
		}
		t.Fatalf("controllers missing: %v (run `make controllers`, or set CORRAL_SKIP_INTEGRATION=1)", missing)
	}
}

// example reads a docs/controllers example, the same file the docs show.
func example(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs := readObjects(t, filepath.Join(root, "docs", "controllers", file))
	if len(objs) != 1 {
		t.Fatalf("%s: %d objects, want 1", file, len(objs))
	}
	return objs[0]
}

func create(t *testing.T, c *framework.Cluster, ns string, o *unstructured.Unstructured) {
	t.Helper()
	o.SetNamespace(ns)
	if err := c.CreateObjects(context.Background(), o); err != nil {
		t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

// sameRack reports whether every bound pod is in one rack (nodes r<i>-n<j>).
func sameRack(pods []corev1.Pod) bool {
	rack := ""
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		r, _, _ := strings.Cut(p.Spec.NodeName, "-")
		if rack != "" && r != rack {
			return false
		}
		rack = r
	}
	return true
}

// podsOfOwner lists pods by a label the controller puts on them.
func podsWith(t *testing.T, c *framework.Cluster, ns, selector string) []corev1.Pod {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// neverBound watches pods matching selector for d and fails if one is bound.
func neverBound(t *testing.T, c *framework.Cluster, ns, selector string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, p := range podsWith(t, c, ns, selector) {
			if p.Spec.NodeName != "" {
				t.Fatalf("pod %s bound to %s", p.Name, p.Spec.NodeName)
			}
		}
	}
}

// TestJobSetGang: a JobSet is one gang of replicas × parallelism; it starts
// whole in one rack; one wider than a rack binds nothing and says it never
// fits; two that cannot both fit do not deadlock; deleting a pending
// JobSet binds none of its pods.
func TestJobSetGang(t *testing.T) {
	c := controlPlaneWith(t, 2, 4, framework.JobSet)
	ns := kit.Namespace(t, c, "jobset-")
	startCorral(t, c)
	ctx := context.Background()

	create(t, c, ns, example(t, "jobset.yaml"))
	eventually(t, 90*time.Second, "the example JobSet's 4 pods bound in one rack", func() (bool, string) {
		pods := podsWith(t, c, ns, "jobset.sigs.k8s.io/jobset-name=train")
		if !sameRack(pods) {
			t.Fatalf("JobSet spans racks")
		}
		return boundCount(pods) == 4 && len(pods) == 4, fmt.Sprintf("%d of %d bound", boundCount(pods), len(pods))
	})

	// Wider than a rack: 3 child Jobs × 2 pods, rack of 4 nodes.
	wide := example(t, "jobset.yaml")
	wide.SetName("wide")
	rjs, _, _ := unstructured.NestedSlice(wide.Object, "spec", "replicatedJobs")
	rjs[0].(map[string]any)["replicas"] = int64(3)
	_ = unstructured.SetNestedSlice(wide.Object, rjs, "spec", "replicatedJobs")
	create(t, c, ns, wide)
	eventually(t, 90*time.Second, "the JobSet wider than a rack says never fits, none bound", func() (bool, string) {
		pods := podsWith(t, c, ns, "jobset.sigs.k8s.io/jobset-name=wide")
		if n := boundCount(pods); n != 0 {
			t.Fatalf("%d pods of a JobSet that never fits bound", n)
		}
		for _, p := range pods {
			if _, msg := scheduledCondition(&p); strings.HasPrefix(msg, "never fits") {
				return len(pods) == 6, msg
			}
		}
		return false, fmt.Sprintf("%d pods, no never-fits reason yet", len(pods))
	})
	if err := c.Dynamic.Resource(jobSetGVR).Namespace(ns).Delete(ctx, "wide", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Two gangs of 3 × 2 pods without a rack constraint on the 4 free
	// nodes plus the 4 the first JobSet holds: they cannot both fit once
	// it ends; one starts whole, the other binds nothing.
	for _, name := range []string{"a", "b"} {
		o := example(t, "jobset.yaml")
		o.SetName(name)
		rjs, _, _ := unstructured.NestedSlice(o.Object, "spec", "replicatedJobs")
		rjs[0].(map[string]any)["replicas"] = int64(3)
		// No rack constraint; and kwok completes Job pods at once unless
		// the stage's delay annotation (a Go duration, hack/tools/stages)
		// says otherwise: these keep running.
		_ = unstructured.SetNestedStringMap(rjs[0].(map[string]any), map[string]string{
			"pod-complete.stage.kwok.x-k8s.io/delay": "1h"},
			"template", "spec", "template", "metadata", "annotations")
		_ = unstructured.SetNestedSlice(o.Object, rjs, "spec", "replicatedJobs")
		create(t, c, ns, o)
	}
	eventually(t, 120*time.Second, "one of two JobSets that cannot both fit starts whole, the other binds nothing", func() (bool, string) {
		a := boundCount(podsWith(t, c, ns, "jobset.sigs.k8s.io/jobset-name=a"))
		b := boundCount(podsWith(t, c, ns, "jobset.sigs.k8s.io/jobset-name=b"))
		if (a != 0 && a != 6) || (b != 0 && b != 6) {
			return false, fmt.Sprintf("a %d, b %d bound (a gang part-bound)", a, b)
		}
		return a+b == 6, fmt.Sprintf("a %d, b %d bound", a, b)
	})
	// The pending one stays pending while the running one runs (its pods'
	// kwok delay is 1h)...
	running, pending := "a", "b"
	if boundCount(podsWith(t, c, ns, "jobset.sigs.k8s.io/jobset-name=a")) == 0 {
		running, pending = "b", "a"
	}
	neverBound(t, c, ns, "jobset.sigs.k8s.io/jobset-name="+pending, 5*time.Second)
	// ...and deleting it while the running one ends (its room freed in the
	// same moment) binds none of its pods, though they live on until the
	// garbage collector removes them.
	boundAfter := watchPods(t, c, ns, "jobset.sigs.k8s.io/jobset-name="+pending, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	bg := metav1.DeletePropagationBackground
	for _, name := range []string{pending, running} {
		if err := c.Dynamic.Resource(jobSetGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 90*time.Second, "the deleted pending JobSet's pods gone, none bound", func() (bool, string) {
		if got := boundAfter(); len(got) > 0 {
			t.Fatalf("pods of the deleted pending JobSet %s bound: %v", pending, got)
		}
		n := len(podsWith(t, c, ns, "jobset.sigs.k8s.io/jobset-name="+pending))
		return n == 0, fmt.Sprintf("%d pods left", n)
	})
	if got := boundAfter(); len(got) > 0 {
		t.Fatalf("pods of the deleted pending JobSet %s bound: %v", pending, got)
	}
}

// TestJobSetExclusive: under JobSet's exclusive-topology annotation each
// child Job goes whole into a rack of its own, both in one go; a JobSet
// with more child Jobs than racks binds nothing and says it never fits.
func TestJobSetExclusive(t *testing.T) {
	c := controlPlaneWith(t, 2, 4, framework.JobSet)
	ns := kit.Namespace(t, c, "jobset-excl-")
	startCorral(t, c)

	// kwok completes Job pods at once unless the stage's delay annotation
	// says otherwise; the leaders keep running (and holding their
	// followers' room) until JobSet lets the followers be created.
	ex := example(t, "jobset-exclusive.yaml")
	rjs, _, _ := unstructured.NestedSlice(ex.Object, "spec", "replicatedJobs")
	_ = unstructured.SetNestedStringMap(rjs[0].(map[string]any), map[string]string{
		"pod-complete.stage.kwok.x-k8s.io/delay": "1h"},
		"template", "spec", "template", "metadata", "annotations")
	_ = unstructured.SetNestedSlice(ex.Object, rjs, "spec", "replicatedJobs")
	create(t, c, ns, ex)
	eventually(t, 120*time.Second, "the exclusive JobSet's 2 child Jobs bound whole, one per rack", func() (bool, string) {
		pods := podsWith(t, c, ns, "jobset.sigs.k8s.io/jobset-name=exclusive")
		rackOf := map[string]string{}  // child Job -> rack
		childOf := map[string]string{} // rack -> child Job
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				continue
			}
			child := p.Labels["job-name"]
			rack, _, _ := strings.Cut(p.Spec.NodeName, "-")
			if r, ok := rackOf[child]; ok && r != rack {
				t.Fatalf("child Job %s spans racks %s and %s", child, r, rack)
			}
			if o, ok := childOf[rack]; ok && o != child {
				t.Fatalf("rack %s holds child Jobs %s and %s", rack, o, child)
			}
			rackOf[child], childOf[rack] = rack, child
		}
		why := ""
		for _, p := range pods {
			if _, msg := scheduledCondition(&p); msg != "" {
				why = "; " + p.Name + ": " + msg
			}
		}
		return len(pods) == 4 && boundCount(pods) == 4, fmt.Sprintf("%d of %d bound, racks %v%s", boundCount(pods), len(pods), rackOf, why)
	})

	// Three child Jobs, two racks: never, and nothing bound.
	three := example(t, "jobset-exclusive.yaml")
	three.SetName("three")
	rjs, _, _ = unstructured.NestedSlice(three.Object, "spec", "replicatedJobs")
	rjs[0].(map[string]any)["replicas"] = int64(3)
	_ = unstructured.SetNestedSlice(three.Object, rjs, "spec", "replicatedJobs")
	create(t, c, ns, three)
	eventually(t, 90*time.Second, "three exclusive child Jobs on two racks: never fits, none bound", func() (bool, string) {
		pods := podsWith(t, c, ns, "jobset.sigs.k8s.io/jobset-name=three")
		if n := boundCount(pods); n != 0 {
			t.Fatalf("%d pods of a JobSet that never fits bound", n)
		}
		for _, p := range pods {
			if _, msg := scheduledCondition(&p); strings.HasPrefix(msg, "never fits") && strings.Contains(msg, "needs 3 racks") {
				return true, msg
			}
		}
		return false, fmt.Sprintf("%d pods, no never-fits reason yet", len(pods))
	})
}

// TestLeaderWorkerSetLeaderReady: under startupPolicy LeaderReady the
// leader is bound with its workers' room held, and the workers LWS creates
// once the leader is Ready are bound into it: the group completes in one
// rack.
func TestLeaderWorkerSetLeaderReady(t *testing.T) {
	c := controlPlaneWith(t, 2, 4, framework.LeaderWorkerSet)
	ns := kit.Namespace(t, c, "lws-")
	startCorral(t, c)
	create(t, c, ns, example(t, "leaderworkerset.yaml"))
	eventually(t, 120*time.Second, "the LWS group of 4 bound in one rack", func() (bool, string) {
		pods := podsWith(t, c, ns, "leaderworkerset.sigs.k8s.io/name=serve")
		if !sameRack(pods) {
			t.Fatalf("group spans racks")
		}
		return len(pods) == 4 && boundCount(pods) == 4, fmt.Sprintf("%d of %d bound", boundCount(pods), len(pods))
	})
	leader, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "serve-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if leader.Annotations[v1alpha1.AnnotationHeldRoom] == "" {
		t.Errorf("leader carries no %s annotation: the workers' room was not held", v1alpha1.AnnotationHeldRoom)
	}
}

// TestRayClusterGrows: head and the workers' minimum start together in one
// rack; raising the worker group's replicas (as the autoscaler does) adds
// workers that are placed as elastic members.
func TestRayClusterGrows(t *testing.T) {
	c := controlPlaneWith(t, 2, 4, framework.KubeRay)
	ns := kit.Namespace(t, c, "ray-")
	startCorral(t, c)
	create(t, c, ns, example(t, "raycluster.yaml"))
	sel := "ray.io/cluster=ray"
	eventually(t, 120*time.Second, "head and 2 workers bound in one rack", func() (bool, string) {
		pods := podsWith(t, c, ns, sel)
		if !sameRack(pods) {
			t.Fatalf("RayCluster spans racks")
		}
		return len(pods) == 3 && boundCount(pods) == 3, fmt.Sprintf("%d of %d bound", boundCount(pods), len(pods))
	})
	ctx := context.Background()
	// The operator writes the RayCluster's status as we scale it: a
	// conflict means our copy is stale, not that the scale-up failed.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rc, err := c.Dynamic.Resource(rayClusterGVR).Namespace(ns).Get(ctx, "ray", metav1.GetOptions{})
		if err != nil {
			return err
		}
		groups, _, _ := unstructured.NestedSlice(rc.Object, "spec", "workerGroupSpecs")
		groups[0].(map[string]any)["replicas"] = int64(4)
		_ = unstructured.SetNestedSlice(rc.Object, groups, "spec", "workerGroupSpecs")
		_, err = c.Dynamic.Resource(rayClusterGVR).Namespace(ns).Update(ctx, rc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 120*time.Second, "the scaled-up RayCluster grows to 5 pods", func() (bool, string) {
		pods := podsWith(t, c, ns, sel)
		return len(pods) == 5 && boundCount(pods) == 5, fmt.Sprintf("%d of %d bound", boundCount(pods), len(pods))
	})
}

// TestNodeLeasesRenewed: kwok renews its nodes' Leases, so the node
// lifecycle controller never marks them Ready=Unknown.
func TestNodeLeasesRenewed(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.AddRacks(t, c, 1, 1)
	ctx := context.Background()
	var first time.Time
	eventually(t, 60*time.Second, "the node's Lease renewed", func() (bool, string) {
		l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "r0-n0", metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false, fmt.Sprint(err)
		}
		if first.IsZero() {
			first = l.Spec.RenewTime.Time
			return false, "first renewal seen"
		}
		return l.Spec.RenewTime.After(first), "not renewed again yet"
	})
}

// watchPods watches the namespace's pods matching selector until the test
// ends and returns the names of those seen so far in a state cond accepts
// (every state a pod passes through, not only the one a poll finds).
func watchPods(t *testing.T, c *framework.Cluster, ns, selector string, cond func(*corev1.Pod) bool) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if p, ok := ev.Object.(*corev1.Pod); ok && cond(p) {
				mu.Lock()
				seen = append(seen, p.Name)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// allSucceeded reports whether pods is not empty and every pod succeeded.
func allSucceeded(pods []corev1.Pod) bool {
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded {
			return false
		}
	}
	return len(pods) > 0
}
