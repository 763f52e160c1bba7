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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

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

// TestReclaimSparesAnUnsavedBorrowerForItsGrace: with the reclaim bound set
// low (1 s of progress, a 20 s grace), the owner's pod waits while the
// borrower, which reported no checkpoint, is spared, its reason saying so
// and until when; once the grace has passed the borrower is evicted and
// the owner's pod binds.
func TestReclaimSparesAnUnsavedBorrowerForItsGrace(t *testing.T) {
	c := oneNodeWithQueues(t)
	ctx := context.Background()
	nsOwner, nsBorrow := kit.Namespace(t, c, "owner-"), kit.Namespace(t, c, "borrower-")
	if err := createQueue(ctx, c, "owner", map[string]any{"namespaces": []any{nsOwner}, "reclaimPolicy": "Preempt",
		"resources": []any{map[string]any{"name": "gpu/H100", "guaranteed": "8"}}}); err != nil {
		t.Fatal(err)
	}
	if err := createQueue(ctx, c, "borrower", map[string]any{"namespaces": []any{nsBorrow}}); err != nil {
		t.Fatal(err)
	}
	const grace = 20 * time.Second
	startCorralWith(t, c, kube.Options{ReclaimMaxLost: time.Second, ReclaimGrace: grace})
	long := queuePod(nsBorrow, "long", "borrower", 8, map[string]string{v1alpha1.AnnotationPreemptible: "true"})
	if _, err := c.Client.CoreV1().Pods(nsBorrow).Create(ctx, long, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the borrower's pod bound", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(nsBorrow).Get(ctx, "long", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", "long not bound"
	})
	time.Sleep(2 * time.Second) // past the 1 s of progress the bound allows
	owner, err := c.Client.CoreV1().Pods(nsOwner).Create(ctx, queuePod(nsOwner, "owner", "owner", 8, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := owner.CreationTimestamp.Time
	eventually(t, 15*time.Second, "the owner's pod waiting, its reason saying the borrower is spared", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(nsOwner).Get(ctx, "owner", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, message := scheduledCondition(p)
		return p.Spec.NodeName == "" && strings.Contains(message, "reclaim spares 1 borrower(s)") &&
				strings.Contains(message, created.Add(grace).UTC().Format(time.RFC3339)),
			fmt.Sprintf("node %q, message %q", p.Spec.NodeName, message)
	})
	if p, err := c.Client.CoreV1().Pods(nsBorrow).Get(ctx, "long", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("the borrower was evicted within the grace: %v", err)
	}
	eventually(t, 60*time.Second, "long evicted after the grace and the owner's pod bound", func() (bool, string) {
		if p, err := c.Client.CoreV1().Pods(nsBorrow).Get(ctx, "long", metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
			return false, "long not evicted"
		}
		if since := time.Since(created); since < grace-2*time.Second {
			t.Fatalf("long evicted %v after the owner's pod was created, within the %v grace", since, grace)
		}
		return podBound(ctx, c, nsOwner, "owner")
	})
}
