package kube

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// world is one cycle's view: the engine's snapshot plus what the adapter
// needs to carry the plan out and to explain it.
type world struct {
	snap     *engine.Snapshot
	state    *cluster.State
	jobs     []*kjob
	byID     map[workload.JobID]*kjob
	warnings []string
	// claims maps a pod (by UID) to its unallocated ResourceClaims.
	claims map[string][]*resourcev1.ResourceClaim
	// dra is the cycle's DRA inventory and how each pod's devices fill
	// its claims.
	dra *draView
	// pools maps node -> DRA device name -> pool.
	pools map[string]map[string]string
	// resume lists pods whose claims are allocated for them but which are
	// not bound yet.
	resume []resumeBind
	// topology is which Topology objects this snapshot used, for status.
	topology    topologyChoice
	topologyErr string
	levelLabels []string
	// queues is what the Queue objects say this cycle.
	queues *queueSet
	// holds is what each bound pod holds (by UID), terminating ones too.
	holds map[string]podHold
	// pods is every pod the informer showed when the world was built, in
	// namespace/name order: health, history and remediation read it too.
	pods []*corev1.Pod
	// bindAnnotations are extra annotations for a pod's binding (the room
	// the plan holds for its gang, holds.go), by pod UID.
	bindAnnotations map[string]map[string]string
}

type resumeBind struct {
	pod  *corev1.Pod
	node string
}

// reservedNode reports the node of a pod whose every claim is allocated
// and reserved for it.
func reservedNode(p *corev1.Pod, lk groupLookup) (string, bool) {
	if len(p.Spec.ResourceClaims) == 0 {
		return "", false
	}
	node := ""
	for _, rc := range p.Spec.ResourceClaims {
		name, ok := claimName(p, rc)
		if !ok {
			return "", false
		}
		cl, ok := lk.claim(p.Namespace, name)
		if !ok || cl.Status.Allocation == nil || cl.Status.Allocation.NodeSelector == nil {
			return "", false
		}
		reserved := false
		for _, r := range cl.Status.ReservedFor {
			if r.UID == p.UID {
				reserved = true
			}
		}
		n := selectorNode(cl.Status.Allocation.NodeSelector)
		if !reserved || n == "" || (node != "" && n != node) {
			return "", false
		}
		node = n
	}
	return node, true
}

