package placement

import (
	"slices"
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
	if !r.NeedsGPU() {
		return cluster.AllModels, nil
	}
	if r.MIG() {
		return migMask(s, r), nil
	}
	mask, unknown := requestMask(s, r)
	if mask != 0 && mask&^s.MIGMask() == 0 {
		// MIG GPUs serve only MIG instances.
		return 0, []string{"(a GPU not in MIG mode)"}
	}
	return mask &^ s.MIGMask(), unknown
}

// migMask is the set of MIG models whose geometry offers r's profile and
// whose GPU model r accepts.
func migMask(s *cluster.State, r workload.Request) cluster.ModelMask {
	var mask cluster.ModelMask
	for i, name := range s.Models() {
		g := s.MIGGeometry(i)
		if g == nil {
			continue
		}
		if _, ok := g.Profile(r.MIGProfile); !ok {
			continue
		}
		base, _ := cluster.MIGBaseModel(name)
		if len(r.Models) == 0 || slices.Contains(r.Models, base) || slices.Contains(r.Models, g.Name) {
			mask |= 1 << uint(i)
		}
	}
	return mask
}

func requestMask(s *cluster.State, r workload.Request) (cluster.ModelMask, []string) {
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
