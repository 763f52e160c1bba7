// Package workload describes what users ask the scheduler for: jobs made of pod
// sets, gang minimums, per-pod requests, topology constraints and the timing data
// (expected runtime, checkpoints) that later decisions use.
package workload

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// MilliPerGPU is one whole GPU in GPU-milli, the unit fractional requests use.
const MilliPerGPU = 1000

// JobID names a job uniquely within a snapshot (e.g. "ns/name" or a trace row).
type JobID string

// Request is what one pod of a pod set needs.
type Request struct {
	CPUMilli int64 // CPU in milli-cores
	MemMiB   int64 // memory in MiB
	// GPUs is the number of whole GPUs. When GPUMilli is set (1..999) GPUs must
	// be 1: the pod takes that fraction of a single GPU.
	GPUs     int
	GPUMilli int
	// GPUMemMiB asks for a share of one GPU by memory instead of by milli:
	// the pod takes this much of a single GPU's memory (GPUs must be 1).
	GPUMemMiB int64
	// MIGProfile asks for one MIG GPU instance of this profile (e.g.
	// "1g.10gb"); GPUs must be 1 and no fraction is set.
	MIGProfile string
	// Models lists the GPU models the pod accepts; empty accepts any.
	Models []string
	// Scope, when set, requires all of the pod's GPUs to share one group of
	// that intra-node level (e.g. a DRA claim's matchAttribute on pcieRoot).
	Scope DeviceScope
	// DRA says the GPUs come through DRA claims: only devices a DRA driver
	// publishes serve them, and DRA devices serve no other request.
	DRA bool
	// NodeLabels must all be on the node (a pod's nodeSelector).
	NodeLabels map[string]string
	// Devices, when set, names the only devices that may serve the GPUs.
	Devices *DeviceFilter
	// Nodes, when set, names the only nodes the pod may use (taints and
	// tolerations, node affinity, pod affinity to running pods).
	Nodes *NodeFilter
	// Prefer, when set, ranks the nodes as kube-scheduler's scores for
	// preferred node affinity and PreferNoSchedule taints rank them;
	// placement uses it only among nodes that otherwise score the same.
	Prefer *NodePreference
	// Apart lists pod anti-affinity between replicas: the pod shares no
	// value of an entry's node label with another pod of its job carrying
	// the same entry.
	Apart []Apart
}

// Apart is one required pod anti-affinity term between pods of one job:
// no two pods carrying it may run on nodes with the same value of the node
// label Key (kubernetes.io/hostname: one per node; a zone label: one per
// zone). Term tells apart different terms on the same key. A node without
// the label is in no domain and conflicts with nothing, as in
// kube-scheduler.
type Apart struct {
	Key  string
	Term string
}

// DeviceFilter limits the devices that may serve a request to sets the
// driver computed: the Kubernetes adapter evaluates DRA CEL selectors and
// matchAttribute constraints, which the engine cannot, and hands over the
// result as plain data. The engine still chooses the node and, inside the
// eligible sets, the devices.
type DeviceFilter struct {
	// Key identifies the filter within one snapshot: filters with equal
	// keys have equal Groups and All.
	Key string
	// Groups maps a node name to the device sets a pod may draw from: all
	// of one pod's GPUs come from one set (a matchAttribute constraint makes
	// one set per attribute value). Device ids are the node's Device.ID.
	// A node missing from the map has no eligible device.
	Groups map[string][][]string
	// All takes every device of the chosen set, which must all be free
	// (DRA allocationMode All); Request.GPUs is then the smallest set's size.
	All bool
}

// Equal reports whether two requests ask for exactly the same thing.
func (r Request) Equal(o Request) bool {
	return r.CPUMilli == o.CPUMilli && r.MemMiB == o.MemMiB && r.GPUs == o.GPUs &&
		r.GPUMilli == o.GPUMilli && r.GPUMemMiB == o.GPUMemMiB && r.MIGProfile == o.MIGProfile &&
		r.Scope == o.Scope && r.DRA == o.DRA &&
		slices.Equal(r.Models, o.Models) && maps.Equal(r.NodeLabels, o.NodeLabels) &&
		(r.Devices == nil) == (o.Devices == nil) && (r.Devices == nil || r.Devices.Key == o.Devices.Key && r.Devices.All == o.Devices.All) &&
		(r.Nodes == nil) == (o.Nodes == nil) && (r.Nodes == nil || r.Nodes.Key == o.Nodes.Key) &&
		(r.Prefer == nil) == (o.Prefer == nil) && (r.Prefer == nil || r.Prefer.Key == o.Prefer.Key) &&
		slices.Equal(r.Apart, o.Apart)
}

