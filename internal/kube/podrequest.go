package kube

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/workload"
)

// podRequest is what one pod asks for: CPU and memory as the scheduler
// counts them (containers summed, init containers at their peak, plus
// overhead), whole GPUs of the extended resource, a fraction by annotation,
// and GPUs of DRA claims.
func podRequest(p *corev1.Pod, gpuResource, draDriver string, groups groupLookup) (workload.Request, error) {
	var r workload.Request
	var cpu, mem, gpus int64
	for _, c := range p.Spec.Containers {
		cpu += c.Resources.Requests.Cpu().MilliValue()
		mem += c.Resources.Requests.Memory().Value()
		gpus += gpuCount(c.Resources, gpuResource)
	}
	for _, c := range p.Spec.InitContainers {
		cpu = max(cpu, c.Resources.Requests.Cpu().MilliValue())
		mem = max(mem, c.Resources.Requests.Memory().Value())
		gpus = max(gpus, gpuCount(c.Resources, gpuResource))
	}
	if p.Spec.Overhead != nil {
		cpu += p.Spec.Overhead.Cpu().MilliValue()
		mem += p.Spec.Overhead.Memory().Value()
	}
	r.CPUMilli, r.MemMiB, r.GPUs = cpu, (mem+(1<<20)-1)>>20, int(min(gpus, 1<<16))
	if v := p.Annotations[v1alpha1.AnnotationGPUMilli]; v != "" {
		m, err := strconv.Atoi(v)
		if err != nil || m < 1 || m > 999 {
			return r, fmt.Errorf("annotation %s=%q: want 1-999 milli of one GPU", v1alpha1.AnnotationGPUMilli, v)
		}
		if r.GPUs > 1 {
			return r, fmt.Errorf("annotation %s asks for a fraction of one GPU but the pod requests %d GPUs", v1alpha1.AnnotationGPUMilli, r.GPUs)
		}
		r.GPUs, r.GPUMilli = 1, m
	}
	if err := sharedGPURequest(p, &r); err != nil {
		return r, err
	}
	if e := groups.eligibility(); e != nil {
		// nodeSelector, node affinity, tolerations and pod affinity, as the
		// nodes each allows (affinity.go).
		c := e.forPod(p)
		if c.problem != "" {
			return r, fmt.Errorf("%s", c.problem)
		}
		r.Nodes, r.Apart, r.Prefer = c.filter, c.apart, c.prefer
	} else if len(p.Spec.NodeSelector) > 0 {
		r.NodeLabels = p.Spec.NodeSelector
	}
	if v := p.Annotations[v1alpha1.AnnotationGPUModels]; v != "" {
		for _, m := range strings.Split(v, "|") {
			if m = strings.TrimSpace(m); m != "" {
				r.Models = append(r.Models, m)
			}
		}
	}
	if len(p.Spec.ResourceClaims) > 0 {
		need, err := claimGPUs(p, groups)
		if err != nil {
			return r, err
		}
		if need.gpus > 0 {
			if r.GPUs > 0 {
				return r, fmt.Errorf("the pod asks for GPUs both as %s and through ResourceClaims", gpuResource)
			}
			r.GPUs, r.Scope, r.DRA, r.Devices = need.gpus, need.scope, true, need.filter
		}
	}
	return r, r.Validate()
}

func gpuCount(res corev1.ResourceRequirements, gpuResource string) int64 {
	name := corev1.ResourceName(gpuResource)
	q, ok := res.Limits[name]
	if !ok {
		if q, ok = res.Requests[name]; !ok {
			return 0
		}
	}
	// Past int64, Value() wraps (1e30 reads 0): such a pod would pass as
	// asking for no GPU. It asks for more than any node has.
	if q.Cmp(maxGPUCount) > 0 {
		return maxGPUCount.Value()
	}
	return q.Value()
}

// maxGPUCount caps a pod's GPU count; podRequest caps it again, lower.
var maxGPUCount = resource.MustParse("1e9")

// claimName resolves the ResourceClaim a pod's claim entry refers to.
func claimName(p *corev1.Pod, rc corev1.PodResourceClaim) (string, bool) {
	if rc.ResourceClaimName != nil {
		return *rc.ResourceClaimName, true
	}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.Name == rc.Name && s.ResourceClaimName != nil {
			return *s.ResourceClaimName, true
		}
	}
	return "", false
}

// claimGPUs reads what a pod's claims ask for: devices of claims that are
// not allocated yet go through the cycle's DRA inventory (selectors,
// constraints, alternatives); a claim already allocated for this pod counts
// its devices.
func claimGPUs(p *corev1.Pod, groups groupLookup) (draNeed, error) {
	var need draNeed
	var open []*resourcev1.ResourceClaim
	held := 0
	for _, rc := range p.Spec.ResourceClaims {
		name, ok := claimName(p, rc)
		if !ok {
			return need, errNotReady{fmt.Sprintf("ResourceClaim for %q is not created yet", rc.Name)}
		}
		c, ok := groups.claim(p.Namespace, name)
		if !ok {
			return need, errNotReady{fmt.Sprintf("ResourceClaim %s not found", name)}
		}
		switch {
		case c.Status.Allocation == nil:
			open = append(open, c)
		case reservedForPod(c, p):
			held += len(c.Status.Allocation.Devices.Results)
		default:
			// Allocated for another pod (shared): its devices are counted as used.
		}
	}
	if len(open) > 0 {
		v := groups.devices()
		if v == nil {
			return need, errNotReady{"the DRA inventory is not read yet"}
		}
		var err error
		if need, err = v.claimDevices(string(p.UID), open); err != nil {
			return need, err
		}
	}
	need.gpus += held
	return need, nil
}

// errNotReady is a request that cannot be read yet but will be (a claim the
// controller has not created): the job waits rather than fails.
type errNotReady struct{ msg string }

func (e errNotReady) Error() string { return e.msg }

func reservedForPod(c *resourcev1.ResourceClaim, p *corev1.Pod) bool {
	for _, r := range c.Status.ReservedFor {
		if r.UID == p.UID {
			return true
		}
	}
	return false
}
