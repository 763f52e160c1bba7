package placement

import (
	"cmp"
	"slices"
	"strings"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/mig"
)

// MIG placement.
//
// A pod asking for one instance of a MIG profile takes a free instance of
// that profile on a MIG GPU whose geometry offers it. Which GPU: corral
// (Interconnect order) packs instances onto GPUs that already have
// instances in use and, among those, onto the GPU left with the least free
// compute (best fit), so that idle GPUs stay idle: only an idle GPU can be
// re-partitioned when the existing layouts do not fit a later request. The
// baselines (FirstFree) take the lowest-numbered GPU with a free instance,
// as the device plugin does, and never re-partition.
//
// When no free instance serves a gang, PlanMIG re-partitions idle GPUs in
// the running view (see there); the layout it gives a GPU is chosen by
// layoutFor.

// score rates node n for r and names the GPU, as Scorer.Score does; MIG pods
// are rated here rather than by the scorer.
func (p *Placer) score(n int, r *PodReq) (float64, int) {
	if !r.MIG() {
		return p.scorer.Score(p.s, n, r)
	}
	if p.devices == FirstFree {
		sc, _ := p.scorer.Score(p.s, n, r)
		return sc, migGPU(p.s, n, r, FirstFree)
	}
	k := migGPU(p.s, n, r, Interconnect)
	if k < 0 {
		return 0, -1
	}
	// The device term dominates; best fit on the node's free MIG compute
	// breaks ties between nodes.
	var nodeFree int64
	for j, f := range p.s.GPUFree(n) {
		if r.Mask.Has(p.s.DeviceModel(n, j)) {
			nodeFree += int64(f)
		}
	}
	return migDeviceScore(p.s, n, k, r) - float64(nodeFree)*1e-6, k
}

// migGPU is the GPU of node n whose free instance r should take, or -1.
func migGPU(s *cluster.State, n int, r *PodReq, order DeviceOrder) int {
	best, bestScore := -1, 0.0
	for k := range s.Node(n).Devices {
		if !r.Mask.Has(s.DeviceModel(n, k)) || !s.DeviceHealthy(n, k) || s.MIGPending(n, k) ||
			s.MIGFreeInstance(n, k, r.MIGProfile) < 0 {
			continue
		}
		if order == FirstFree {
			return k
		}
		if sc := migDeviceScore(s, n, k, r); best < 0 || sc > bestScore {
			best, bestScore = k, sc
		}
	}
	return best
}

// migDeviceScore prefers GPUs with instances in use, then the GPU left with
// the least free compute.
func migDeviceScore(s *cluster.State, n, k int, r *PodReq) float64 {
	sc := 0.0
	if s.MIGUsed(n, k) != 0 {
		sc += 1e4
	}
	return sc - float64(s.GPUFree(n)[k]-int32(r.GPUMilliTotal()))
}

// migShare is the device share for r's instance on device k of node n.
func migShare(s *cluster.State, n, k int, r *PodReq) (cluster.DeviceShare, bool) {
	if k < 0 || !r.Mask.Has(s.DeviceModel(n, k)) || s.MIGPending(n, k) {
		return cluster.DeviceShare{}, false
	}
	return instanceShare(s, n, k, r)
}

// instanceShare is the share of r's free instance on device k of node n,
// whether or not the GPU waits for a re-partition.
func instanceShare(s *cluster.State, n, k int, r *PodReq) (cluster.DeviceShare, bool) {
	i := s.MIGFreeInstance(n, k, r.MIGProfile)
	if i < 0 {
		return cluster.DeviceShare{}, false
	}
	ref, ok := s.MIGRef(n, k, s.MIGLayout(n, k)[i])
	return cluster.DeviceShare{Device: k, Milli: int32(r.GPUMilliTotal()), MIG: ref}, ok
}

// Repartition is a planned re-partition of one idle MIG GPU.
type Repartition struct {
	Node, Device int
	Layout       mig.Layout
	Old          mig.Layout
}

