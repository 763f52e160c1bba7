package kube

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// Room held for members a controller creates only after the first ones are
// placed (a LeaderWorkerSet group under LeaderReady, a JobSet child Job
// under exclusive placement, a JobSet's later replicated jobs under
// InOrder). The engine places such a gang whole; the adapter binds the pods
// that exist and writes where the others go on the first pod's binding
// (AnnotationHeldRoom, until AnnotationHeldUntil). Every cycle reads the
// holds back from the pods, so a restarted scheduler keeps them: room not
// taken yet is charged to the cluster like a bound pod, and a late member
// that now exists is bound into its place. Past the deadline the room is
// released and late members are placed by the engine like the rest of a
// partly bound gang (beside the bound pods at the job's required level).

// heldSlot is the room of one member not created yet.
type heldSlot struct {
	node     string
	gpus     []string
	cpuMilli int64
	memMiB   int64
}

func formatHeld(slots []heldSlot) string {
	parts := make([]string, len(slots))
	for i, s := range slots {
		parts[i] = fmt.Sprintf("%s|%s|%d|%d", s.node, strings.Join(s.gpus, ","), s.cpuMilli, s.memMiB)
	}
	return strings.Join(parts, ";")
}

func parseHeld(v string) ([]heldSlot, error) {
	var out []heldSlot
	for _, part := range strings.Split(v, ";") {
		f := strings.Split(part, "|")
		if len(f) != 4 || f[0] == "" {
			return nil, fmt.Errorf("held place %q: want node|gpus|milliCPU|MiB", part)
		}
		cpu, err1 := strconv.ParseInt(f[2], 10, 64)
		mem, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || cpu < 0 || mem < 0 {
			return nil, fmt.Errorf("held place %q: CPU and memory must be non-negative integers", part)
		}
		s := heldSlot{node: f[0], cpuMilli: cpu, memMiB: mem}
		if f[1] != "" {
			s.gpus = strings.Split(f[1], ",")
		}
		out = append(out, s)
	}
	return out, nil
}

// holdTimeout is how long the pod's gang holds room for late members.
func holdTimeout(p *corev1.Pod) time.Duration {
	def, _ := time.ParseDuration(v1alpha1.DefaultHoldTimeout)
	if d, err := time.ParseDuration(p.Annotations[v1alpha1.AnnotationHoldTimeout]); err == nil && d > 0 {
		return d
	}
	return def
}

// slotBind is a late member bound into the room held for it.
type slotBind struct {
	pod  *corev1.Pod
	node string
	gpus []string
}

// heldRoom reads the holds in force at now. Late members that now exist
// are given their places: returned as bindings and added to assumed, so
// that the snapshot counts them bound. Places still empty are returned to
// be charged to the cluster (chargeHeld).
func heldRoom(pods []*corev1.Pod, assumed map[string]assumedPod, cfg adapterConfig, now time.Time) (binds []slotBind, empty []heldSlot, warnings []string) {
	byKey := map[string][]*corev1.Pod{}
	type holder struct {
		pod   *corev1.Pod
		slots []heldSlot
	}
	var holders []holder
	for _, p := range pods {
		if p.Spec.SchedulerName != cfg.schedulerName || terminal(p) {
			continue
		}
		ann := p.Annotations
		if a, ok := assumed[string(p.UID)]; ok && a.annotations != nil {
			ann = a.annotations
		}
		v := ann[v1alpha1.AnnotationHeldRoom]
		if v == "" {
			continue
		}
		until, err := time.Parse(time.RFC3339, ann[v1alpha1.AnnotationHeldUntil])
		if err != nil || !now.Before(until) || p.DeletionTimestamp != nil {
			continue // released
		}
		slots, err := parseHeld(v)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("pod %s/%s: %v", p.Namespace, p.Name, err))
			continue
		}
		holders = append(holders, holder{pod: p, slots: slots})
	}
	if len(holders) == 0 {
		return nil, nil, warnings
	}
	// Gang keys are only worked out when some gang holds room.
	for _, p := range pods {
		if p.Spec.SchedulerName == cfg.schedulerName && !terminal(p) {
			k := holdKey(p)
			byKey[k] = append(byKey[k], p)
		}
	}
	for _, h := range holders {
		k := holdKey(h.pod)
		used := make([]bool, len(h.slots))
		var waiting []*corev1.Pod
		for _, m := range byKey[k] {
			if m.UID == h.pod.UID {
				continue
			}
			node, ann := m.Spec.NodeName, m.Annotations
			if a, ok := assumed[string(m.UID)]; ok {
				node, ann = a.node, a.annotations
			}
			if node == "" {
				waiting = append(waiting, m)
				continue
			}
			// A member bound already fills the place on its node with its
			// GPUs, else any place on its node.
			gpus := ann[v1alpha1.AnnotationAssignedGPUs]
			if i := findSlot(h.slots, used, func(s heldSlot) bool { return s.node == node && strings.Join(s.gpus, ",") == gpus }); i >= 0 {
				used[i] = true
			} else if i := findSlot(h.slots, used, func(s heldSlot) bool { return s.node == node }); i >= 0 {
				used[i] = true
			}
		}
		sort.Slice(waiting, func(i, j int) bool { return waiting[i].Name < waiting[j].Name })
		for _, m := range waiting {
			if m.DeletionTimestamp != nil || len(m.Spec.SchedulingGates) > 0 || len(m.Spec.ResourceClaims) > 0 {
				continue
			}
			req, err := podRequest(m, cfg.gpuResource, cfg.draDriver, noLookup{})
			if err != nil || req.Fractional() || req.MIG() || req.ByMemory() {
				continue // the engine places it
			}
			i := findSlot(h.slots, used, func(s heldSlot) bool {
				return len(s.gpus) == req.GPUs && s.cpuMilli >= req.CPUMilli && s.memMiB >= req.MemMiB
			})
			if i < 0 {
				continue
			}
			used[i] = true
			s := h.slots[i]
			ann := map[string]string{}
			if len(s.gpus) > 0 {
				ann[v1alpha1.AnnotationAssignedGPUs] = strings.Join(s.gpus, ",")
			}
			assumed[string(m.UID)] = assumedPod{node: s.node, annotations: ann, at: now}
			binds = append(binds, slotBind{pod: m, node: s.node, gpus: s.gpus})
		}
		for i, s := range h.slots {
			if !used[i] {
				empty = append(empty, s)
			}
		}
	}
	return binds, empty, warnings
}