// NodeMatches reports whether a node with these labels may host the pod.
func (r Request) NodeMatches(labels map[string]string) bool {
	for k, v := range r.NodeLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// DeviceScope is an intra-node level a pod's GPUs must share.
type DeviceScope uint8

const (
	ScopeAny    DeviceScope = iota
	ScopeNVLink             // one NVLink / NVSwitch group
	ScopeSocket             // one CPU socket
	ScopeNUMA               // one NUMA node
	ScopePCIe               // one PCIe switch (root)
)

func (s DeviceScope) String() string {
	return [...]string{"any", "nvlink", "socket", "numa", "pcie"}[s]
}

// Fractional reports whether the request is a share of one GPU.
func (r Request) Fractional() bool { return r.GPUMilli > 0 && r.GPUMilli < MilliPerGPU }

// ByMemory reports whether the request is a share of one GPU by memory.
func (r Request) ByMemory() bool { return r.GPUMemMiB > 0 }

// MIG reports whether the request is one MIG GPU instance.
func (r Request) MIG() bool { return r.MIGProfile != "" }

// NeedsGPU reports whether the pod needs any GPU at all.
func (r Request) NeedsGPU() bool {
	return r.GPUs > 0 || r.GPUMilli > 0 || r.GPUMemMiB > 0 || r.MIGProfile != ""
}

// MIGCompute is the number of compute slices (of 7) a MIG profile name
// states: the "3" of "3g.20gb"; 0 when the name does not start that way.
func MIGCompute(profile string) int {
	i := strings.IndexByte(profile, 'g')
	if i <= 0 || i > 1 {
		return 0
	}
	c := int(profile[0] - '0')
	if c < 1 || c > 7 {
		return 0
	}
	return c
}

// MIGMilli is the GPU-milli of an instance with c of the 7 compute slices
// (1g = 142, 7g = 1000): MIG capacity is counted by compute share.
func MIGMilli(c int) int32 { return int32(c * MilliPerGPU / 7) }

// GPUMilliTotal is the GPU-milli the pod occupies. A share by memory counts
// as up to one GPU until it is placed: its milli depends on the memory of the
// GPU it lands on, and the bind's allocation holds the exact figure.
func (r Request) GPUMilliTotal() int64 {
	switch {
	case r.MIG():
		return int64(MIGMilli(MIGCompute(r.MIGProfile)))
	case r.Fractional():
		return int64(r.GPUMilli)
	}
	return int64(r.GPUs) * MilliPerGPU
}

// MilliForMemory is the GPU-milli a share of memMiB takes on a GPU of devMiB:
// rounded up, so that shares whose milli fit on one GPU never ask more
// memory than it has. ok is false when the GPU's memory is unknown or too
// small.
func MilliForMemory(memMiB, devMiB int64) (milli int32, ok bool) {
	if devMiB <= 0 || memMiB > devMiB {
		return 0, false
	}
	return int32((memMiB*MilliPerGPU + devMiB - 1) / devMiB), true
}

// PerGPUMilli is the milli taken from each GPU the pod uses.
func (r Request) PerGPUMilli() int {
	if r.Fractional() {
		return r.GPUMilli
	}
	return MilliPerGPU
}

// DeviceCount is the number of GPU devices the pod touches.
func (r Request) DeviceCount() int {
	if r.Fractional() {
		return 1
	}
	return r.GPUs
}

// AcceptsModel reports whether a GPU of the given model may serve the request.
func (r Request) AcceptsModel(model string) bool {
	if len(r.Models) == 0 {
		return true
	}
	for _, m := range r.Models {
		if m == model {
			return true
		}
	}
	return false
}

// Validate reports a request no scheduler could honour, independent of any cluster.
func (r Request) Validate() error {
	switch {
	case r.CPUMilli < 0:
		return fmt.Errorf("negative CPU request %dm", r.CPUMilli)
	case r.MemMiB < 0:
		return fmt.Errorf("negative memory request %dMiB", r.MemMiB)
	case r.GPUs < 0:
		return fmt.Errorf("negative GPU count %d", r.GPUs)
	case r.GPUMilli < 0:
		return fmt.Errorf("negative GPU fraction %dm", r.GPUMilli)
	case r.GPUMilli > MilliPerGPU:
		return fmt.Errorf("GPU fraction %dm is above one GPU (1000m)", r.GPUMilli)
	case r.Fractional() && r.GPUs != 1:
		return fmt.Errorf("a GPU fraction (%dm) applies to exactly one GPU, not %d", r.GPUMilli, r.GPUs)
	case r.GPUMemMiB < 0:
		return fmt.Errorf("negative GPU memory request %dMiB", r.GPUMemMiB)
	case r.ByMemory() && r.GPUMilli > 0:
		return fmt.Errorf("a GPU share is asked both by milli (%dm) and by memory (%d MiB); ask one", r.GPUMilli, r.GPUMemMiB)
	case r.ByMemory() && r.GPUs != 1:
		return fmt.Errorf("a GPU memory share (%d MiB) applies to exactly one GPU, not %d", r.GPUMemMiB, r.GPUs)
	case r.MIG() && (r.GPUMilli > 0 || r.ByMemory()):
		return fmt.Errorf("MIG profile %s cannot be combined with a GPU fraction", r.MIGProfile)
	case r.MIG() && r.GPUs != 1:
		return fmt.Errorf("a MIG request is one instance of %s on one GPU, not %d GPUs", r.MIGProfile, r.GPUs)
	case r.MIG() && MIGCompute(r.MIGProfile) == 0:
		return fmt.Errorf("unknown MIG profile %q: profiles are named like 1g.10gb or 3g.40gb", r.MIGProfile)
	case r.Scope > ScopePCIe:
		return fmt.Errorf("unknown device scope %d", r.Scope)
	}
	return nil
}

// String renders a compact shape such as "4xGPU(H100) 8cpu 64Gi".
func (r Request) String() string {
	var b strings.Builder
	switch {
	case r.MIG():
		fmt.Fprintf(&b, "MIG %s", r.MIGProfile)
	case r.ByMemory():
		fmt.Fprintf(&b, "%s of one GPU", MemText(r.GPUMemMiB))
	case r.Fractional():
		fmt.Fprintf(&b, "%dm GPU", r.GPUMilli)
	case r.GPUs > 0:
		fmt.Fprintf(&b, "%d GPU", r.GPUs)
	default:
		b.WriteString("0 GPU")
	}
	if len(r.Models) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(r.Models, "|"))
	}
	if r.Scope != ScopeAny {
		fmt.Fprintf(&b, " on one %s", r.Scope)
	}
	if r.DRA {
		b.WriteString(" via DRA")
	}
	if r.Devices != nil {
		if r.Devices.All {
			b.WriteString(", all of one set of")
		} else {
			b.WriteString(", from")
		}
		b.WriteString(" the devices its selectors match")
	}
	if len(r.NodeLabels) > 0 {
		keys := make([]string, 0, len(r.NodeLabels))
		for k := range r.NodeLabels {
			keys = append(keys, k+"="+r.NodeLabels[k])
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, " on nodes %s", strings.Join(keys, ","))
	}
	if r.Nodes != nil {
		fmt.Fprintf(&b, " on %d eligible nodes", len(r.Nodes.Nodes))
	}
	for _, a := range r.Apart {
		fmt.Fprintf(&b, ", one per %s", a.Key)
	}
	fmt.Fprintf(&b, ", %s, %s", CPUText(r.CPUMilli), MemText(r.MemMiB))
	return b.String()
}

