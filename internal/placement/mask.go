package placement

import (
	"strings"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// DRAModelPrefix starts the model name of every GPU a DRA driver publishes.
// DRA GPUs and extended-resource GPUs are separate resources: a device is
// handed out by exactly one of the two mechanisms, so a pod asking for one
// kind must never land on the other.
const DRAModelPrefix = "dra:"

// RequestMask is the set of the cluster's models that may serve r, and the
// names r asked for that the cluster lacks.
func RequestMask(s *cluster.State, r workload.Request) (cluster.ModelMask, []string) {
	if r.GPUMilliTotal() == 0 {
		return cluster.AllModels, nil
	}
	if len(r.Models) == 0 {
		var mask cluster.ModelMask
		for i, m := range s.Models() {
			if strings.HasPrefix(m, DRAModelPrefix) == r.DRA {
				mask |= 1 << uint(i)
			}
		}
		if mask == 0 {
			if r.DRA {
				return 0, []string{"(any GPU published through DRA)"}
			}
			return 0, []string{"(any GPU of the extended resource)"}
		}
		return mask, nil
	}
	names := r.Models
	if r.DRA {
		names = make([]string, len(r.Models))
		for i, m := range r.Models {
			names[i] = DRAModelPrefix + m
		}
	}
	return s.Mask(names)
}