// holdKey is the pods whose room one hold keeps: its gang, or under
// exclusive placement its child Job (each leader holds its own followers'
// room, in its own domain).
func holdKey(p *corev1.Pod) string {
	k, _, _ := gangKey(p)
	if part := exclusivePart(p); part != "" {
		k += "/" + part
	}
	return k
}

func findSlot(slots []heldSlot, used []bool, ok func(heldSlot) bool) int {
	for i, s := range slots {
		if !used[i] && ok(s) {
			return i
		}
	}
	return -1
}

// chargeHeld takes the empty held places out of the free capacity.
func chargeHeld(s *cluster.State, empty []heldSlot) []string {
	var warnings []string
	for _, h := range empty {
		n, ok := s.NodeIndex(h.node)
		if !ok {
			continue
		}
		a := cluster.Alloc{CPUMilli: h.cpuMilli, MemMiB: h.memMiB}
		for _, g := range h.gpus {
			if k := deviceIndex(s.Node(n), g); k >= 0 && s.DeviceHealthy(n, k) {
				a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
			}
		}
		if err := s.Allocate(n, a); err != nil {
			warnings = append(warnings, fmt.Sprintf("room held on %s: %v", h.node, err))
		}
	}
	return warnings
}

// holdLater takes the members not created yet out of the plan's bindings:
// their places are written on the binding of the gang's first pod that
// exists (bindAnnotations), to be held for them.
func (w *world) holdLater(binds []engine.GangBind, now time.Time) []engine.GangBind {
	out := binds[:0:0]
	for _, gb := range binds {
		kj := w.byID[gb.Job]
		if kj == nil || kj.laterFrom < 0 {
			out = append(out, gb)
			continue
		}
		var real []engine.PodBind
		slots := map[workload.PodRef][]heldSlot{} // by the pod whose binding holds them
		var holders []workload.PodRef
		for _, pb := range gb.Pods {
			if !kj.isLater(pb.Pod) {
				real = append(real, pb)
			}
		}
		if len(real) == 0 {
			continue
		}
		for _, pb := range gb.Pods {
			if !kj.isLater(pb.Pod) {
				continue
			}
			ps := kj.job.PodSets[pb.Pod.PodSet]
			holder := real[0].Pod
			if ps.Group != "" {
				// Under exclusive placement a child's leader holds its
				// followers' room.
				for _, r := range real {
					if kj.job.PodSets[r.Pod.PodSet].Group == ps.Group {
						holder = r.Pod
						break
					}
				}
			}
			if _, ok := slots[holder]; !ok {
				holders = append(holders, holder)
			}
			slots[holder] = append(slots[holder], heldSlot{node: pb.Node, gpus: pb.Devices, cpuMilli: ps.Request.CPUMilli, memMiB: ps.Request.MemMiB})
		}
		gb.Pods = real
		for _, h := range holders {
			if w.bindAnnotations == nil {
				w.bindAnnotations = map[string]map[string]string{}
			}
			w.bindAnnotations[string(kj.pods[h].UID)] = map[string]string{
				v1alpha1.AnnotationHeldRoom:  formatHeld(slots[h]),
				v1alpha1.AnnotationHeldUntil: now.Add(kj.holdFor).UTC().Format(time.RFC3339),
			}
		}
		out = append(out, gb)
	}
	return out
}

// heldMessage says what a pod's binding holds, for its event.
func heldMessage(ann map[string]string) string {
	slots, err := parseHeld(ann[v1alpha1.AnnotationHeldRoom])
	if err != nil {
		return ""
	}
	nodes := map[string]bool{}
	var names []string
	for _, s := range slots {
		if !nodes[s.node] {
			nodes[s.node] = true
			names = append(names, s.node)
		}
	}
	return fmt.Sprintf("room held for %d members not created yet on %s until %s", len(slots), strings.Join(names, ", "),
		ann[v1alpha1.AnnotationHeldUntil])
}