// PlanMIG serves a gang of MIG pods that PlaceGang could not place by
// re-partitioning idle MIG GPUs in the running view. Pod by pod it takes a
// free instance as PlaceGang would; else a free instance of a GPU already
// waiting for a re-partition (planned earlier in the cycle, or asked of the
// node before); else it re-partitions an idle GPU (no instance in use, no
// re-partition pending) into layoutFor's layout and takes an instance of
// it. A GPU with an instance in use is never re-partitioned.
//
// On success the pods' instances are reserved in the view (Commit keeps
// them) and waits is true when some pod waits for a re-partition: such a
// gang is not bound this cycle, because its instances do not exist yet.
// On failure nothing in the view changes. Gangs with a required topology
// level are left to PlaceGang.
func (p *Placer) PlanMIG(g Gang, mix Mix) (res Result, planned []Repartition, waits bool, ok bool) {
	if g.Required >= 0 {
		return Result{}, nil, false, false
	}
	for i := range g.Pods {
		if !g.Pods[i].MIG() {
			return Result{}, nil, false, false
		}
	}
	m := p.mark()
	fail := func() (Result, []Repartition, bool, bool) {
		p.rollback(m)
		for i := len(planned) - 1; i >= 0; i-- {
			rp := planned[i]
			_ = p.s.SetMIGLayout(rp.Node, rp.Device, rp.Old, false)
		}
		return Result{}, nil, false, false
	}
	for i := range g.Pods {
		r := &g.Pods[i]
		if n, gpu := p.bestNode(0, g.Pods[i:i+1]); n >= 0 && p.allocOn(n, r, gpu) {
			continue
		}
		n, k := p.pendingInstance(r)
		if n < 0 {
			n, k = p.idleGPU(r)
			if n < 0 {
				return fail()
			}
			geom := p.s.MIGGeometry(p.s.DeviceModel(n, k))
			l := layoutFor(geom, r.MIGProfile, mix)
			rp := Repartition{Node: n, Device: k, Layout: l, Old: p.s.MIGLayout(n, k)}
			if p.s.SetMIGLayout(n, k, l, true) != nil {
				return fail()
			}
			planned = append(planned, rp)
		}
		share, _ := instanceShare(p.s, n, k, r)
		a := cluster.Alloc{CPUMilli: r.CPUMilli, MemMiB: r.MemMiB, Devices: []cluster.DeviceShare{share}}
		if p.s.Allocate(n, a) != nil {
			return fail()
		}
		p.record(r, n, a)
		waits = true
	}
	return Result{Assignments: p.taken(m), Level: 0, Domain: 0}, planned, waits, true
}

// fitsBesides reports whether node n could take r's CPU, memory and labels.
func (p *Placer) fitsBesides(n int, r *PodReq) bool {
	return p.s.Schedulable(n) && r.mayUse(n) && p.apartOK(n, r) && p.s.FreeCPU(n) >= r.CPUMilli && p.s.FreeMem(n) >= r.MemMiB &&
		(len(r.NodeLabels) == 0 || r.NodeMatches(p.s.Node(n).Labels))
}

// pendingInstance finds a GPU waiting for a re-partition whose planned
// layout has a free instance of r's profile, first in node order.
func (p *Placer) pendingInstance(r *PodReq) (int, int) {
	for n := 0; n < p.s.NumNodes(); n++ {
		if p.s.NodeModels(n)&r.Mask == 0 || !p.fitsBesides(n, r) {
			continue
		}
		for k := range p.s.Node(n).Devices {
			if r.Mask.Has(p.s.DeviceModel(n, k)) && p.s.DeviceHealthy(n, k) && p.s.MIGPending(n, k) &&
				p.s.MIGFreeInstance(n, k, r.MIGProfile) >= 0 {
				return n, k
			}
		}
	}
	return -1, -1
}

// freeInstances counts the free instances of r's profile that can be bound
// now (not waiting for a re-partition) on the nodes of domain d.
func freeInstances(s *cluster.State, d cluster.DomainID, r *PodReq) int {
	return s.DomainFreeMIG(d, r.Mask, r.MIGProfile)
}

