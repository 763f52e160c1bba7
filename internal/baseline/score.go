package baseline

import (
	"math"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
)

// maxNodeScore is kube-scheduler's fwk.MaxNodeScore.
const maxNodeScore = 100

// kubeScorer is kube-scheduler's default node score for a pod, as
// k8s.io/kubernetes v1.36.3 computes it (pkg/scheduler/framework/plugins/
// noderesources): NodeResourcesFit with the LeastAllocated strategy
// (least_allocated.go: per resource (capacity - requested) × 100 / capacity,
// averaged by weight) plus NodeResourcesBalancedAllocation
// (balanced_allocation.go: 50 + (50 + balance with the pod - balance
// without it) / 2, where balance is (1 - std of the used fractions) × 100),
// each with weight 1 (apis/config/v1/default_plugins.go). Upstream scores
// CPU and memory (defaults.go, defaultResourceSpec); the fit score here adds
// the GPU extended resource with weight 1, as GPU clusters configure it
// (issue 15). Integer arithmetic as upstream, so ties fall as they do there;
// kube-scheduler breaks ties at random, this takes the lowest node index.
type kubeScorer struct{}

var _ placement.Scorer = kubeScorer{}

func (kubeScorer) Name() string { return "kube-default" }

func (kubeScorer) Score(s *cluster.State, n int, r *placement.PodReq) (float64, int) {
	node := s.Node(n)
	usedCPU := node.CPUMilli - s.FreeCPU(n)
	usedMem := node.MemMiB - s.FreeMem(n)
	var freeGPU int64
	for _, f := range s.GPUFree(n) {
		freeGPU += int64(f)
	}
	capGPU := int64(1000 * len(node.Devices))
	usedGPU := capGPU - freeGPU
	req := []int64{usedCPU + r.CPUMilli, usedMem + r.MemMiB, usedGPU + r.GPUMilliTotal()}
	alloc := []int64{node.CPUMilli, node.MemMiB, capGPU}
	var fit, weights int64
	for i := range req {
		if alloc[i] == 0 {
			continue
		}
		if req[i] <= alloc[i] {
			fit += (alloc[i] - req[i]) * maxNodeScore / alloc[i]
		}
		weights++
	}
	if weights > 0 {
		fit /= weights
	}
	with := balance([]int64{req[0], req[1]}, alloc[:2])
	without := balance([]int64{usedCPU, usedMem}, alloc[:2])
	balanced := maxNodeScore/2 + (maxNodeScore/2+with-without)/2
	gpu := -1
	if r.Fractional() || r.ByMemory() {
		// Shared GPUs are not part of kube-scheduler; a sharing device plugin
		// picks the GPU. The spreading choice (the emptiest GPU) stands in.
		_, gpu = placement.LeastAllocated().Score(s, n, r)
	}
	return float64(fit + balanced), gpu
}

// balance is balancedResourceScore: (1 - standard deviation of the used
// fractions) × 100, fractions capped at 1.
func balance(requested, allocatable []int64) int64 {
	var fr []float64
	var total float64
	for i := range requested {
		if allocatable[i] == 0 {
			continue
		}
		f := math.Min(1, float64(requested[i])/float64(allocatable[i]))
		fr = append(fr, f)
		total += f
	}
	std := 0.0
	switch {
	case len(fr) == 2:
		std = math.Abs((fr[0] - fr[1]) / 2)
	case len(fr) > 2:
		mean := total / float64(len(fr))
		var sum float64
		for _, f := range fr {
			sum += (f - mean) * (f - mean)
		}
		std = math.Sqrt(sum / float64(len(fr)))
	}
	return int64((1 - std) * maxNodeScore)
}