// PodSet is a group of identical pods inside a job, e.g. the workers.
type PodSet struct {
	Name    string
	Count   int
	Request Request
	// Group names the part of the job the pod set belongs to under
	// Topology.Exclusive: pod sets of one group share a domain (a JobSet
	// child Job's leader and its followers). Empty: the pod set alone.
	Group string
}

// Topology constrains where a job's pods may land. Levels name the admin's
// topology levels (e.g. "rack", "block"); empty means no constraint.
type Topology struct {
	// Required: every pod must be inside one domain of this level.
	Required string
	// Preferred: try one domain of this level first, climb only if none fits.
	Preferred string
	// Exclusive: each part of the job (PodSet.Group) goes into a domain of
	// this level of its own that no other exclusive job uses, every part
	// at once (JobSet's exclusive-topology).
	Exclusive string
}

// Job is the unit corral schedules: its pod sets are placed together.
type Job struct {
	ID JobID
	// Namespace is where the job was submitted (queues admit namespaces).
	Namespace string
	Queue     string
	// User is who submitted the job; empty when unknown. Runtime estimates
	// learn per user (cycle.History): one user's jobs resemble each other
	// more than a queue's do.
	User     string
	Priority int32
	Submit   time.Time
	PodSets  []PodSet
	// MinMembers is the gang minimum: the job starts only when at least this
	// many pods are placed at once. Zero means every pod (a strict gang).
	MinMembers int
	Topology   Topology

	// Timing data carried for backfill, preemption and remediation.
	ExpectedRuntime    time.Duration // user estimate; zero if unknown
	MaxRuntime         time.Duration // hard limit; zero if none
	CheckpointInterval time.Duration // zero if the job never checkpoints
	// RestartOverhead is the time a restarted job spends before it makes
	// progress again (pulling images, loading a checkpoint, warming up).
	RestartOverhead time.Duration
	// MinRuntime protects a freshly started job from preemption.
	MinRuntime  time.Duration
	Preemptible bool
	// Class names the kind of work (e.g. "prefill") for capacity held in
	// pools: a pool serves its class first (see backfill.Pool). Empty is no
	// class.
	Class string

	// Remediation is what to do when a device or node under the running job
	// fails; empty chooses by job type (see Remediation).
	Remediation Remediation
	// RepairWait bounds WaitForRepair: past it the job is restarted. Zero
	// uses DefaultRepairWait.
	RepairWait time.Duration

	// Source says where the job came from (e.g. "trace.csv:17"), for messages.
	Source string
}

