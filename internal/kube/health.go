package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// Suspect-node bookkeeping: admission rejections count for suspectWindow;
// a node is avoided for suspectBackoff doubled per rejection, at most
// suspectMaxBackoff after its last one.
const (
	suspectWindow     = time.Hour
	suspectBackoff    = 5 * time.Minute
	suspectMaxBackoff = time.Hour
)

// healthState is what the adapter remembers about health between cycles.
// Only the cycle goroutine touches it, so it needs no lock. Nothing in it
// is needed for correctness after a restart: failure times fall back to
// "now", and replacement pins to the job's required level.
type healthState struct {
	firstSeen map[string]time.Time // "node/device" -> when corral first saw it failed
	pins      map[workload.JobID]engine.Pin
	reported  map[string]bool // failures already reported on their node
	failed    map[string]bool // nodes failed as a whole this cycle
	cordoned  map[string]bool
	// remediated lists the pods remediation has dealt with (evicted, or
	// found already terminating on a failure), so that reportLeaving
	// reports a terminating pod once, and never one corral evicted.
	remediated map[types.UID]bool
	// pods remembers the devices pods reported unhealthy (podhealth.go).
	pods         podHealth
	problems     string // the health problems last logged
	poolProblems string // the pool problems last logged

	remediations *prometheus.CounterVec
	failures     prometheus.Gauge
	suspects     prometheus.Gauge
}

func newHealthState(reg prometheus.Registerer) *healthState {
	h := &healthState{firstSeen: map[string]time.Time{}, pins: map[workload.JobID]engine.Pin{},
		reported: map[string]bool{}, cordoned: map[string]bool{}, remediated: map[types.UID]bool{},
		remediations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_remediations_total",
			Help: "Running jobs remediated after a device or node failure, by action (RestartGang, ReplaceRanks, WaitForRepair)."}, []string{"action"}),
		failures: prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_failed_devices",
			Help: "Failed GPUs and failed nodes corral sees now (a failed node counts once)."}),
		suspects: prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_suspect_nodes",
			Help: "Nodes that rejected pods at admission recently and are avoided."}),
	}
	if reg != nil {
		reg.MustRegister(h.remediations, h.failures, h.suspects)
	}
	return h
}

// remediationFromAnnotations reads a job's remediation policy.
func remediationFromAnnotations(j *workload.Job, ann map[string]string) []string {
	var problems []string
	if v := ann[v1alpha1.AnnotationRemediation]; v != "" {
		r, err := workload.ParseRemediation(v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("annotation %s: %v", v1alpha1.AnnotationRemediation, err))
		}
		j.Remediation = r
	}
	if v := ann[v1alpha1.AnnotationRepairWait]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			problems = append(problems, fmt.Sprintf("annotation %s=%q: want a duration such as 30m", v1alpha1.AnnotationRepairWait, v))
		}
		j.RepairWait = d
	}
	return problems
}

// addHealth completes the snapshot with health: what failed and since when,
// suspect nodes, the running jobs remediation looks at, and the pins of
// replacement ranks.
func (s *Scheduler) addHealth(w *world, now time.Time) {
	h := s.health
	st := w.state
	seen := map[string]bool{}
	h.failed = map[string]bool{}
	since := func(key string, t time.Time) time.Time {
		seen[key] = true
		if !t.IsZero() {
			return t
		}
		if first, ok := h.firstSeen[key]; ok {
			return first
		}
		h.firstSeen[key] = now
		return now
	}
	var failures []cycle.Failure
	pods := w.pods
	// Devices the pods on them report unhealthy are failed devices too.
	byPods := map[string]podReport{}
	for _, r := range h.pods.update(podDeviceReports(pods, st, s.cache.cfg.gpuResource, s.cache.cfg.draDriver), now) {
		byPods[r.node+"/"+r.device] = r
		if ni, ok := st.NodeIndex(r.node); ok {
			for k, d := range st.Node(ni).Devices {
				if d.ID == r.device {
					st.SetDeviceHealth(ni, k, false)
				}
			}
		}
	}
	for _, n := range s.cache.listNodes() {
		ni, ok := st.NodeIndex(n.Name)
		if !ok {
			continue
		}
		if f, ok := nodeFailure(n); ok {
			f.Since = since(n.Name+"/", f.Since)
			failures = append(failures, f)
			h.failed[n.Name] = true
			st.SetSchedulable(ni, false)
			continue
		}
		node := st.Node(ni)
		for k := range node.Devices {
			if st.DeviceHealthy(ni, k) {
				continue
			}
			f := cycle.Failure{Node: n.Name, Device: node.Devices[k].ID}
			var added time.Time
			if r, ok := byPods[n.Name+"/"+f.Device]; ok {
				f.Reason = r.why
			} else {
				f.Reason, added = deviceReason(n, node.Devices[k].ID, s.cache.listSlices(), s.cache.cfg.draDriver)
			}
			f.Since = since(n.Name+"/"+f.Device, added)
			failures = append(failures, f)
		}
	}
	for key := range h.firstSeen {
		if !seen[key] {
			delete(h.firstSeen, key) // repaired: a new failure starts a new clock
			delete(h.reported, key)
		}
	}
	w.snap.Failures = failures
	w.snap.Spares = s.opts.Spares
	h.failures.Set(float64(len(failures)))

	present := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		present[p.UID] = true
	}
	for uid := range h.remediated {
		if !present[uid] {
			delete(h.remediated, uid)
		}
	}
	w.snap.Suspects = suspectsOf(pods, now)
	h.suspects.Set(float64(len(w.snap.Suspects)))

	for i := range w.snap.Pending {
		pj := &w.snap.Pending[i]
		if pj.Waiting == nil {
			continue
		}
		if pin, ok := h.pins[pj.Job.ID]; ok {
			pj.Within = pin
		} else if kj := w.byID[pj.Job.ID]; kj != nil {
			// After a restart: the pin recorded on the gang's pods.
			if pin, ok := pinFromPods(st, kj); ok {
				pj.Within, h.pins[pj.Job.ID] = pin, pin
			}
		}
	}
	for id := range h.pins {
		if kj, ok := w.byID[id]; !ok || !kj.pending() && len(kj.bound) == len(kj.refs) {
			delete(h.pins, id)
		}
	}
}

