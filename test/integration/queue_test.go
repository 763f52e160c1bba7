package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

var queueGVR = schema.GroupVersionResource{Group: "corral.dev", Version: "v1alpha1", Resource: v1alpha1.QueuePlural}

// queueObject is a Queue as a user writes it; resources maps a resource
// name to {guaranteed, limit, weight} ("" or nil: unset).
func queueObject(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "corral.dev/v1alpha1", "kind": "Queue",
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}
}

func createQueue(ctx context.Context, c *framework.Cluster, name string, spec map[string]any) error {
	_, err := c.Dynamic.Resource(queueGVR).Create(ctx, queueObject(name, spec), metav1.CreateOptions{})
	return err
}

// TestQueueCRDValidation: the API server refuses what one Queue object can
// get wrong (limit below quota, a weight of 0, itself as parent, the name
// root, a default namespace it does not admit) and takes good ones,
// quantities written as strings or as integers.
func TestQueueCRDValidation(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	ctx := context.Background()
	res := func(r ...map[string]any) []any {
		var out []any
		for _, m := range r {
			out = append(out, m)
		}
		return out
	}
	cases := map[string]struct {
		name    string
		spec    map[string]any
		wantErr string // "" = accepted
	}{
		"good": {"good", map[string]any{"resources": res(
			map[string]any{"name": "gpu/H100", "guaranteed": "8", "limit": "16", "weight": "2"},
			map[string]any{"name": "cpu", "guaranteed": "500m", "limit": 2},
			map[string]any{"name": "nvidia.com/gpu", "guaranteed": 4, "limit": 4},
		), "weight": "0.5", "namespaces": []any{"a", "b"}, "defaultForNamespaces": []any{"a"}, "reclaimPolicy": "Preempt"}, ""},
		"limit below quota": {"low-limit", map[string]any{"resources": res(
			map[string]any{"name": "gpu/H100", "guaranteed": "8", "limit": "4"})}, "limit must be at least guaranteed"},
		"limit below quota, integers": {"low-limit-int", map[string]any{"resources": res(
			map[string]any{"name": "memory", "guaranteed": "2Gi", "limit": 1024})}, "limit must be at least guaranteed"},
		"zero weight": {"zero-weight", map[string]any{"resources": res(
			map[string]any{"name": "gpu/H100", "weight": "0"})}, "weight must be positive"},
		"negative quota": {"negative", map[string]any{"resources": res(
			map[string]any{"name": "cpu", "guaranteed": "-1"})}, "guaranteed must not be negative"},
		"own parent":             {"selfish", map[string]any{"parent": "selfish"}, "a queue cannot be its own parent"},
		"reserved name":          {"root", map[string]any{}, "the name root is reserved"},
		"bad resource name":      {"bad-name", map[string]any{"resources": res(map[string]any{"name": "gpu//H100"})}, "name must be a resource name"},
		"default not admitted":   {"bad-default", map[string]any{"namespaces": []any{"a"}, "defaultForNamespaces": []any{"b"}}, "every namespace in defaultForNamespaces must be in namespaces"},
		"unknown reclaim policy": {"bad-policy", map[string]any{"reclaimPolicy": "Sometimes"}, "Unsupported value"},
		"strict reclaim policy":  {"strict", map[string]any{"reclaimPolicy": "Strict"}, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := createQueue(ctx, c, tc.name, tc.spec)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted; want an error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
	// The default reclaim policy is filled in by the schema.
	u, err := c.Dynamic.Resource(queueGVR).Create(ctx, queueObject("plain", map[string]any{}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(u.Object, "spec", "reclaimPolicy"); p != "Never" {
		t.Errorf("default reclaimPolicy = %q, want Never", p)
	}
}

// queuePod is a bare 1-GPU corral pod in a queue ("" = no label).
func queuePod(ns, name, q string, gpus int, ann map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}, Annotations: ann},
		Spec: kit.GPUPodSpec(gpus)}
	if q != "" {
		p.Labels[v1alpha1.LabelQueue] = q
	}
	return p
}

func queueCondition(t *testing.T, c *framework.Cluster, name string) (status, reason, message string) {
	t.Helper()
	u, err := c.Dynamic.Resource(queueGVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", "", err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, ci := range conds {
		m := ci.(map[string]any)
		if m["type"] == v1alpha1.QueueConditionAccepted {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
		}
	}
	return "", "", "no Accepted condition"
}

// TestQueueAdmission: pods naming a queue that does not exist, an inner
// queue, or a queue their namespace may not use, and pods with no queue
// where the namespace has no default, wait with a precise reason and an
// event and are never bound; a good pod, and a pod of a namespace with a
// default queue, bind. Each Queue's status says whether it is in the tree.
func TestQueueAdmission(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.AddRacks(t, c, 1, 2)
	nsA := kit.Namespace(t, c, "team-a-")
	nsB := kit.Namespace(t, c, "team-b-")
	ctx := context.Background()
	for name, spec := range map[string]map[string]any{
		"org":    {},
		"team-a": {"parent": "org", "namespaces": []any{nsA}, "defaultForNamespaces": []any{nsA}},
		"team-x": {"parent": "org"},
		"orphan": {"parent": "nope"},
	} {
		if err := createQueue(ctx, c, name, spec); err != nil {
			t.Fatal(err)
		}
	}
	startCorral(t, c)

	for _, p := range []*corev1.Pod{
		queuePod(nsA, "good", "team-a", 1, nil),
		queuePod(nsA, "by-default", "", 1, nil),
		queuePod(nsA, "unknown", "nope", 1, nil),
		queuePod(nsA, "inner", "org", 1, nil),
		queuePod(nsA, "orphaned", "orphan", 1, nil),
		queuePod(nsB, "denied", "team-a", 1, nil),
		queuePod(nsB, "no-default", "", 1, nil),
	} {
		if _, err := c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	type key struct{ ns, name string }
	want := map[key]struct{ reason, text string }{
		{nsA, "unknown"}:    {"UnknownQueue", `queue "nope" does not exist`},
		{nsA, "inner"}:      {"NotLeaf", `queue "org" is not a leaf queue; submit to one of its leaves (team-a, team-x)`},
		{nsA, "orphaned"}:   {"InvalidQueue", `queue "orphan" is invalid: unknown parent "nope"`},
		{nsB, "denied"}:     {"NamespaceDenied", fmt.Sprintf("namespace %q may not submit to queue \"team-a\" (it admits namespaces %s)", nsB, nsA)},
		{nsB, "no-default"}: {"NoDefault", fmt.Sprintf("namespace %q has no default queue", nsB)},
	}
	eventually(t, 60*time.Second, "refusals on the bad pods, the good pods bound", func() (bool, string) {
		for k, w := range want {
			p, err := c.Client.CoreV1().Pods(k.ns).Get(ctx, k.name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if p.Spec.NodeName != "" {
				t.Fatalf("%s was bound despite its queue", k.name)
			}
			reason, msg := scheduledCondition(p)
			if reason != w.reason || !strings.Contains(msg, w.text) {
				return false, fmt.Sprintf("%s: %s %q", k.name, reason, msg)
			}
		}
		for _, name := range []string{"good", "by-default"} {
			p, err := c.Client.CoreV1().Pods(nsA).Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Spec.NodeName == "" {
				return false, name + " not bound"
			}
		}
		return true, ""
	})
	// The refusal is an event too.
	eventually(t, 30*time.Second, "a FailedScheduling event on the denied pod", func() (bool, string) {
		evs, err := c.Client.EventsV1().Events(nsB).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "denied" && e.Reason == "FailedScheduling" && strings.Contains(e.Note, "may not submit to queue") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, none for pod denied", len(evs.Items))
	})
	// Queue status: Accepted on the tree, with the reason on the orphan.
	eventually(t, 30*time.Second, "Queue conditions", func() (bool, string) {
		for name, want := range map[string][2]string{
			"team-a": {"True", v1alpha1.QueueReasonActive},
			"org":    {"True", v1alpha1.QueueReasonActive},
			"orphan": {"False", v1alpha1.QueueReasonInvalid},
		} {
			st, reason, msg := queueCondition(t, c, name)
			if st != want[0] || reason != want[1] {
				return false, fmt.Sprintf("%s: %s %s %q", name, st, reason, msg)
			}
			if name == "orphan" && msg != `unknown parent "nope"` {
				return false, "orphan message " + msg
			}
		}
		return true, ""
	})
	eventually(t, 30*time.Second, "an Invalid event on the orphan Queue", func() (bool, string) {
		evs, err := c.Client.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Queue" && e.Regarding.Name == "orphan" && e.Reason == v1alpha1.QueueReasonInvalid &&
				e.Type == corev1.EventTypeWarning && e.Note == `unknown parent "nope"` {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, none for Queue orphan", len(evs.Items))
	})
	// Still never bound.
	for k := range want {
		p, err := c.Client.CoreV1().Pods(k.ns).Get(ctx, k.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Errorf("%s bound", k.name)
		}
	}
}

// TestQueueReclaimEvictsThroughEvictionAPI: a queue whose guarantee was
// lent takes it back. Two borrower jobs fill the node; the one that loses
// less work on a restart (a short restart overhead) is evicted through the
// Eviction API with a DisruptionTarget condition and an event naming the
// preemptor; the other keeps running, and the owner's pod binds.
// reclaimSetup starts a cluster with one 8-GPU node, the queues "owner"
// (a guarantee of 8 H100s, reclaimPolicy Preempt) and "borrower" (none), and
// corral; the borrower fills the node with two bound 4-GPU pods: restarting
// "dear" costs 4 GPUs x 2 h of warm-up, "cheap" 4 GPUs x 1 min.
// oneNodeWithQueues starts a cluster with the Queue CRD and one ready
// 8-GPU H100 node, n0.
func oneNodeWithQueues(t *testing.T) *framework.Cluster {
	t.Helper()
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	ctx := context.Background()
	if _, err := c.AddGPUNode(ctx, framework.NodeSpec{Name: "n0", GPUs: 8, Labels: map[string]string{v1alpha1.LabelGPUModel: "H100"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitNodeReady(ctx, "n0"); err != nil {
		t.Fatal(err)
	}
	return c
}

func reclaimSetup(t *testing.T) (c *framework.Cluster, nsOwner, nsBorrow string) {
	t.Helper()
	c = oneNodeWithQueues(t)
	ctx := context.Background()
	nsOwner = kit.Namespace(t, c, "owner-")
	nsBorrow = kit.Namespace(t, c, "borrower-")
	if err := createQueue(ctx, c, "owner", map[string]any{"namespaces": []any{nsOwner}, "reclaimPolicy": "Preempt",
		"resources": []any{map[string]any{"name": "gpu/H100", "guaranteed": "8"}}}); err != nil {
		t.Fatal(err)
	}
	if err := createQueue(ctx, c, "borrower", map[string]any{"namespaces": []any{nsBorrow}}); err != nil {
		t.Fatal(err)
	}
	startCorral(t, c)
	for name, overhead := range map[string]string{"cheap": "1m", "dear": "2h"} {
		p := queuePod(nsBorrow, name, "borrower", 4, map[string]string{
			v1alpha1.AnnotationRestartOverhead: overhead, v1alpha1.AnnotationPreemptible: "true"})
		if _, err := c.Client.CoreV1().Pods(nsBorrow).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "the borrower's pods bound", func() (bool, string) {
		for _, name := range []string{"cheap", "dear"} {
			p, err := c.Client.CoreV1().Pods(nsBorrow).Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Spec.NodeName == "" {
				return false, name + " not bound"
			}
		}
		return true, ""
	})
	return c, nsOwner, nsBorrow
}

func TestQueueReclaimEvictsThroughEvictionAPI(t *testing.T) {
	c, nsOwner, nsBorrow := reclaimSetup(t)
	ctx := context.Background()

	// Watch the victims from here on: the DisruptionTarget condition that
	// names the preemptor is rewritten by the Eviction API a moment later.
	w, err := c.Client.CoreV1().Pods(nsBorrow).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := c.Client.CoreV1().Pods(nsOwner).Create(ctx, queuePod(nsOwner, "owner", "owner", 4, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	preemptor := "pod/" + nsOwner + "/owner"

	var condition *corev1.PodCondition
	timeout := time.After(60 * time.Second)
	for condition == nil {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Modified && ev.Type != watch.Deleted) {
				continue
			}
			for _, cd := range p.Status.Conditions {
				if cd.Type == corev1.DisruptionTarget && cd.Reason == corev1.PodReasonPreemptionByScheduler {
					if p.Name != "cheap" {
						t.Fatalf("%s got the preemption condition; want cheap (the cheaper restart)", p.Name)
					}
					cd := cd
					condition = &cd
				}
			}
		case <-timeout:
			t.Fatal("no pod got a DisruptionTarget condition with reason PreemptionByScheduler")
		}
	}
	if !strings.Contains(condition.Message, "reclaimed for job "+preemptor) {
		t.Errorf("condition message %q does not name the preemptor %s", condition.Message, preemptor)
	}

	eventually(t, 60*time.Second, "cheap evicted, dear running, owner bound", func() (bool, string) {
		cheap, err := c.Client.CoreV1().Pods(nsBorrow).Get(ctx, "cheap", metav1.GetOptions{})
		if err == nil && cheap.DeletionTimestamp == nil {
			return false, "cheap not evicted"
		}
		dear, err := c.Client.CoreV1().Pods(nsBorrow).Get(ctx, "dear", metav1.GetOptions{})
		if err != nil || dear.DeletionTimestamp != nil || dear.Spec.NodeName == "" {
			t.Fatalf("dear was touched: %v", err)
		}
		return podBound(ctx, c, nsOwner, "owner")
	})
	// The owner's status shows what it holds and its fair share.
	eventually(t, 30*time.Second, "the owner Queue's status", func() (bool, string) {
		u, err := c.Dynamic.Resource(queueGVR).Get(ctx, "owner", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		alloc, _, _ := unstructured.NestedString(u.Object, "status", "allocated", "gpu/H100")
		fair, _, _ := unstructured.NestedString(u.Object, "status", "fairShare", "gpu/H100")
		return alloc == "4" && fair != "", fmt.Sprintf("allocated %q, fair share %q", alloc, fair)
	})
	eventually(t, 30*time.Second, "a Reclaimed event on the victim naming the preemptor", func() (bool, string) {
		evs, err := c.Client.EventsV1().Events(nsBorrow).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "cheap" && e.Reason == string(engine.CauseReclaim) && strings.Contains(e.Note, preemptor) &&
				strings.Contains(e.Note, "GPU-hours of work lost") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, no Reclaimed one for cheap", len(evs.Items))
	})
}

// TestQueueReclaimHonoursDisruptionBudgets: when a PodDisruptionBudget
// forbids evicting the borrower's pods, the reclaim's eviction is refused:
// the victims keep running, the refusal is an EvictionFailed event, and the
// owner waits.
func TestQueueReclaimHonoursDisruptionBudgets(t *testing.T) {
	c, nsOwner, nsBorrow := reclaimSetup(t)
	ctx := context.Background()
	zero := intstr.FromInt32(0)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "keep", Namespace: nsBorrow},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelQueue: "borrower"}}}}
	if _, err := c.Client.PolicyV1().PodDisruptionBudgets(nsBorrow).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the budget observed", func() (bool, string) {
		got, err := c.Client.PolicyV1().PodDisruptionBudgets(nsBorrow).Get(ctx, "keep", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == 2,
			fmt.Sprintf("observed %d/%d, healthy %d", got.Status.ObservedGeneration, got.Generation, got.Status.CurrentHealthy)
	})
	if _, err := c.Client.CoreV1().Pods(nsOwner).Create(ctx, queuePod(nsOwner, "owner", "owner", 4, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "an EvictionFailed event on cheap", func() (bool, string) {
		evs, err := c.Client.EventsV1().Events(nsBorrow).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "cheap" && e.Reason == "EvictionFailed" && strings.Contains(e.Note, "disruption budget") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, no EvictionFailed for cheap", len(evs.Items))
	})
	for _, name := range []string{"cheap", "dear"} {
		p, err := c.Client.CoreV1().Pods(nsBorrow).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
			t.Errorf("%s was evicted despite the budget: %v", name, err)
		}
	}
	owner, err := c.Client.CoreV1().Pods(nsOwner).Get(ctx, "owner", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if owner.Spec.NodeName != "" {
		t.Errorf("the owner was bound onto GPUs the budget kept")
	}
}

// TestStrictReclaimTakesAWholeNodeBorrower: the borrower queue's one 8-GPU
// pod holds its own 4-GPU guarantee and the owner's. Under reclaimPolicy
// Preempt no reclaim may take it (its queue would drop below its own
// guarantee), and the owner's pod waits; switched to Strict, the owner's
// queue takes it back.
func TestStrictReclaimTakesAWholeNodeBorrower(t *testing.T) {
	c := oneNodeWithQueues(t)
	ctx := context.Background()
	nsOwner, nsBorrow := kit.Namespace(t, c, "owner-"), kit.Namespace(t, c, "borrower-")
	half := []any{map[string]any{"name": "gpu/H100", "guaranteed": "4"}}
	if err := createQueue(ctx, c, "owner", map[string]any{"namespaces": []any{nsOwner}, "reclaimPolicy": "Preempt", "resources": half}); err != nil {
		t.Fatal(err)
	}
	if err := createQueue(ctx, c, "borrower", map[string]any{"namespaces": []any{nsBorrow}, "resources": half}); err != nil {
		t.Fatal(err)
	}
	startCorral(t, c)
	big := queuePod(nsBorrow, "big", "borrower", 8, map[string]string{v1alpha1.AnnotationPreemptible: "true"})
	if _, err := c.Client.CoreV1().Pods(nsBorrow).Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the borrower's pod bound", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(nsBorrow).Get(ctx, "big", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", "big not bound"
	})
	if _, err := c.Client.CoreV1().Pods(nsOwner).Create(ctx, queuePod(nsOwner, "owner", "owner", 4, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the owner's pod waiting, its reason naming Strict", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(nsOwner).Get(ctx, "owner", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		reason, message := scheduledCondition(p)
		return p.Spec.NodeName == "" && strings.Contains(message, "reclaimPolicy Strict would take a borrower below its own queue's guarantee"),
			fmt.Sprintf("node %q, condition %q %q", p.Spec.NodeName, reason, message)
	})
	if p, err := c.Client.CoreV1().Pods(nsBorrow).Get(ctx, "big", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("under Preempt the borrower's pod was evicted: %v", err)
	}

	strict := []byte(`{"spec":{"reclaimPolicy":"Strict"}}`)
	if _, err := c.Dynamic.Resource(queueGVR).Patch(ctx, "owner", types.MergePatchType, strict, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "big evicted and the owner's pod bound under Strict", func() (bool, string) {
		if p, err := c.Client.CoreV1().Pods(nsBorrow).Get(ctx, "big", metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
			return false, "big not evicted"
		}
		return podBound(ctx, c, nsOwner, "owner")
	})
}

// podBound is an eventually condition: the pod is bound, else its
// PodScheduled condition.
func podBound(ctx context.Context, c *framework.Cluster, ns, name string) (bool, string) {
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	if p.Spec.NodeName == "" {
		reason, message := scheduledCondition(p)
		return false, fmt.Sprintf("%s not bound: %s %s", name, reason, message)
	}
	return true, ""
}