// idleGPU picks the idle MIG GPU to re-partition for r: one with no
// instances first (nothing is destroyed), then on the node with the most MIG
// compute in use (best fit: emptier nodes stay whole), then in node order.
func (p *Placer) idleGPU(r *PodReq) (int, int) {
	type cand struct {
		n, k      int
		laidOut   bool
		nodeInUse int64
	}
	var best *cand
	for n := 0; n < p.s.NumNodes(); n++ {
		if p.s.NodeModels(n)&r.Mask == 0 || !p.fitsBesides(n, r) {
			continue
		}
		var inUse int64
		free := p.s.GPUFree(n)
		for k := range free {
			if p.s.MIGGeometry(p.s.DeviceModel(n, k)) != nil && p.s.DeviceHealthy(n, k) {
				inUse += int64(1000 - free[k])
			}
		}
		for k := range free {
			if !r.Mask.Has(p.s.DeviceModel(n, k)) || !p.s.DeviceHealthy(n, k) || p.s.MIGPending(n, k) ||
				p.s.MIGUsed(n, k) != 0 {
				continue
			}
			c := cand{n: n, k: k, laidOut: len(p.s.MIGLayout(n, k)) > 0, nodeInUse: inUse}
			if best == nil || c.laidOut != best.laidOut && !c.laidOut ||
				c.laidOut == best.laidOut && c.nodeInUse > best.nodeInUse {
				best = &c
			}
		}
	}
	if best == nil {
		return -1, -1
	}
	return best.n, best.k
}

// fillProfile is what fills a GPU's slices the mix says nothing about: more
// of the asked profile, else the largest profile that still fits (so no
// slice is left without an instance); "" when nothing fits.
func fillProfile(geom *mig.Model, l mig.Layout, profile string) string {
	if _, ok := geom.Place(l, profile); ok {
		return profile
	}
	best := -1
	for i, pr := range geom.Profiles {
		if strings.HasSuffix(pr.Name, "+me") {
			continue // media extensions are asked for, never given by default
		}
		if _, ok := geom.Place(l, pr.Name); !ok {
			continue
		}
		if best < 0 || pr.Memory > geom.Profiles[best].Memory ||
			pr.Memory == geom.Profiles[best].Memory && pr.Compute > geom.Profiles[best].Compute {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return geom.Profiles[best].Name
}

// layoutFor is the layout an idle GPU of geometry geom is re-partitioned into
// to serve one instance of profile: that instance, then the GPU's remaining
// slices filled with the MIG profiles of the expected mix in proportion to
// their weights (each step adds the profile with the highest weight per
// instance already in the layout that still fits), or by fillProfile when
// the mix has no MIG shape that fits. The instances are finally
// laid out by mig.Repartition, which keeps the most headroom.
func layoutFor(geom *mig.Model, profile string, mix Mix) mig.Layout {
	weights := map[string]float64{}
	for _, e := range mix {
		if _, ok := geom.Profile(e.Request.MIGProfile); ok && e.Request.MIG() {
			weights[e.Request.MIGProfile] += e.Weight
		}
	}
	start, _ := geom.Place(nil, profile)
	l := mig.Layout{{Profile: profile, Start: start}}
	counts := map[string]int{profile: 1}
	for {
		best, bestV := "", -1.0
		for _, pr := range geom.Profiles {
			w := weights[pr.Name]
			if w <= 0 {
				continue
			}
			if _, ok := geom.Place(l, pr.Name); !ok {
				continue
			}
			if v := w / float64(counts[pr.Name]+1); v > bestV {
				best, bestV = pr.Name, v
			}
		}
		if best == "" {
			best = fillProfile(geom, l, profile)
			if best == "" {
				break
			}
		}
		st, _ := geom.Place(l, best)
		l = append(l, mig.Instance{Profile: best, Start: st})
		counts[best]++
	}
	if better, ok := geom.Repartition(counts); ok {
		return better
	}
	slices.SortFunc(l, func(a, b mig.Instance) int { return cmp.Compare(a.Start, b.Start) })
	return l
}