// leavingPod is a pod already terminating on a failed device or node that
// corral did not evict, with what failed under it.
type leavingPod struct {
	pod      *corev1.Pod
	failures []cycle.Failure
}

// leavingOnFailures finds corral's pods that are already terminating on a
// failed device or node although corral did not evict them: Kubernetes got
// there first (kube-controller-manager deletes the pods on a device with a
// NoExecute DRA taint within milliseconds, before corral's next cycle, and
// taint-based eviction deletes the pods of a NotReady node after their
// toleration) or a user deleted them. Such pods are no longer part of their
// job (buildJobs leaves terminating pods out), so the engine never
// remediates them; without this nobody would say why they went.
func leavingOnFailures(pods []*corev1.Pod, w *world, failedNodes map[string]bool, remediated map[types.UID]bool, scheduler string) []leavingPod {
	type key struct{ node, device string }
	known := map[key]cycle.Failure{}
	for _, f := range w.snap.Failures {
		known[key{f.Node, f.Device}] = f
	}
	var out []leavingPod
	for _, p := range pods {
		if p.Spec.SchedulerName != scheduler || p.Spec.NodeName == "" || p.DeletionTimestamp == nil || terminal(p) || remediated[p.UID] {
			continue
		}
		node := p.Spec.NodeName
		var fs []cycle.Failure
		if failedNodes[node] {
			fs = append(fs, known[key{node, ""}])
		} else if h, ok := w.holds[string(p.UID)]; ok {
			for _, d := range h.alloc.Devices {
				if w.state.DeviceHealthy(h.node, d.Device) {
					continue
				}
				id := w.state.Node(h.node).Devices[d.Device].ID
				f, ok := known[key{node, id}]
				if !ok {
					f = cycle.Failure{Node: node, Device: id}
				}
				fs = append(fs, f)
			}
		}
		if len(fs) > 0 {
			out = append(out, leavingPod{pod: p, failures: fs})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].pod, out[j].pod
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return out
}

// reportLeaving says why pods that were already terminating on a failure
// went (once per pod), reports the failure on its node, and deletes such a
// pod at once when its node failed as a whole: a graceful deletion there
// never completes (and a StatefulSet, for one, recreates a pod only once
// the old one is gone).
func (s *Scheduler) reportLeaving(ctx context.Context, w *world) {
	h := s.health
	for _, lp := range leavingOnFailures(w.pods, w, h.failed, h.remediated, s.opts.SchedulerName) {
		p := lp.pod
		what := make([]string, len(lp.failures))
		for i, f := range lp.failures {
			what[i] = f.String()
		}
		if h.failed[p.Spec.NodeName] {
			if err := s.evictFailed(ctx, p, true); err != nil {
				s.log.Warn("deleting a pod on a failed node", "pod", p.Namespace+"/"+p.Name, "err", err)
				continue
			}
		}
		h.remediated[p.UID] = true
		job, _, _ := gangKey(p)
		by := "by another component"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason != "" {
				by = c.Reason // e.g. DeletionByDeviceTaintManager, DeletionByTaintManager
			}
		}
		where := "as the job's topology asks"
		if kj := w.byID[workload.JobID(job)]; kj != nil {
			if pin, ok := replacementPin(w, kj); ok {
				// As ReplaceRanks would: the replacement joins the domain
				// the healthy ranks run in.
				h.pins[kj.job.ID] = pin
				s.persistPin(ctx, kj, pin, nil)
				where = "in " + pin.Level + " " + pin.Domain + ", with the healthy ranks"
			}
		}
		s.reporter.event(p, corev1.EventTypeWarning, string(engine.CauseFailure), "Remediate",
			"%s failed: the pod was already being deleted (%s); its replacement is placed %s",
			strings.Join(what, ", "), by, where)
		for _, f := range lp.failures {
			s.reportRepair(f, job)
		}
	}
}