// selectorNode reads the node of a node-local allocation's selector.
func selectorNode(sel *corev1.NodeSelector) string {
	for _, term := range sel.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// buildWorld turns the cache into a snapshot at time now.
func (c *Cache) buildWorld(now time.Time) (*world, error) {
	levelNames, labelOf, choice, err := c.chooseTopology()
	var topoWarning string
	if err != nil {
		// Scheduling goes on with a flat cluster; jobs that need a level
		// are told it is unknown, and the Topology's status says why.
		topoWarning = err.Error()
		levelNames, labelOf = nil, map[string]string{}
	}
	topo := cluster.Topology{}
	for _, name := range levelNames {
		topo.Levels = append(topo.Levels, cluster.Level{Name: name, Label: labelOf[name]})
	}
	w := &world{byID: map[workload.JobID]*kjob{}, claims: map[string][]*resourcev1.ResourceClaim{},
		pools: map[string]map[string]string{}, topology: choice, topologyErr: topoWarning}
	if topoWarning != "" {
		w.warnings = append(w.warnings, topoWarning)
	}
	slices := c.listSlices()
	for _, sl := range slices {
		if sl.Spec.Driver != c.cfg.draDriver || sl.Spec.NodeName == nil {
			continue
		}
		node := *sl.Spec.NodeName
		if w.pools[node] == nil {
			w.pools[node] = map[string]string{}
		}
		for _, d := range sl.Spec.Devices {
			w.pools[node][d.Name] = sl.Spec.Pool.Name
		}
	}
	var nodes []cluster.Node
	allNodes := c.listNodes()
	var managed []*corev1.Node
	for _, n := range allNodes {
		if c.cfg.nodeSelector != nil && !c.cfg.nodeSelector.Matches(labelSet(n.Labels)) {
			continue
		}
		managed = append(managed, n)
		cn, warns := nodeFromObject(n, c.cfg.gpuResource, slices, c.cfg.draDriver)
		for _, wmsg := range warns {
			w.warnings = append(w.warnings, "node "+n.Name+": "+wmsg)
		}
		nodes = append(nodes, cn)
	}
	for _, name := range levelNames {
		w.levelLabels = append(w.levelLabels, labelOf[name])
	}
	state, err := cluster.New(topo, nodes)
	if err != nil {
		return nil, fmt.Errorf("building the cluster model: %w", err)
	}
	w.state = state

	pods := c.listPods()
	w.pods = pods
	assumed := c.assumedNow(pods, now)
	lk := lookup{c: c}
	// A pod whose claims corral already allocated (a scheduler stopped
	// between the claim and the binding) is finished first, on the node its
	// claims name: the devices are taken, only the binding is missing.
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.Spec.SchedulerName != c.cfg.schedulerName || terminal(p) {
			continue
		}
		if _, inFlight := assumed[string(p.UID)]; inFlight {
			continue // bound by this process already; the informer lags: never bind twice
		}
		if node, ok := reservedNode(p, lk); ok {
			if _, known := state.NodeIndex(node); known {
				w.resume = append(w.resume, resumeBind{pod: p, node: node})
				assumed[string(p.UID)] = assumedPod{node: node, at: now}
			}
		}
	}

	poolNode := map[string]string{}
	for node, devs := range w.pools {
		for _, pool := range devs {
			poolNode[pool] = node
		}
	}
	claims := c.listClaims()
	holds, warns := account(state, pods, assumed, claims, poolNode, c.cfg)
	w.warnings = append(w.warnings, warns...)
	w.holds = holds

	// The DRA inventory: counters used by allocated devices, and devices
	// whose counters are used up taken out of the free capacity.
	w.dra = newDRAView(c.cfg.draDriver, c.cel, slices, allocatedDevices(claims, poolNode, c.cfg.draDriver), lk.deviceClass)
	w.dra.markExhausted(state)
	lk.dra = w.dra

	// Taints, node affinity and pod affinity: matched once per distinct
	// constraint against the managed nodes and the pods placed so far.
	lk.elig = newEligibility(managed, allNodes, pods, nodesOf(assumed)).withNamespaces(c.listNamespaces())
	w.jobs = buildJobs(pods, nodesOf(assumed), lk, labelOf, c.cfg)
	w.queues = c.readQueues(state.Models())
	snap := &engine.Snapshot{State: state, Now: now, Queues: w.queues.specs}
	for _, kj := range w.jobs {
		w.byID[kj.job.ID] = kj
		w.admit(kj)
		if lm, ok := laterMembers(kj, assumed); ok { // holds.go
			snap.Later = append(snap.Later, lm)
		}
		if len(kj.bound) > 0 {
			rj, warns := runningJob(kj, holds, assumed, state, now)
			w.warnings = append(w.warnings, warns...)
			snap.Running = append(snap.Running, rj)
		}
		if !kj.pending() || kj.invalid != "" || kj.waiting != "" {
			continue
		}
		pj := engine.PendingJob{Job: kj.job}
		if len(kj.bound) > 0 {
			for _, ref := range kj.refs {
				if _, ok := kj.bound[ref]; !ok {
					pj.Waiting = append(pj.Waiting, ref)
				}
			}
		}
		snap.Pending = append(snap.Pending, pj)
		for _, ref := range kj.refs {
			p := kj.pods[ref]
			for _, rc := range p.Spec.ResourceClaims {
				if name, ok := claimName(p, rc); ok {
					if cl, ok := lk.claim(p.Namespace, name); ok && cl.Status.Allocation == nil {
						w.claims[string(p.UID)] = append(w.claims[string(p.UID)], cl)
					}
				}
			}
		}
	}
	snap.Mix = engine.MixOf(snap.Pending, snap.Running, 64) // the pods present now, as in corral sim
	snap.Terminating = terminatingVictims(pods)
	w.snap = snap
	return w, nil
}

