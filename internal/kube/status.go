package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/corral-dev/corral/api/v1alpha1"
)

// Condition reasons corral writes on PodScheduled=False.
const (
	// ReasonUnschedulable: the job waits for capacity, or can never fit;
	// the message says which and why.
	ReasonUnschedulable = corev1.PodReasonUnschedulable
	// ReasonInvalid: the pod or its job is written in a way corral cannot
	// schedule (a malformed annotation, a claim with an unknown DeviceClass).
	ReasonInvalid = "Invalid"
	// ReasonGangIncomplete: the gang has fewer pods (or claims) than it needs
	// yet.
	ReasonGangIncomplete = "GangIncomplete"
	// ReasonQueueLimit: the job fits the cluster, but its queue (or an
	// ancestor) is at its limit.
	ReasonQueueLimit = "QueueLimit"
	// ReasonQueueRefused: the engine refused the job's queue and named no
	// refusal. It normally names one (UnknownQueue, InvalidQueue, NotLeaf,
	// NamespaceDenied, NoDefault), which is written instead.
	ReasonQueueRefused = "QueueRefused"
)

// reporter tells users why their pods wait: a PodScheduled=False condition
// with corral's reason and an event, each written only when the message
// changes so that a waiting pod costs no API traffic per cycle.
type reporter struct {
	client   kubernetes.Interface
	dynamic  dynamic.Interface
	recorder events.EventRecorder
	now      func() time.Time
	fence    *Fence // status that changes scheduling is written only while the Lease is held
	// written remembers when each waiting pod's condition was last written,
	// so that a message whose numbers change every cycle (free GPUs in the
	// best rack) is refreshed at most every refreshAfter. Used by the cycle
	// goroutine only.
	written map[types.UID]time.Time
}

// refreshAfter bounds how often a waiting pod's unchanged reason is
// rewritten with new numbers.
const refreshAfter = 30 * time.Second

// pending marks every unbound pod of a job with why it waits; a gang whose
// minimum was capped says so too (gangmin.go).
func (r *reporter) pending(ctx context.Context, kj *kjob, reason, message string) error {
	if kj.capped != "" {
		message += "; " + kj.capped
	}
	for _, ref := range kj.refs {
		if _, bound := kj.bound[ref]; bound {
			continue
		}
		p := kj.pods[ref]
		if hasCondition(p, reason, message) {
			continue
		}
		if err := r.fence.Check(); err != nil {
			return err
		}
		if last, ok := r.written[p.UID]; ok && sameReason(p, reason, message) && r.now().Sub(last) < refreshAfter {
			continue
		}
		if r.written == nil {
			r.written = map[types.UID]time.Time{}
		}
		r.written[p.UID] = r.now()
		patch, err := json.Marshal(map[string]any{
			"status": map[string]any{
				"conditions": []corev1.PodCondition{{
					Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					Reason: reason, Message: message, LastTransitionTime: metav1.Now(),
				}},
			},
		})
		if err != nil {
			return err
		}
		if _, err := r.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch,
			metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("pod %s/%s: writing PodScheduled: %w", p.Namespace, p.Name, err)
		}
		if r.recorder != nil {
			r.recorder.Eventf(p, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", message)
		}
	}
	return nil
}

// scheduled records an event for a bound pod.
func (r *reporter) scheduled(p *corev1.Pod, node, detail string) {
	if r.recorder != nil {
		r.recorder.Eventf(p, nil, corev1.EventTypeNormal, "Scheduled", "Binding",
			"Successfully assigned %s/%s to %s%s", p.Namespace, p.Name, node, detail)
	}
}

// event records an event about any object (a pod, a PodGroup).
func (r *reporter) event(obj runtime.Object, eventType, reason, action, format string, args ...any) {
	if r.recorder != nil {
		r.recorder.Eventf(obj, nil, eventType, reason, action, format, args...)
	}
}

// forget drops what is remembered of pods that no longer wait.
func (r *reporter) forget(waiting map[types.UID]bool) {
	for uid := range r.written {
		if !waiting[uid] {
			delete(r.written, uid)
		}
	}
}

// sameReason reports whether the pod already shows this reason with the
// same verdict ("never fits" or not), so only numbers would change.
func sameReason(p *corev1.Pod, reason, message string) bool {
	never := strings.HasPrefix(message, "never fits")
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == reason && strings.HasPrefix(c.Message, "never fits") == never
		}
	}
	return false
}

func hasCondition(p *corev1.Pod, reason, message string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == reason && c.Message == message
		}
	}
	return false
}

