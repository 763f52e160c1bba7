package kube

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// remediate carries out the plan's health decisions: failure evictions (a
// pod on a node that failed as a whole is deleted at once, since no kubelet
// will finish a graceful exit; others go through the Eviction API), events
// on the pods and on the failed nodes, metrics, pins for the replacement
// ranks, and, when the operator enabled it, a cordon on nodes with failed
// GPUs. Then it reports the pods another component deleted from a failure
// first (reportLeaving).
func (s *Scheduler) remediate(ctx context.Context, w *world, plan engine.Plan) {
	h := s.health
	if p := strings.Join(plan.Stats.HealthProblems, "; "); p != h.problems {
		// A spare naming a level or domain the cluster lacks, a failure on
		// an unknown node: said once, not every cycle.
		h.problems = p
		if p != "" {
			s.log.Warn("health input not applied", "problems", p)
		}
	}
	if p := strings.Join(plan.PoolProblems, "; "); p != h.poolProblems {
		// A configured pool the cluster cannot hold (no node with its
		// labels, too few GPUs of its model): said once.
		h.poolProblems = p
		if p != "" {
			s.log.Warn("pool not applied", "problems", p)
		}
	}
	waiting := map[string]bool{}
	for _, r := range plan.Remediations {
		if r.Action == workload.WaitForRepair {
			// Decided again every cycle while the job waits: count and
			// report it once.
			key := "wait/" + string(r.Job)
			waiting[key] = true
			if h.reported[key] {
				continue
			}
			h.reported[key] = true
			if kj := w.byID[r.Job]; kj != nil {
				s.reporter.event(kj.pods[kj.refs[0]], corev1.EventTypeWarning, "WaitingForRepair", "Remediate", "%s", r.Message)
			}
		}
		h.remediations.WithLabelValues(string(r.Action)).Inc()
		if r.Action == workload.ReplaceRanks {
			pin := engine.Pin{Level: r.Level, Domain: r.Domain}
			h.pins[r.Job] = pin
			if kj := w.byID[r.Job]; kj != nil {
				s.persistPin(ctx, kj, pin, r.Pods)
			}
		}
		for _, f := range r.Failed {
			if n, first := s.reportRepair(f, string(r.Job)); first && s.opts.CordonFailedNodes && !n.Spec.Unschedulable && !h.cordoned[f.Node] {
				s.cordon(ctx, n)
			}
		}
	}
	for key := range h.reported {
		if strings.HasPrefix(key, "wait/") && !waiting[key] {
			delete(h.reported, key)
		}
	}
	for _, ev := range plan.Evictions {
		if ev.Cause != engine.CauseFailure {
			continue // other causes are carried out by the preemption path
		}
		kj := w.byID[ev.Job]
		if kj == nil {
			continue
		}
		evicted := 0
		for _, ref := range ev.Pods {
			p := kj.pods[ref]
			if p == nil {
				continue
			}
			if err := s.evictFailed(ctx, p, h.failed[p.Spec.NodeName]); err != nil {
				s.log.Warn("remediation eviction", "pod", p.Namespace+"/"+p.Name, "err", err)
				continue
			}
			evicted++
			h.remediated[p.UID] = true
			s.reporter.event(p, corev1.EventTypeWarning, string(engine.CauseFailure), "Evict", "%s (%.0f GPU-hours of work since the last checkpoint lost)",
				ev.Message, ev.LostGPUSeconds/3600)
		}
		// Counted with the other causes' evictions (cycle.go), so that
		// corral_evictions_total{cause} covers every cause a Plan's stats
		// count.
		s.metrics.queue.evictions.WithLabelValues(string(ev.Cause)).Add(float64(evicted))
		if evicted > 0 {
			s.metrics.queue.lostGPUSeconds.WithLabelValues(string(ev.Cause)).Add(ev.LostGPUSeconds)
		}
	}
	s.reportLeaving(ctx, w)
}

func (s *Scheduler) evictFailed(ctx context.Context, p *corev1.Pod, nodeFailed bool) error {
	if nodeFailed {
		zero := int64(0)
		err := s.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
			Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}}
	err := s.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (s *Scheduler) cordon(ctx context.Context, n *corev1.Node) {
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := s.client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.log.Warn("cordoning a failed node", "node", n.Name, "err", err)
		return
	}
	s.health.cordoned[n.Name] = true
	s.reporter.event(n, corev1.EventTypeWarning, "Cordoned", "Cordon", "cordoned by corral: a GPU failed (--cordon-failed-nodes)")
}

// nodeByName reads one node from the informer's store.
func (c *Cache) nodeByName(name string) (*corev1.Node, bool) {
	o, ok, err := c.nodes.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	n, ok := o.(*corev1.Node)
	return n, ok
}