// allocatedDevices lists the driver's devices that allocated claims hold,
// as "node/device".
func allocatedDevices(claims []*resourcev1.ResourceClaim, poolNode map[string]string, driver string) map[string]bool {
	out := map[string]bool{}
	for _, cl := range claims {
		if cl.Status.Allocation == nil {
			continue
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			if r.Driver != driver {
				continue
			}
			node := r.Pool
			if pn, ok := poolNode[r.Pool]; ok {
				node = pn
			}
			out[node+"/"+r.Device] = true
		}
	}
	return out
}

func nodesOf(assumed map[string]assumedPod) map[string]string {
	out := make(map[string]string, len(assumed))
	for uid, a := range assumed {
		out[uid] = a.node
	}
	return out
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

// account takes from the state what bound pods hold: CPU and memory, GPUs
// corral assigned (by the ids in the pod's annotation), GPUs of allocated
// DRA claims (by device name), and for pods of other schedulers that ask for
// the GPU extended resource, the lowest-numbered free GPUs (which ones the
// device plugin gave them is not visible). Pods with known GPUs go first so
// that unknown ones cannot take their devices.
//
// It returns what each pod was charged (by UID), which the running jobs of
// the snapshot carry for preemption.
func account(s *cluster.State, pods []*corev1.Pod, assumed map[string]assumedPod, claims []*resourcev1.ResourceClaim, poolNode map[string]string, cfg adapterConfig) (map[string]podHold, []string) {
	var warnings []string
	holds := map[string]podHold{}
	type held struct {
		pod       *corev1.Pod
		node      int
		ann       map[string]string
		knownGPUs bool
	}
	var hs []held
	for _, p := range pods {
		if terminal(p) {
			continue
		}
		nodeName, ann := p.Spec.NodeName, p.Annotations
		if a, ok := assumed[string(p.UID)]; ok {
			nodeName, ann = a.node, a.annotations
		}
		if nodeName == "" {
			continue
		}
		n, ok := s.NodeIndex(nodeName)
		if !ok {
			continue // a node corral does not manage
		}
		hs = append(hs, held{pod: p, node: n, ann: ann, knownGPUs: ann[v1alpha1.AnnotationAssignedGPUs] != "" ||
			ann[v1alpha1.AnnotationAssignedMIG] != ""})
	}
	sort.SliceStable(hs, func(i, j int) bool { return hs[i].knownGPUs && !hs[j].knownGPUs })

	// Devices of allocated claims, once per claim.
	claimHolds := map[string]cluster.Alloc{}
	for _, cl := range claims {
		if cl.Status.Allocation == nil {
			continue
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			if r.Driver != cfg.draDriver {
				continue
			}
			node := r.Pool
			if pn, ok := poolNode[r.Pool]; ok {
				node = pn
			}
			n, ok := s.NodeIndex(node)
			if !ok {
				continue
			}
			if k := deviceIndex(s.Node(n), r.Device); k >= 0 {
				// A tainted (failed) device is out of the capacity already:
				// charging it would fail, yet the claim still holds it, and
				// remediation must find its pods on it.
				if s.DeviceHealthy(n, k) {
					if err := s.Allocate(n, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: k, Milli: 1000}}}); err != nil {
						warnings = append(warnings, fmt.Sprintf("claim %s/%s: %v", cl.Namespace, cl.Name, err))
						continue
					}
				}
				// The claim's devices belong to the pods it is reserved for.
				for _, rf := range cl.Status.ReservedFor {
					h := claimHolds[string(rf.UID)]
					h.Devices = append(h.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
					claimHolds[string(rf.UID)] = h
				}
			}
		}
	}

	lk := noLookup{}
	for _, h := range hs {
		req, err := podRequest(h.pod, cfg.gpuResource, cfg.draDriver, lk)
		if err != nil {
			// A running pod's odd request still holds its CPU and memory.
			req = workload.Request{CPUMilli: req.CPUMilli, MemMiB: req.MemMiB}
		}
		a := cluster.Alloc{CPUMilli: req.CPUMilli, MemMiB: req.MemMiB}
		node := s.Node(h.node)
		switch {
		case req.MIG():
			// The instance corral recorded, else the first free one of the
			// profile, as the device plugin hands them out.
			milli := int32(req.GPUMilliTotal())
			if a.Devices = migShares(s, h.node, h.ann[v1alpha1.AnnotationAssignedMIG], milli); len(a.Devices) == 0 {
				a.Devices = firstFreeMIG(s, h.node, req.MIGProfile, milli)
			}
		case h.knownGPUs:
			for _, id := range strings.Split(h.ann[v1alpha1.AnnotationAssignedGPUs], ",") {
				if k := deviceIndex(node, strings.TrimSpace(id)); k >= 0 {
					milli := int32(1000)
					if req.Fractional() {
						milli = int32(req.GPUMilli)
					} else if req.ByMemory() {
						if m, ok := workload.MilliForMemory(req.GPUMemMiB, node.Devices[k].MemMiB); ok {
							milli = m
						}
					}
					a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: milli})
				}
			}
		case req.GPUs > 0 && !req.Fractional() && !req.ByMemory():
			free := s.GPUFree(h.node)
			for k := range free {
				if len(a.Devices) < req.GPUs && free[k] == 1000 {
					a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
				}
			}
		}
		// A failed device is out of the capacity already: charging it would
		// fail, yet the pod still holds it, and remediation must see that.
		var failed []cluster.DeviceShare
		healthy := a.Devices[:0:0]
		for _, d := range a.Devices {
			if d.MIG.IsSet() || s.DeviceHealthy(h.node, d.Device) {
				healthy = append(healthy, d)
			} else {
				failed = append(failed, d)
			}
		}
		a.Devices = healthy
		if err := s.Allocate(h.node, a); err != nil {
			// Overcommitted (the node shrank, or another scheduler placed on
			// GPUs corral counted): keep what fits, say so.
			warnings = append(warnings, fmt.Sprintf("pod %s/%s on %s: %v", h.pod.Namespace, h.pod.Name, node.Name, err))
			a.Devices = nil
			a.CPUMilli = min(a.CPUMilli, s.FreeCPU(h.node))
			a.MemMiB = min(a.MemMiB, s.FreeMem(h.node))
			_ = s.Allocate(h.node, a)
		}
		uid := string(h.pod.UID)
		a.Devices = append(a.Devices, failed...)
		a.Devices = append(a.Devices, claimHolds[uid].Devices...)
		holds[uid] = podHold{node: h.node, alloc: a}
	}
	return holds, warnings
}