// reportRepair tells once per failure, with an event on the node, that it
// needs repair; it returns the node when this was the first report.
func (s *Scheduler) reportRepair(f cycle.Failure, job string) (*corev1.Node, bool) {
	key := f.Node + "/" + f.Device
	if s.health.reported[key] {
		return nil, false
	}
	s.health.reported[key] = true
	n, ok := s.cache.nodeByName(f.Node)
	if ok {
		s.reporter.event(n, corev1.EventTypeWarning, "RepairNeeded", "Remediate", "%s failed under job %s: needs repair", f, job)
	}
	return n, ok
}

// replacementPin is the engine's replacement domain for a job with pods
// gone from a failure: the lowest domain above the hosts that holds every
// bound pod; false when they share nothing below the cluster or none is
// bound.
func replacementPin(w *world, kj *kjob) (engine.Pin, bool) {
	var nodes []int
	for _, ref := range kj.refs {
		if node, ok := kj.bound[ref]; ok {
			if n, ok := w.state.NodeIndex(node); ok {
				nodes = append(nodes, n)
			}
		}
	}
	return engine.ReplacementPin(w.state, nodes)
}

// nodeFailure reports a node that failed as a whole: not Ready, or its
// health agent's GPU condition False.
func nodeFailure(n *corev1.Node) (cycle.Failure, bool) {
	for _, c := range n.Status.Conditions {
		switch {
		case c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue:
			return cycle.Failure{Node: n.Name, Since: c.LastTransitionTime.Time,
				Reason: strings.TrimSpace("NotReady " + c.Reason)}, true
		case string(c.Type) == v1alpha1.ConditionGPUHealthy && c.Status == corev1.ConditionFalse:
			return cycle.Failure{Node: n.Name, Since: c.LastTransitionTime.Time,
				Reason: strings.TrimSpace(v1alpha1.ConditionGPUHealthy + "=False " + c.Message)}, true
		}
	}
	return cycle.Failure{}, false
}

// deviceReason says which input marked a device failed, and since when if
// the input says (a DRA taint's timeAdded).
func deviceReason(n *corev1.Node, id string, slices []*resourcev1.ResourceSlice, driver string) (string, time.Time) {
	for _, sl := range slices {
		if sl.Spec.Driver != driver || sl.Spec.NodeName == nil || *sl.Spec.NodeName != n.Name {
			continue
		}
		for _, d := range sl.Spec.Devices {
			if d.Name != id {
				continue
			}
			for _, t := range d.Taints {
				if t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute {
					var added time.Time
					if t.TimeAdded != nil {
						added = t.TimeAdded.Time
					}
					return fmt.Sprintf("DRA taint %s=%s:%s", t.Key, t.Value, t.Effect), added
				}
			}
		}
	}
	return "annotation " + v1alpha1.AnnotationUnhealthyGPUs, time.Time{}
}

// suspectsOf counts, per node, the pods the kubelet rejected at admission
// within the window.
func suspectsOf(pods []*corev1.Pod, now time.Time) []cycle.Suspect {
	last := map[string]time.Time{}
	count := map[string]int{}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodFailed || p.Status.Reason != v1alpha1.ReasonUnexpectedAdmissionError || p.Spec.NodeName == "" {
			continue
		}
		at := p.CreationTimestamp.Time
		for _, c := range p.Status.Conditions {
			if c.LastTransitionTime.After(at) {
				at = c.LastTransitionTime.Time
			}
		}
		if now.Sub(at) > suspectWindow {
			continue
		}
		count[p.Spec.NodeName]++
		if at.After(last[p.Spec.NodeName]) {
			last[p.Spec.NodeName] = at
		}
	}
	var out []cycle.Suspect
	for node, n := range count {
		backoff := suspectBackoff << min(n-1, 8)
		out = append(out, cycle.Suspect{Node: node, Rejections: n, Until: last[node].Add(min(backoff, suspectMaxBackoff))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}