// podGroupStatus writes the upstream PodGroup's scheduling condition:
// True once the gang minimum is bound, False with corral's reason while it
// waits. The condition is named PodGroupScheduled in v1alpha2 (1.36) and
// PodGroupInitiallyScheduled in v1beta1 (1.37). Written only on change.
func (r *reporter) podGroupStatus(ctx context.Context, c *Cache, namespace, name string, scheduled bool, reason, message string) error {
	if r.dynamic == nil || c.podGroups == nil {
		return nil
	}
	condType := "PodGroupScheduled"
	if c.podGroupGVR.Version == "v1beta1" {
		condType = "PodGroupInitiallyScheduled"
	}
	status := metav1.ConditionFalse
	if scheduled {
		status, reason, message = metav1.ConditionTrue, "Scheduled", "the gang minimum is bound"
	}
	res := r.dynamic.Resource(c.podGroupGVR).Namespace(namespace)
	// Compare with the informer's copy: an unchanged condition costs no call.
	o, ok, err := c.podGroups.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return err
	}
	u := o.(*unstructured.Unstructured).DeepCopy()
	var conds []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &conds)
	}
	changed := meta.SetStatusCondition(&conds, metav1.Condition{Type: condType, Status: status, Reason: reason,
		Message: message, ObservedGeneration: u.GetGeneration()})
	if !changed {
		return nil
	}
	if err := r.fence.Check(); err != nil {
		return err
	}
	b, _ := json.Marshal(conds)
	var raw []any
	_ = json.Unmarshal(b, &raw)
	if err := unstructured.SetNestedSlice(u.Object, raw, "status", "conditions"); err != nil {
		return err
	}
	if _, err = res.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if scheduled {
		r.event(u, corev1.EventTypeNormal, "Scheduled", "Binding", "%s", message)
	} else {
		r.event(u, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", message)
	}
	return nil
}

// topologyStatus tells each Topology object whether the scheduler uses it
// (Accepted=True, InUse, with the nodes it covers) or why not. Written only
// on change, from the informer's copy.
func (r *reporter) topologyStatus(ctx context.Context, c *Cache, w *world) error {
	if r.dynamic == nil || c.topologies == nil {
		return nil
	}
	covered := 0
	for n := 0; n < w.state.NumNodes(); n++ {
		labels := w.state.Node(n).Labels
		all := true
		for _, l := range w.levelLabels {
			if _, ok := labels[l]; !ok {
				all = false
			}
		}
		if all {
			covered++
		}
	}
	type want struct {
		status          metav1.ConditionStatus
		reason, message string
		nodes           int64
	}
	wants := map[string]want{}
	if w.topology.inUse != "" {
		wants[w.topology.inUse] = want{metav1.ConditionTrue, v1alpha1.TopologyReasonInUse,
			fmt.Sprintf("the scheduler builds its topology tree from this object (%d nodes carry every level's label)", covered), int64(covered)}
	}
	for name, why := range w.topology.invalid {
		wants[name] = want{metav1.ConditionFalse, v1alpha1.TopologyReasonInvalid, why, 0}
	}
	for _, name := range w.topology.notUsed {
		msg := "another Topology is in use"
		if w.topologyErr != "" {
			msg = w.topologyErr
		}
		wants[name] = want{metav1.ConditionFalse, v1alpha1.TopologyReasonNotSelected, msg, 0}
	}
	names := make([]string, 0, len(wants))
	for name := range wants {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		wt := wants[name]
		o, ok, err := c.topologies.GetStore().GetByKey(name)
		if err != nil || !ok {
			continue
		}
		u := o.(*unstructured.Unstructured).DeepCopy()
		var conds []metav1.Condition
		if raw, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
			b, _ := json.Marshal(raw)
			_ = json.Unmarshal(b, &conds)
		}
		oldNodes, _, _ := unstructured.NestedInt64(u.Object, "status", "nodes")
		changed := meta.SetStatusCondition(&conds, metav1.Condition{Type: v1alpha1.TopologyConditionAccepted,
			Status: wt.status, Reason: wt.reason, Message: wt.message, ObservedGeneration: u.GetGeneration()})
		if !changed && oldNodes == wt.nodes {
			continue
		}
		b, _ := json.Marshal(conds)
		var raw []any
		_ = json.Unmarshal(b, &raw)
		if err := unstructured.SetNestedSlice(u.Object, raw, "status", "conditions"); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, wt.nodes, "status", "nodes"); err != nil {
			return err
		}
		if _, err := r.dynamic.Resource(topologyGVR).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("Topology %s status: %w", name, err)
		}
	}
	return nil
}