// Pods is the total number of pods in the job.
func (j *Job) Pods() int {
	n := 0
	for _, ps := range j.PodSets {
		n += ps.Count
	}
	return n
}

// GangMin is the number of pods that must start together.
func (j *Job) GangMin() int {
	if j.MinMembers <= 0 || j.MinMembers > j.Pods() {
		return j.Pods()
	}
	return j.MinMembers
}

// GPUMilli is the GPU-milli of the whole job.
func (j *Job) GPUMilli() int64 {
	var t int64
	for _, ps := range j.PodSets {
		t += int64(ps.Count) * ps.Request.GPUMilliTotal()
	}
	return t
}

// GPUs is the job's GPU demand in (possibly fractional) GPUs.
func (j *Job) GPUs() float64 { return float64(j.GPUMilli()) / MilliPerGPU }

// Validate checks the job's own consistency.
func (j *Job) Validate() error {
	if j.ID == "" {
		return fmt.Errorf("job has no id")
	}
	if len(j.PodSets) == 0 {
		return fmt.Errorf("job %s has no pod sets", j.ID)
	}
	for _, ps := range j.PodSets {
		if ps.Count <= 0 {
			return fmt.Errorf("job %s pod set %q: count %d must be positive", j.ID, ps.Name, ps.Count)
		}
		if err := ps.Request.Validate(); err != nil {
			return fmt.Errorf("job %s pod set %q: %w", j.ID, ps.Name, err)
		}
	}
	if j.MinMembers < 0 {
		return fmt.Errorf("job %s: negative gang minimum %d", j.ID, j.MinMembers)
	}
	if _, err := ParseRemediation(string(j.Remediation)); err != nil {
		return fmt.Errorf("job %s: %w", j.ID, err)
	}
	return nil
}

// PodRef names one pod of a job: pod set index and ordinal inside it.
type PodRef struct {
	Job    JobID
	PodSet int
	Index  int
}

func (p PodRef) String() string { return fmt.Sprintf("%s/%d-%d", p.Job, p.PodSet, p.Index) }

// EachPod calls fn for every pod of the job, in pod-set order.
func (j *Job) EachPod(fn func(ref PodRef, r Request)) {
	for si, ps := range j.PodSets {
		for i := 0; i < ps.Count; i++ {
			fn(PodRef{Job: j.ID, PodSet: si, Index: i}, ps.Request)
		}
	}
}

// Remediation is a job's policy when a device or node under it fails.
type Remediation string

const (
	// RemediateDefault chooses by job type: a strict multi-pod gang
	// (training) gets ReplaceRanks when its topology domain has room and
	// RestartGang otherwise; replicas and elastic jobs get ReplaceRanks
	// anywhere.
	RemediateDefault Remediation = ""
	// RestartGang evicts the whole gang; it is placed again as a gang.
	RestartGang Remediation = "RestartGang"
	// ReplaceRanks evicts only the pods on the failed device or node and
	// places them again inside the topology domain the rest of the gang
	// occupies, preferring spare capacity held for that.
	ReplaceRanks Remediation = "ReplaceRanks"
	// WaitForRepair keeps the job in place until the device comes back, up
	// to RepairWait, then restarts it.
	WaitForRepair Remediation = "WaitForRepair"
)

// DefaultRepairWait is WaitForRepair's limit when a job sets none.
const DefaultRepairWait = 30 * time.Minute

// ParseRemediation checks a policy name ("" is the default).
func ParseRemediation(s string) (Remediation, error) {
	switch r := Remediation(s); r {
	case RemediateDefault, RestartGang, ReplaceRanks, WaitForRepair:
		return r, nil
	}
	return "", fmt.Errorf("unknown remediation %q (known: RestartGang, ReplaceRanks, WaitForRepair)", s)
}
