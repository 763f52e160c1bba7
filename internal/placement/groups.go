package placement

import "github.com/corral-dev/corral/internal/cluster"

// podGroup is a run of pods with the same request.
type podGroup struct {
	req   *PodReq
	count int
}

func groupPods(pods []PodReq) []podGroup {
	var out []podGroup
	for i := range pods {
		if len(out) > 0 && sameRequest(out[len(out)-1].req, &pods[i]) {
			out[len(out)-1].count++
			continue
		}
		out = append(out, podGroup{req: &pods[i], count: 1})
	}
	return out
}

func sameRequest(a, b *PodReq) bool {
	return a.Mask == b.Mask && a.Request.Equal(b.Request)
}

// bound is an upper bound, from domain aggregates alone, on how many of the
// pods (taken in order) domain d could hold now.
func (p *Placer) bound(d cluster.DomainID, groups []podGroup) int {
	return boundOn(p.s, d, groups, false)
}

func boundOn(s *cluster.State, d cluster.DomainID, groups []podGroup, capacity bool) int {
	return boundWith(s, d, groups, capacity, false)
}

// boundWith is boundOn; with exactMIG it counts the free instances of a MIG
// pod's profile (a walk over the domain's GPUs, for failure reasons) rather
// than bounding them by free compute (what the search uses: a domain it
// descends into for nothing is skipped at the node level).
func boundWith(s *cluster.State, d cluster.DomainID, groups []podGroup, capacity, exactMIG bool) int {
	cpu, mem := s.DomainFreeCPU(d), s.DomainFreeMem(d)
	total := 0
	for _, g := range groups {
		fit := g.count
		r := g.req
		switch {
		case r.shared() || r.MIG():
			// A share of one GPU: bounded by the free milli over the least
			// milli it can take (its fraction, its memory on the largest
			// GPU, its MIG compute share).
			least := int64(r.GPUMilli)
			if r.ByMemory() {
				least = int64(r.MemMilli)
			} else if r.MIG() {
				least = r.GPUMilliTotal()
			}
			if least <= 0 {
				fit = 0
			} else if !capacity && r.MIG() && exactMIG {
				fit = min(fit, freeInstances(s, d, r))
			} else if !capacity {
				if m := int(s.DomainFreeMilli(d, r.Mask) / least); m < fit {
					fit = m
				}
			} else if s.DomainCapacityGPUs(d, r.Mask) == 0 {
				fit = 0
			}
		case r.GPUs > 0:
			var m int
			if capacity {
				m = s.CapacityFitCount(d, r.Mask, r.GPUs)
			} else {
				m = s.FitCount(d, r.Mask, r.GPUs)
			}
			if m < fit {
				fit = m
			}
		}
		if r.nodes != nil && fit > 0 {
			fit = min(fit, eligibleCap(s, d, podGroup{req: r, count: fit}, capacity, exactMIG))
		}
		if len(r.Apart) > 0 {
			fit = apartCap(s, s.Domain(d).Level, r, fit)
		}
		if !capacity {
			if r.CPUMilli > 0 {
				if m := int(cpu / r.CPUMilli); m < fit {
					fit = m
				}
				cpu -= int64(fit) * r.CPUMilli
			}
			if r.MemMiB > 0 {
				if m := int(mem / r.MemMiB); m < fit {
					fit = m
				}
				mem -= int64(fit) * r.MemMiB
			}
		}
		total += fit
		if fit < g.count {
			// Later groups come after this one in the order pods are placed.
			break
		}
	}
	return total
}

// freeFor is how many GPUs (milli/1000) of the pods' models domain d has free;
// best fit prefers the domain left with the least.
func freeFor(s *cluster.State, d cluster.DomainID, groups []podGroup) int64 {
	var mask cluster.ModelMask
	for _, g := range groups {
		if g.req.GPUMilliTotal() > 0 {
			mask |= g.req.Mask
		}
	}
	if mask == 0 {
		return s.DomainFreeCPU(d)
	}
	return s.DomainFreeMilli(d, mask)
}
