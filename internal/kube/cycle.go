package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// bindDetail ends a pod's Scheduled event: its GPUs, as the assigned-gpus
// annotation lists them (not as a Go slice, "[gpu0 gpu1]"), and the domain
// its gang went to; the note that its gang minimum was capped, if it was.
func bindDetail(gb engine.GangBind, pb engine.PodBind, capped string) string {
	detail := ""
	if len(pb.Devices) > 0 {
		detail = fmt.Sprintf(" (GPUs %s; %s %s)", strings.Join(pb.Devices, ","), gb.Level, gb.Domain)
	}
	if capped != "" {
		detail += "; " + capped
	}
	return detail
}

// Cycle runs one scheduling cycle: snapshot, engine, bindings, reasons.
func (s *Scheduler) Cycle(ctx context.Context) (CycleResult, error) {
	var res CycleResult
	// Fencing (fence.go): a cycle whose writes could outlive the Lease
	// writes nothing. Checked before each batch of writes, and every
	// write's context ends when the fence closes.
	if err := s.fenced(); err != nil {
		return res, err
	}
	ctx, cancel := s.opts.Fence.Bound(ctx)
	defer cancel()
	start := s.opts.Clock()
	// Bindings whose fate a failed write left unknown are read back from
	// the API server before the snapshot counts them (bindresult.go).
	s.binder.settleDoubts(ctx)
	w, err := s.cache.buildWorld(start)
	if err != nil {
		return res, err
	}
	s.complete(w, start)
	for _, msg := range s.snapshotWarnings.fresh(w.warnings) {
		s.log.Warn("snapshot", "warning", msg)
	}
	if err := s.fenced(); err != nil {
		return res, err
	}
	if err := s.reporter.topologyStatus(ctx, s.cache, w); err != nil {
		s.log.Warn("Topology status", "err", err)
	}
	for _, rb := range w.resume {
		if err := s.binder.bindPod(ctx, w, rb.pod, engine.PodBind{Node: rb.node}); err != nil {
			res.BindErrors = append(res.BindErrors, fmt.Errorf("resuming %s/%s: %w", rb.pod.Namespace, rb.pod.Name, err))
			continue
		}
		res.PodsBound++
		s.reporter.scheduled(rb.pod, rb.node, " (its claims were already allocated)")
	}
	plan := s.engine.Cycle(w.snap)
	res.Plan = plan
	planWarnings := make([]string, 0, len(plan.Warnings))
	for _, wn := range plan.Warnings {
		planWarnings = append(planWarnings, fmt.Sprintf("job %s: %s", wn.Job, wn.Message))
	}
	for _, msg := range s.planWarnings.fresh(planWarnings) {
		s.log.Warn("plan", "warning", msg)
	}
	if err := s.fenced(); err != nil {
		return res, err
	}

	s.remediate(ctx, w, plan) // remediate.go: failure evictions, events, repair reports

	// Evictions go first: the binds of the same plan may use what they
	// free. A bind onto a node that still holds a victim waits for the
	// victim to terminate (the kubelet counts it until then), and one onto
	// a node whose eviction failed (a PodDisruptionBudget) never had room.
	evictedOn := map[string]bool{}
	victimsFor := map[workload.JobID][]string{} // this plan's evictions, by the job they make room for
	for _, ev := range plan.Evictions {
		if ev.Cause == engine.CauseFailure {
			continue // carried out by remediate
		}
		pods, nodes, err := s.binder.evict(ctx, w, ev, s.reporter)
		if err != nil {
			res.EvictErrors = append(res.EvictErrors, err)
		}
		res.PodsEvicted += len(pods)
		s.metrics.queue.evictions.WithLabelValues(string(ev.Cause)).Add(float64(len(pods)))
		if len(pods) > 0 {
			s.metrics.queue.lostGPUSeconds.WithLabelValues(string(ev.Cause)).Add(ev.LostGPUSeconds)
		}
		for _, n := range nodes {
			evictedOn[n] = true
		}
		for _, p := range pods {
			if ev.By != "" {
				victimsFor[ev.By] = append(victimsFor[ev.By], p.Namespace+"/"+p.Name)
			}
		}
	}
	// A bind onto a node with a pod this plan evicts waits a cycle: the
	// kubelet counts the pod until it has terminated. The next snapshot
	// lists it in Terminating (AnnotationEvictedFor), and the engine keeps
	// the job it was evicted for waiting until it is gone.
	held := map[workload.JobID][]string{}
	binds := plan.Binds
	if len(evictedOn) > 0 {
		binds = nil
		for _, gb := range plan.Binds {
			if onAny(gb, evictedOn) {
				held[gb.Job] = victimsFor[gb.Job]
				continue
			}
			binds = append(binds, gb)
		}
	}
	// MIG re-partitions go to the nodes' MIG managers (mig.go); the jobs
	// waiting for them are reported pending below.
	if len(plan.Repartitions) > 0 {
		if err := s.binder.repartition(ctx, plan.Repartitions); err != nil {
			s.log.Warn("MIG re-partition", "err", err)
		}
		for _, rp := range plan.Repartitions {
			s.log.Info("planned MIG re-partition", "node", rp.Node, "gpu", rp.Device,
				"layout", formatLayout(rp.Layout), "reason", rp.Reason)
		}
	}
	// The room the plan holds for members not created yet is written on
	// the binding of the gang's first pod.
	heldMsgs := w.annotateHeld(binds, plan.Held)
	// Gangs bind concurrently, each in pod order on its own worker: the
	// API round trips, not the engine, bound a cycle's throughput.
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.opts.BindWorkers)
	for _, gb := range binds {
		wg.Add(1)
		sem <- struct{}{}
		go func(gb engine.GangBind) {
			defer wg.Done()
			defer func() { <-sem }()
			n, err := s.binder.bindGang(ctx, w, gb)
			kj := w.byID[gb.Job]
			for _, pb := range gb.Pods[:n] {
				s.reporter.scheduled(kj.pods[pb.Pod], pb.Node, bindDetail(gb, pb, kj.capped))
				if msg := heldMsgs[string(kj.pods[pb.Pod].UID)]; msg != "" {
					s.reporter.event(kj.pods[pb.Pod], corev1.EventTypeNormal, "RoomHeld", "Hold", "%s", msg)
				}
			}
			s.metrics.podsBound.Add(float64(n))
			mu.Lock()
			defer mu.Unlock()
			res.PodsBound += n
			if err != nil {
				// A gang cut off mid-bind (the API server went away, a
				// conflict, the Lease) is finished by the engine from the
				// next snapshot: its missing members are tried beside the
				// bound ones first (health.Beside), and the gang is rolled
				// back (CauseRollback) once it has waited CutOffGrace.
				res.BindErrors = append(res.BindErrors, fmt.Errorf("job %s: %w", gb.Job, err))
				s.metrics.bindErrors.Inc()
			}
		}(gb)
	}
	wg.Wait()
	for job, victims := range held {
		kj := w.byID[job]
		if kj == nil {
			continue
		}
		msg := "waiting for the pods the plan evicts from its nodes to terminate (an eviction failed, or is for another job)"
		if len(victims) > 0 {
			sort.Strings(victims)
			msg = engine.WaitingForVictims(victims)
		}
		if err := s.reporter.pending(ctx, kj, ReasonUnschedulable, msg); err != nil {
			s.log.Warn("reporting", "err", err)
		}
	}
	for _, p := range plan.Pending {
		kj := w.byID[p.Job]
		if kj == nil {
			continue
		}
		// A gang below its minimum whose rest cannot join it is rolled
		// back by the engine (a CauseRollback eviction, carried out above).
		reason, msg := pendingCondition(p.Reason)
		if err := s.reporter.pending(ctx, kj, reason, msg); err != nil {
			s.log.Warn("reporting", "err", err)
		}
	}
	// Upstream PodGroups learn their state too.
	pendingReason := map[workload.JobID]engine.Reason{}
	for _, p := range plan.Pending {
		pendingReason[p.Job] = p.Reason
		if p.Reason.Verdict == placement.Refused {
			res.RefusedJobs++
		}
	}
	boundNow := map[workload.JobID]int{}
	for _, gb := range binds {
		boundNow[gb.Job] = len(gb.Pods)
	}
	for _, kj := range w.jobs {
		if kj.group == "" {
			continue
		}
		ns := kj.job.Namespace
		scheduled := len(kj.bound)+boundNow[kj.job.ID] >= kj.job.GangMin() && kj.invalid == "" && kj.waiting == ""
		why := pendingReason[kj.job.ID]
		msg, reason := why.Message, ReasonUnschedulable
		switch {
		case kj.invalid != "":
			msg, reason = kj.invalid, ReasonInvalid
		case why.Verdict == placement.Refused && !scheduled:
			reason, msg = pendingCondition(why)
		case kj.waiting != "":
			msg, reason = kj.waiting, ReasonGangIncomplete
		}
		if !scheduled && msg == "" {
			continue
		}
		if err := s.reporter.podGroupStatus(ctx, s.cache, ns, kj.group, scheduled, reason, msg); err != nil {
			s.log.Warn("PodGroup status", "podgroup", ns+"/"+kj.group, "err", err)
		}
	}

	pendingPods := 0
	waiting := map[types.UID]bool{}
	for _, kj := range w.jobs {
		if !kj.pending() {
			continue
		}
		for _, ref := range kj.refs {
			if _, ok := kj.bound[ref]; !ok {
				waiting[kj.pods[ref].UID] = true
			}
		}
		pendingPods += len(kj.refs) - len(kj.bound)
		switch {
		case kj.invalid != "":
			res.InvalidJobs++
			if err := s.reporter.pending(ctx, kj, ReasonInvalid, kj.invalid); err != nil {
				s.log.Warn("reporting", "err", err)
			}
		case kj.waiting != "":
			res.WaitingForPods++
			if err := s.reporter.pending(ctx, kj, ReasonGangIncomplete, kj.waiting); err != nil {
				s.log.Warn("reporting", "err", err)
			}
		}
	}
	s.reporter.forget(waiting)

	statuses := queueStatuses(w.queues, plan.Queues, s.opts.GPUResource)
	s.metrics.queue.set(statuses)
	if err := s.reporter.queueStatus(ctx, s.cache, statuses); err != nil {
		s.log.Warn("Queue status", "err", err)
	}
	res.PendingJobs = len(plan.Pending) + res.InvalidJobs + res.WaitingForPods + len(held)
	s.metrics.cycleSeconds.Observe(s.opts.Clock().Sub(start).Seconds())
	s.metrics.pendingJobs.Set(float64(res.PendingJobs))
	s.metrics.pendingPods.Set(float64(pendingPods - res.PodsBound))
	s.metrics.ops.observe(w, plan, held) // opsmetrics.go
	return res, nil
}

// onAny reports whether a gang puts a pod on one of the nodes.
func onAny(gb engine.GangBind, nodes map[string]bool) bool {
	for _, pb := range gb.Pods {
		if nodes[pb.Node] {
			return true
		}
	}
	return false
}

// pendingCondition turns the engine's reason for a waiting job into the
// PodScheduled=False reason and message. A job its queue refuses (reason:
// the queue's refusal, e.g. NamespaceDenied), or one
// held by its queue's limit, is not Unschedulable: more nodes would not
// help it, and autoscalers read that reason. A verdict this adapter does
// not know is still shown, as Unschedulable with the engine's message.
func pendingCondition(r engine.Reason) (reason, message string) {
	switch r.Verdict {
	case placement.NeverFits:
		return ReasonUnschedulable, "never fits: " + r.Message
	case placement.WaitQuota:
		return ReasonQueueLimit, r.Message
	case placement.Refused:
		if r.Refusal != "" {
			return r.Refusal, r.Message
		}
		return ReasonQueueRefused, r.Message
	default:
		return ReasonUnschedulable, r.Message
	}
}
