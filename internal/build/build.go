// Package build makes valid clusters and jobs for tests in a line each:
// a case states only what differs from the default.
package build

import (
	"fmt"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/mig"
	"github.com/corral-dev/corral/internal/workload"
)

// LabelPrefix prefixes the node label of each topology level in tests.
const LabelPrefix = "corral.dev/"

// Topo returns a topology with the given levels, widest first, each read
// from the label LabelPrefix+level.
func Topo(levels ...string) cluster.Topology {
	var t cluster.Topology
	for _, l := range levels {
		t.Levels = append(t.Levels, cluster.Level{Name: l, Label: LabelPrefix + l})
	}
	return t
}

// NodeBuilder builds a cluster.Node; the default is an 8-GPU H100 node laid
// out like a DGX H100 (one NVSwitch, 2 sockets = 2 NUMA nodes, 4 PCIe
// switches of 2 GPUs and 2 NICs each).
type NodeBuilder struct {
	n      cluster.Node
	gpus   int
	model  string
	layout string
	memMiB int64
	mig    string
	migL   []mig.Layout
}

// Node starts a node builder.
func Node() *NodeBuilder {
	return &NodeBuilder{n: cluster.Node{Name: "n", CPUMilli: 224000, MemMiB: 2 << 20, Labels: map[string]string{}},
		gpus: 8, model: "H100", layout: "dgx", memMiB: 81920}
}

// GPUMem sets each GPU's memory in MiB (0: unknown).
func (b *NodeBuilder) GPUMem(m int64) *NodeBuilder { b.memMiB = m; return b }

// MIG runs every GPU in MIG mode with a geometry (e.g. "A100-40GB"); GPU i
// gets layouts[i] (none: no instances, idle).
func (b *NodeBuilder) MIG(geometry string, layouts ...mig.Layout) *NodeBuilder {
	b.mig, b.migL = geometry, layouts
	return b
}

// Lay parses "1g.10gb@0 2g.20gb@4" into a layout.
func Lay(s string) mig.Layout {
	l, err := mig.ParseLayout(s)
	if err != nil {
		panic(err)
	}
	return l
}

// Name sets the node name.
func (b *NodeBuilder) Name(n string) *NodeBuilder { b.n.Name = n; return b }

// At puts the node in a domain of a level.
func (b *NodeBuilder) At(level, domain string) *NodeBuilder {
	b.n.Labels[LabelPrefix+level] = domain
	return b
}

// Rack is At("rack", r).
func (b *NodeBuilder) Rack(r string) *NodeBuilder { return b.At("rack", r) }

// Block is At("block", r).
func (b *NodeBuilder) Block(r string) *NodeBuilder { return b.At("block", r) }

// GPUs sets the number of GPUs.
func (b *NodeBuilder) GPUs(n int) *NodeBuilder { b.gpus = n; return b }

// Model sets the GPU model.
func (b *NodeBuilder) Model(m string) *NodeBuilder { b.model = m; return b }

// CPU sets CPU in milli-cores.
func (b *NodeBuilder) CPU(m int64) *NodeBuilder { b.n.CPUMilli = m; return b }

// Mem sets memory in MiB.
func (b *NodeBuilder) Mem(m int64) *NodeBuilder { b.n.MemMiB = m; return b }

// PCIe lays GPUs out with no NVLink, one GPU per PCIe switch, half per NUMA node.
func (b *NodeBuilder) PCIe() *NodeBuilder { b.layout = "pcie"; return b }

// Obj returns the node.
func (b *NodeBuilder) Obj() cluster.Node {
	n := b.n
	n.Labels = map[string]string{}
	for k, v := range b.n.Labels {
		n.Labels[k] = v
	}
	n.Devices = nil
	half := max(1, b.gpus/2)
	for i := 0; i < b.gpus; i++ {
		d := cluster.Device{ID: fmt.Sprintf("gpu%d", i), Model: b.model, MemMiB: b.memMiB,
			Socket: i / half, NUMA: i / half, MIG: b.mig}
		if b.mig != "" && i < len(b.migL) {
			d.MIGLayout = b.migL[i]
		}
		switch b.layout {
		case "pcie":
			d.NVLink, d.PCIeSwitch, d.NIC = -1, i, ""
		default:
			d.NVLink, d.PCIeSwitch, d.NIC = 0, i/2, fmt.Sprintf("mlx5_%d", i)
		}
		n.Devices = append(n.Devices, d)
	}
	return n
}

// Times returns n copies named <name>-0 .. <name>-(n-1).
func (b *NodeBuilder) Times(n int) []cluster.Node {
	base := b.n.Name
	out := make([]cluster.Node, n)
	for i := range out {
		out[i] = b.Obj()
		out[i].Name = fmt.Sprintf("%s-%d", base, i)
	}
	return out
}

// Racks builds racks × perRack DGX nodes named r<i>-n<j> in racks r<i>.
func Racks(racks, perRack int) []cluster.Node {
	var out []cluster.Node
	for r := 0; r < racks; r++ {
		name := fmt.Sprintf("r%d", r)
		out = append(out, Node().Name(name+"-n").Rack(name).Times(perRack)...)
	}
	return out
}

// State builds a cluster.State or panics: builders only make valid input.
func State(topo cluster.Topology, nodes ...[]cluster.Node) *cluster.State {
	var all []cluster.Node
	for _, ns := range nodes {
		all = append(all, ns...)
	}
	s, err := cluster.New(topo, all)
	if err != nil {
		panic(err)
	}
	return s
}

