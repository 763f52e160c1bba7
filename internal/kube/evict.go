package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// evictionBackoff is how long corral waits before it tries again to evict a
// pod whose eviction a PodDisruptionBudget refused: the engine asks for it
// every cycle, and each try writes a condition and an event.
const evictionBackoff = 30 * time.Second

// evictionMessage is the one line users read on the victim's condition and
// events: the cause, the preemptor and the work lost.
func evictionMessage(ev engine.Eviction) string {
	var b strings.Builder
	switch ev.Cause {
	case engine.CausePreempt:
		b.WriteString("preempted")
	case engine.CauseReclaim:
		b.WriteString("reclaimed")
	case engine.CauseConsolidate:
		b.WriteString("moved to consolidate free GPUs")
	case engine.CauseShrink:
		b.WriteString("shrunk to its minimum")
	case engine.CauseMaxRuntime:
		b.WriteString("stopped at its max runtime")
	case engine.CauseRollback:
		b.WriteString("gang rolled back")
	default:
		b.WriteString("evicted (" + string(ev.Cause) + ")")
	}
	if ev.By != "" {
		fmt.Fprintf(&b, " for job %s", ev.By)
	}
	if ev.Message != "" {
		b.WriteString(": " + ev.Message)
	}
	fmt.Fprintf(&b, "; %.2f GPU-hours of work lost", ev.LostGPUSeconds/3600)
	return b.String()
}

// evict carries out one eviction of the plan, a gang at a time: every pod
// first gets a DisruptionTarget condition (reason PreemptionByScheduler)
// naming the preemptor and the cause, then goes through the Eviction API,
// which honours PodDisruptionBudgets. It returns the pods evicted, and the
// nodes of every pod the plan named, evicted or not: binds there counted on
// the room. A pod whose eviction fails does not stop the others: the engine
// decided the gang goes, and a gang left below its minimum is rolled back
// later.
func (b *binder) evict(ctx context.Context, w *world, ev engine.Eviction, r *reporter) (evicted []*corev1.Pod, nodes []string, err error) {
	kj := w.byID[ev.Job]
	if kj == nil {
		return nil, nil, fmt.Errorf("plan evicts unknown job %s", ev.Job)
	}
	refs := ev.Pods
	if len(refs) == 0 {
		for _, ref := range kj.refs {
			if _, ok := kj.bound[ref]; ok {
				refs = append(refs, ref)
			}
		}
	}
	msg := evictionMessage(ev)
	for uid, at := range b.blocked {
		if b.now().Sub(at) > 10*evictionBackoff {
			delete(b.blocked, uid) // the pod is long gone or long unblocked
		}
	}
	var errs []string
	for _, ref := range refs {
		p := kj.pods[ref]
		if p == nil {
			errs = append(errs, fmt.Sprintf("plan names unknown pod %s", ref))
			continue
		}
		if node, ok := kj.bound[ref]; ok {
			nodes = append(nodes, node)
		}
		if p.Spec.NodeName == "" {
			continue // assumed only: its binding has not landed yet
		}
		if at, ok := b.blocked[p.UID]; ok && b.now().Sub(at) < evictionBackoff {
			continue // refused moments ago: already logged, with an event
		}
		if err := b.evictPod(ctx, p, "corral: "+msg, ev.By); err != nil {
			if apierrors.IsTooManyRequests(err) {
				if b.blocked == nil {
					b.blocked = map[types.UID]time.Time{}
				}
				b.blocked[p.UID] = b.now()
			}
			errs = append(errs, err.Error())
			r.event(p, corev1.EventTypeWarning, "EvictionFailed", "Evict", "%s; the eviction failed: %v", msg, err)
			continue
		}
		delete(b.blocked, p.UID)
		evicted = append(evicted, p)
		r.event(p, corev1.EventTypeWarning, string(ev.Cause), "Evict", "%s", msg)
	}
	if len(evicted) > 0 {
		if obj := b.jobObject(kj); obj != nil {
			r.event(obj, corev1.EventTypeWarning, string(ev.Cause), "Evict", "%d pods %s", len(evicted), msg)
		}
		if pk := w.byID[ev.By]; pk != nil {
			if p := firstWaiting(pk); p != nil {
				r.event(p, corev1.EventTypeNormal, "Preempting", "Evict", "evicted %d pods of job %s (%s) to make room; %.2f GPU-hours of its work lost",
					len(evicted), ev.Job, ev.Cause, ev.LostGPUSeconds/3600)
			}
		}
	}
	if len(errs) > 0 {
		return evicted, nodes, fmt.Errorf("job %s: %s", ev.Job, strings.Join(errs, "; "))
	}
	return evicted, nodes, nil
}

// evictPod evicts one pod through the Eviction API, after writing a
// DisruptionTarget condition with the message when there is one, and the
// job it makes room for (AnnotationEvictedFor) when there is one: that job
// waits for the pod to terminate, and the annotation outlives a restart.
// A pod already gone is not an error.
func (b *binder) evictPod(ctx context.Context, p *corev1.Pod, conditionMessage string, forJob workload.JobID) error {
	if err := b.fence.Check(); err != nil {
		return fmt.Errorf("evicting %s/%s: %w", p.Namespace, p.Name, err)
	}
	if forJob != "" && p.Annotations[v1alpha1.AnnotationEvictedFor] != string(forJob) {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{v1alpha1.AnnotationEvictedFor: string(forJob)}}})
		if err != nil {
			return err
		}
		if _, err := b.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s/%s: annotation %s: %w", p.Namespace, p.Name, v1alpha1.AnnotationEvictedFor, err)
		}
	}
	if conditionMessage != "" {
		if err := b.disruptionTarget(ctx, p, conditionMessage); err != nil {
			return fmt.Errorf("%s/%s: DisruptionTarget condition: %w", p.Namespace, p.Name, err)
		}
	}
	e := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	if err := b.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, e); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("evicting %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// disruptionTarget writes the DisruptionTarget condition on a pod about to
// be evicted, as kube-scheduler does before it preempts, so that the pod's
// controller (a Job's podFailurePolicy) can tell a preemption from a crash.
// The Eviction API then sets the condition's reason to EvictionByEvictionAPI
// when it marks the pod for deletion; the events keep corral's account.
func (b *binder) disruptionTarget(ctx context.Context, p *corev1.Pod, msg string) error {
	patch, err := json.Marshal(map[string]any{
		"status": map[string]any{
			"conditions": []corev1.PodCondition{{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: corev1.PodReasonPreemptionByScheduler, Message: msg,
				LastTransitionTime: metav1.NewTime(b.now()),
			}},
		},
	})
	if err != nil {
		return err
	}
	_, err = b.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// jobObject is the object a job's events go to besides its pods: its
// batch/v1 Job or PodGroup, nil for other kinds.
func (b *binder) jobObject(kj *kjob) runtime.Object {
	kind, rest, _ := strings.Cut(kj.key, "/")
	switch kind {
	case "job":
		if o, ok, err := b.cache.jobs.GetStore().GetByKey(rest); err == nil && ok {
			return o.(*batchv1.Job)
		}
	case "podgroup":
		if b.cache.podGroups == nil {
			return nil
		}
		if o, ok, err := b.cache.podGroups.GetStore().GetByKey(rest); err == nil && ok {
			return o.(*unstructured.Unstructured)
		}
	}
	return nil
}

func firstWaiting(kj *kjob) *corev1.Pod {
	for _, ref := range kj.refs {
		if _, ok := kj.bound[ref]; !ok {
			return kj.pods[ref]
		}
	}
	return nil
}
