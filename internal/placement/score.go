package placement

import (
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// PodReq is a pod's request resolved against one cluster.
type PodReq struct {
	workload.Request
	Mask cluster.ModelMask
	Ref  workload.PodRef
	// MemMilli, for a share by memory, is its GPU-milli on the accepted GPU
	// with the most memory: the least it can take anywhere, for bounds.
	// 0 when no accepted GPU has that much memory (or states its memory).
	MemMilli int32
	// eligible is Request.Devices by node index: the device index sets a
	// pod may draw from; nil when the request has no filter.
	eligible [][][]int
	// nodes is Request.Nodes as a set of node indices; nil: every node.
	nodes *cluster.NodeSet
	// prefer is Request.Prefer by node index; nil: no preference.
	prefer []int64
}

// Resolve turns a request into a PodReq for State s.
func Resolve(s *cluster.State, ref workload.PodRef, r workload.Request) (PodReq, []string) {
	mask, unknown := RequestMask(s, r)
	pr := PodReq{Request: r, Mask: mask, Ref: ref}
	if r.ByMemory() {
		if m, ok := workload.MilliForMemory(r.GPUMemMiB, LargestGPUMemory(s, mask)); ok {
			pr.MemMilli = m
		}
	}
	if r.Devices != nil {
		pr.eligible = resolveGroups(s, r.Devices)
	}
	if r.Nodes != nil {
		// Memoised per layout by key: the pods of a pod set share one set.
		pr.nodes = s.NodeSet(r.Nodes.Key, r.Nodes.Nodes)
	}
	if r.Prefer != nil && len(r.Prefer.Scores) > 0 {
		pr.prefer = make([]int64, s.NumNodes())
		for name, v := range r.Prefer.Scores {
			if n, ok := s.NodeIndex(name); ok {
				pr.prefer[n] = v
			}
		}
	}
	return pr, unknown
}

// resolveGroups maps a filter's node and device names to indices of s.
// Names s does not know are dropped: they cannot serve anyway.
func resolveGroups(s *cluster.State, f *workload.DeviceFilter) [][][]int {
	out := make([][][]int, s.NumNodes())
	for name, groups := range f.Groups {
		n, ok := s.NodeIndex(name)
		if !ok {
			continue
		}
		index := map[string]int{}
		for k, d := range s.Node(n).Devices {
			index[d.ID] = k
		}
		for _, g := range groups {
			var set []int
			for _, id := range g {
				if k, ok := index[id]; ok {
					set = append(set, k)
				}
			}
			if len(set) > 0 {
				sort.Ints(set)
				out[n] = append(out[n], set)
			}
		}
		// Map order must not leak into choices: order sets by first device.
		sort.Slice(out[n], func(i, j int) bool { return out[n][i][0] < out[n][j][0] })
	}
	return out
}

// LargestGPUMemory is the memory of the largest GPU of the models in mask
// (0 when none states its memory).
func LargestGPUMemory(s *cluster.State, mask cluster.ModelMask) int64 {
	var best int64
	for n := 0; n < s.NumNodes(); n++ {
		if s.NodeModels(n)&mask == 0 {
			continue
		}
		for k, d := range s.Node(n).Devices {
			if mask.Has(s.DeviceModel(n, k)) {
				best = max(best, d.MemMiB)
			}
		}
	}
	return best
}

// shareMilli is the GPU-milli r takes on device k of node n: its fraction,
// or for a share by memory its part of that GPU's memory; ok is false when
// the device's memory is unknown or too small.
func shareMilli(s *cluster.State, n, k int, r *PodReq) (int32, bool) {
	if r.ByMemory() {
		return workload.MilliForMemory(r.GPUMemMiB, s.Node(n).Devices[k].MemMiB)
	}
	return int32(r.GPUMilli), true
}

// shared reports whether r takes part of one GPU (by milli or by memory).
func (r *PodReq) shared() bool { return r.Fractional() || r.ByMemory() }

// whole reports whether r takes whole GPUs.
func (r *PodReq) whole() bool { return r.GPUs > 0 && !r.shared() && !r.MIG() }

// Scorer rates putting one pod on one node; higher is better. For a pod that
// takes a fraction of a GPU it also says which GPU (index into the node's
// devices); for whole-GPU pods it returns -1 and devices are picked later.
// Score is only called for nodes that can host the pod.
type Scorer interface {
	Name() string
	Score(s *cluster.State, n int, r *PodReq) (score float64, gpu int)
}

var (
	_ Scorer = leastAllocated{}
	_ Scorer = mostAllocated{}
	_ Scorer = (*FragScorer)(nil)
)

// fractionalGPUs lists the GPUs of node n that can take r's share.
func fractionalGPUs(s *cluster.State, n int, r *PodReq, fn func(k int, free int32)) {
	free := s.GPUFree(n)
	if !r.ByMemory() {
		// The hot path of the fgd protocol: a fixed milli on every GPU.
		for k, f := range free {
			if f >= int32(r.GPUMilli) && r.Mask.Has(s.DeviceModel(n, k)) {
				fn(k, f)
			}
		}
		return
	}
	for k, f := range free {
		if !r.Mask.Has(s.DeviceModel(n, k)) {
			continue
		}
		if need, ok := shareMilli(s, n, k, r); ok && f >= need {
			fn(k, f)
		}
	}
}

// utilisation after placing r on n: mean of the used shares of CPU, memory and
// (on GPU nodes) GPU.
func usedShare(s *cluster.State, n int, r *PodReq) float64 {
	node := s.Node(n)
	parts, sum := 0.0, 0.0
	if node.CPUMilli > 0 {
		sum += 1 - float64(s.FreeCPU(n)-r.CPUMilli)/float64(node.CPUMilli)
		parts++
	}
	if node.MemMiB > 0 {
		sum += 1 - float64(s.FreeMem(n)-r.MemMiB)/float64(node.MemMiB)
		parts++
	}
	if len(node.Devices) > 0 {
		var free int64
		for _, f := range s.GPUFree(n) {
			free += int64(f)
		}
		sum += 1 - float64(free-r.GPUMilliTotal())/float64(1000*len(node.Devices))
		parts++
	}
	if parts == 0 {
		return 0
	}
	return sum / parts
}

// leastAllocated spreads pods like kube-scheduler's default scoring: the node
// left least used wins; a fractional pod takes the emptiest GPU.
type leastAllocated struct{}

func (leastAllocated) Name() string { return "least-allocated" }

func (leastAllocated) Score(s *cluster.State, n int, r *PodReq) (float64, int) {
	gpu := -1
	if r.shared() {
		var most int32 = -1
		fractionalGPUs(s, n, r, func(k int, f int32) {
			if f > most {
				most, gpu = f, k
			}
		})
	}
	return -usedShare(s, n, r), gpu
}

// mostAllocated is best fit: the node left most used wins, GPUs weighing most;
// a fractional pod takes the fullest GPU that still fits.
type mostAllocated struct{}

func (mostAllocated) Name() string { return "most-allocated" }

func (mostAllocated) Score(s *cluster.State, n int, r *PodReq) (float64, int) {
	gpu := -1
	if r.shared() {
		var least int32 = 1 << 30
		fractionalGPUs(s, n, r, func(k int, f int32) {
			if f < least {
				least, gpu = f, k
			}
		})
	}
	node := s.Node(n)
	// Remaining GPU dominates; CPU breaks ties between equally full GPU nodes.
	var freeGPU int64
	for _, f := range s.GPUFree(n) {
		freeGPU += int64(f)
	}
	score := -float64(freeGPU-r.GPUMilliTotal()) * 1000
	if node.CPUMilli > 0 {
		score -= float64(s.FreeCPU(n)-r.CPUMilli) / float64(node.CPUMilli)
	}
	return score, gpu
}

// LeastAllocated returns the spreading scorer.
func LeastAllocated() Scorer { return leastAllocated{} }

// MostAllocated returns the best-fit scorer.
func MostAllocated() Scorer { return mostAllocated{} }
