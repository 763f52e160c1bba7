package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/engine"
)

// queueStatuses is what each Queue's status should say after a cycle:
// Accepted from the engine's Problem (the adapter's conversion problems
// reach it as the spec's Problem), the figures from the plan. A Queue the
// plan does not list (the engine ran without queues) is shown accepted
// with no figures.
func queueStatuses(qs *queueSet, plan []engine.QueueStatus, gpuResource string) map[string]v1alpha1.QueueStatus {
	byName := map[string]engine.QueueStatus{}
	for _, s := range plan {
		byName[s.Name] = s
	}
	out := map[string]v1alpha1.QueueStatus{}
	for _, name := range qs.names {
		ps := byName[name]
		st := v1alpha1.QueueStatus{
			Allocated: resourceList(ps.Allocated, gpuResource),
			FairShare: resourceList(ps.FairShare, gpuResource),
			Pending:   resourceList(ps.Pending, gpuResource),
			Borrowed:  resourceList(ps.Borrowed, gpuResource),
		}
		c := metav1.Condition{Type: v1alpha1.QueueConditionAccepted, Status: metav1.ConditionTrue,
			Reason: v1alpha1.QueueReasonActive, Message: "the queue is in the scheduler's queue tree"}
		if ps.Leaf {
			c.Message += " and takes jobs"
		}
		if ps.Problem != "" {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.QueueReasonInvalid, ps.Problem
		}
		st.Conditions = []metav1.Condition{c}
		out[name] = st
	}
	return out
}

// queueStatus writes every Queue's status that changed, from the
// informer's copy: an unchanged queue costs no call.
func (r *reporter) queueStatus(ctx context.Context, c *Cache, want map[string]v1alpha1.QueueStatus) error {
	if r.dynamic == nil || c.queues == nil {
		return nil
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []string
	for _, name := range names {
		o, ok, err := c.queues.GetStore().GetByKey(name)
		if err != nil || !ok {
			continue
		}
		u := o.(*unstructured.Unstructured).DeepCopy()
		var old v1alpha1.QueueStatus
		if raw, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
			// A status that does not decode is rewritten whole.
			_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &old)
		}
		next := want[name]
		conds := append([]metav1.Condition(nil), old.Conditions...)
		changed := false
		for _, cond := range next.Conditions {
			cond.ObservedGeneration = u.GetGeneration()
			if meta.SetStatusCondition(&conds, cond) {
				changed = true
			}
		}
		next.Conditions = conds
		if changed {
			// kubectl describe shows a queue's history, e.g. when an edit to
			// its parent left it out of the tree.
			if c := meta.FindStatusCondition(conds, v1alpha1.QueueConditionAccepted); c != nil {
				kind := corev1.EventTypeNormal
				if c.Status != metav1.ConditionTrue {
					kind = corev1.EventTypeWarning
				}
				r.event(u, kind, c.Reason, "Validate", "%s", c.Message)
			}
		}
		if !changed && sameList(old.Allocated, next.Allocated) && sameList(old.FairShare, next.FairShare) &&
			sameList(old.Pending, next.Pending) && sameList(old.Borrowed, next.Borrowed) {
			continue
		}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&next)
		if err != nil {
			return err
		}
		u.Object["status"] = raw
		if _, err := r.dynamic.Resource(queueGVR).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Sprintf("Queue %s status: %v", name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// queueMetrics are the per-queue figures, in base units (GPUs, cores,
// bytes, devices), labelled by queue and by resource as spec.resources
// names it.
type queueMetrics struct {
	allocated, fairShare, pending, borrowed *prometheus.GaugeVec
	accepted                                *prometheus.GaugeVec
	evictions                               *prometheus.CounterVec
	lostGPUSeconds                          *prometheus.CounterVec
}

func newQueueMetrics() *queueMetrics {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"queue", "resource"})
	}
	return &queueMetrics{
		allocated: gauge("corral_queue_allocated", "What the queue's running pods hold, per resource (GPUs, cores, bytes, devices)."),
		fairShare: gauge("corral_queue_fair_share", "The queue's fair share, per resource."),
		pending:   gauge("corral_queue_pending", "What the queue's waiting pods ask for, per resource."),
		borrowed:  gauge("corral_queue_borrowed", "What the queue holds above its guarantee, per resource."),
		accepted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corral_queue_accepted",
			Help: "1 if the queue is in the scheduler's queue tree, 0 if it is left out (see its Accepted condition)."}, []string{"queue"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_evictions_total",
			Help: "Pods evicted by the scheduler, by cause (Preempted, Reclaimed, Consolidated, Shrunk, DeviceFailed, ...)."}, []string{"cause"}),
		lostGPUSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_evictions_lost_gpu_seconds_total",
			Help: "GPU-seconds of work the scheduler's evictions threw away (GPUs x time since the last checkpoint, plus restart overhead), by cause."}, []string{"cause"}),
	}
}

func (m *queueMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.allocated, m.fairShare, m.pending, m.borrowed, m.accepted, m.evictions, m.lostGPUSeconds}
}

// set replaces the per-queue gauges with this cycle's statuses, so that a
// deleted queue or a resource it no longer uses disappears.
func (m *queueMetrics) set(statuses map[string]v1alpha1.QueueStatus) {
	for _, g := range []*prometheus.GaugeVec{m.allocated, m.fairShare, m.pending, m.borrowed, m.accepted} {
		g.Reset()
	}
	for name, st := range statuses {
		for _, f := range []struct {
			g *prometheus.GaugeVec
			l corev1.ResourceList
		}{{m.allocated, st.Allocated}, {m.fairShare, st.FairShare}, {m.pending, st.Pending}, {m.borrowed, st.Borrowed}} {
			for r, q := range f.l {
				f.g.WithLabelValues(name, string(r)).Set(q.AsApproximateFloat64())
			}
		}
		v := 0.0
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.QueueConditionAccepted); c != nil && c.Status == metav1.ConditionTrue {
			v = 1
		}
		m.accepted.WithLabelValues(name).Set(v)
	}
}