// JobBuilder builds a workload.Job: by default one pod of one whole GPU.
type JobBuilder struct {
	j   workload.Job
	set workload.PodSet
}

// Job starts a job builder.
func Job(id string) *JobBuilder {
	return &JobBuilder{
		j:   workload.Job{ID: workload.JobID(id), Queue: "default", Submit: time.Unix(0, 0).UTC()},
		set: workload.PodSet{Name: "worker", Count: 1, Request: workload.Request{CPUMilli: 1000, MemMiB: 1024, GPUs: 1}},
	}
}

// Pods sets the worker count.
func (b *JobBuilder) Pods(n int) *JobBuilder { b.set.Count = n; return b }

// GPUs sets whole GPUs per pod.
func (b *JobBuilder) GPUs(n int) *JobBuilder {
	b.set.Request.GPUs, b.set.Request.GPUMilli = n, 0
	return b
}

// Milli makes each pod take a fraction of one GPU.
func (b *JobBuilder) Milli(m int) *JobBuilder {
	b.set.Request.GPUs, b.set.Request.GPUMilli = 1, m
	return b
}

// GPUMem makes each pod take a share of one GPU by memory.
func (b *JobBuilder) GPUMem(m int64) *JobBuilder {
	b.set.Request.GPUs, b.set.Request.GPUMilli, b.set.Request.GPUMemMiB = 1, 0, m
	return b
}

// MIG makes each pod ask for one instance of a MIG profile.
func (b *JobBuilder) MIG(profile string) *JobBuilder {
	b.set.Request.GPUs, b.set.Request.GPUMilli, b.set.Request.MIGProfile = 1, 0, profile
	return b
}

// Scope requires each pod's GPUs to share one group of an intra-node level.
func (b *JobBuilder) Scope(sc workload.DeviceScope) *JobBuilder { b.set.Request.Scope = sc; return b }

// CPU sets CPU per pod in milli-cores.
func (b *JobBuilder) CPU(m int64) *JobBuilder { b.set.Request.CPUMilli = m; return b }

// Models restricts the GPU models.
func (b *JobBuilder) Models(m ...string) *JobBuilder { b.set.Request.Models = m; return b }

// Required sets the required topology level.
func (b *JobBuilder) Required(level string) *JobBuilder { b.j.Topology.Required = level; return b }

// Preferred sets the preferred topology level.
func (b *JobBuilder) Preferred(level string) *JobBuilder { b.j.Topology.Preferred = level; return b }

// Priority sets the priority.
func (b *JobBuilder) Priority(p int32) *JobBuilder { b.j.Priority = p; return b }

// Submit sets the submit time as seconds after the epoch.
func (b *JobBuilder) Submit(sec int64) *JobBuilder { b.j.Submit = time.Unix(sec, 0).UTC(); return b }

// Min sets the gang minimum.
func (b *JobBuilder) Min(n int) *JobBuilder { b.j.MinMembers = n; return b }

// Queue sets the job's queue ("" asks for the namespace's default).
func (b *JobBuilder) Queue(q string) *JobBuilder { b.j.Queue = q; return b }

// Namespace sets the namespace the job was submitted in.
func (b *JobBuilder) Namespace(ns string) *JobBuilder { b.j.Namespace = ns; return b }

// User sets who submitted the job.
func (b *JobBuilder) User(u string) *JobBuilder { b.j.User = u; return b }

// Preemptible lets the job be preempted.
func (b *JobBuilder) Preemptible() *JobBuilder { b.j.Preemptible = true; return b }

// MinRuntime protects the job from preemption for d after it starts.
func (b *JobBuilder) MinRuntime(d time.Duration) *JobBuilder { b.j.MinRuntime = d; return b }

// Checkpoint sets the checkpoint interval.
func (b *JobBuilder) Checkpoint(d time.Duration) *JobBuilder { b.j.CheckpointInterval = d; return b }

// Overhead sets the restart overhead.
func (b *JobBuilder) Overhead(d time.Duration) *JobBuilder { b.j.RestartOverhead = d; return b }

// Expected sets the expected runtime.
func (b *JobBuilder) Expected(d time.Duration) *JobBuilder { b.j.ExpectedRuntime = d; return b }

// MaxRuntime sets the runtime limit.
func (b *JobBuilder) MaxRuntime(d time.Duration) *JobBuilder { b.j.MaxRuntime = d; return b }

// Class sets the job class pools are held for.
func (b *JobBuilder) Class(c string) *JobBuilder { b.j.Class = c; return b }

// Obj returns the job.
func (b *JobBuilder) Obj() *workload.Job {
	j := b.j
	j.PodSets = []workload.PodSet{b.set}
	return &j
}

// Nodes limits the pods to the named nodes (a driver's node filter: taints,
// node affinity); why lists the exclusions as "count cause" pairs.
func (b *JobBuilder) Nodes(key string, names []string, why ...workload.Exclusion) *JobBuilder {
	b.set.Request.Nodes = &workload.NodeFilter{Key: key, Nodes: names, Excluded: why}
	return b
}

// Prefer gives the pods soft node preferences (a driver's preferred node
// affinity and PreferNoSchedule taints), as node name, score pairs.
func (b *JobBuilder) Prefer(key string, scores map[string]int64) *JobBuilder {
	b.set.Request.Prefer = &workload.NodePreference{Key: key, Scores: scores}
	return b
}

// Apart keeps the pods apart on a node label (pod anti-affinity between
// replicas).
func (b *JobBuilder) Apart(key string) *JobBuilder {
	b.set.Request.Apart = append(b.set.Request.Apart, workload.Apart{Key: key, Term: "t-" + key})
	return b
}