// podHold is what one bound pod holds: its node (index in the state) and
// its CPU, memory and devices.
type podHold struct {
	node  int
	alloc cluster.Alloc
}

func deviceIndex(n *cluster.Node, id string) int {
	for k, d := range n.Devices {
		if d.ID == id {
			return k
		}
	}
	return -1
}

// noLookup reads running pods: their claims are accounted from the claims.
type noLookup struct{}

func (noLookup) jobParallelism(string, string) (int, bool)              { return 0, false }
func (noLookup) podGroup(string, string) (int, string, bool)            { return 0, "", false }
func (noLookup) claim(string, string) (*resourcev1.ResourceClaim, bool) { return nil, false }
func (noLookup) deviceClass(string) (*resourcev1.DeviceClass, bool)     { return nil, false }
func (noLookup) devices() *draView                                      { return nil }
func (noLookup) eligibility() *eligibility                              { return nil }

// terminatingVictims lists the pods corral evicted for a job that have not
// terminated yet, read from the pods themselves (AnnotationEvictedFor and
// the deletion's start), so a restarted scheduler keeps that job waiting.
func terminatingVictims(pods []*corev1.Pod) []engine.TerminatingPod {
	var out []engine.TerminatingPod
	for _, p := range pods {
		job := p.Annotations[v1alpha1.AnnotationEvictedFor]
		if p.DeletionTimestamp == nil || job == "" || terminal(p) {
			continue
		}
		since := p.DeletionTimestamp.Time
		if g := p.DeletionGracePeriodSeconds; g != nil {
			since = since.Add(-time.Duration(*g) * time.Second)
		}
		out = append(out, engine.TerminatingPod{Name: p.Namespace + "/" + p.Name, For: workload.JobID(job), Since: since})
	}
	return out
}
