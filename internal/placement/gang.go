// Package placement decides where pods go: a whole gang into the tightest
// topology domain that holds it, nodes inside that domain, and GPUs inside
// each node by interconnect distance. It works on a cluster.State that the
// caller treats as the cycle's running view.
package placement

import (
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// Assignment is one pod placed on one node with its devices.
type Assignment struct {
	Pod   workload.PodRef
	Node  int
	Alloc cluster.Alloc
}

// Placer places pods on a State it mutates; every placement it makes is
// recorded so that a failed gang can be rolled back exactly.
type Placer struct {
	s       *cluster.State
	scorer  Scorer
	devices DeviceOrder
	log     []Assignment
	// apart is the placed pods of log that carry anti-affinity terms.
	apart []apartMark
	// claimed are the domains exclusive gangs hold (exclusive.go);
	// claims are those made since the last Commit, undone by rollback.
	claimed map[cluster.DomainID]bool
	claims  []exclusiveClaim
}

// NewPlacer returns a Placer over the running view s.
func NewPlacer(s *cluster.State, scorer Scorer, devices DeviceOrder) *Placer {
	return &Placer{s: s, scorer: scorer, devices: devices}
}

// State is the running view the placer mutates.
func (p *Placer) State() *cluster.State { return p.s }

// mark and rollback undo placements back to a point.
func (p *Placer) mark() int { return len(p.log) }

func (p *Placer) rollback(m int) {
	for i := len(p.log) - 1; i >= m; i-- {
		a := p.log[i]
		p.s.Release(a.Node, a.Alloc)
	}
	p.log = p.log[:m]
	for len(p.apart) > 0 && p.apart[len(p.apart)-1].index >= m {
		p.apart = p.apart[:len(p.apart)-1]
	}
	for len(p.claims) > 0 && p.claims[len(p.claims)-1].index >= m {
		p.claims = p.claims[:len(p.claims)-1]
	}
}

// Commit forgets the rollback log: what was placed stays placed.
func (p *Placer) Commit() {
	for _, c := range p.claims {
		p.ClaimExclusive(c.d)
	}
	p.log, p.apart, p.claims = p.log[:0], p.apart[:0], p.claims[:0]
}

// Undo releases everything placed since the last Commit. The engine uses it
// when a placement that fits must still be refused (a queue limit), and
// preemption uses it to test a placement without keeping it.
func (p *Placer) Undo() { p.rollback(0) }

// canHost is the exact per-node feasibility check for one pod.
func canHost(s *cluster.State, n int, r *PodReq) bool {
	if !s.Schedulable(n) || !r.mayUse(n) || s.FreeCPU(n) < r.CPUMilli || s.FreeMem(n) < r.MemMiB {
		return false
	}
	if len(r.NodeLabels) > 0 && !r.NodeMatches(s.Node(n).Labels) {
		return false
	}
	if !r.NeedsGPU() {
		return true
	}
	if r.Devices != nil {
		return pickEligible(s, n, r, FirstFree) != nil // feasibility only: the cheap order
	}
	if r.MIG() {
		return migGPU(s, n, r, FirstFree) >= 0
	}
	if r.ByMemory() {
		found := false
		fractionalGPUs(s, n, r, func(int, int32) { found = true })
		return found
	}
	if lv := scopeLevel(r.Scope); lv >= 0 && !r.Fractional() {
		return pickScoped(s, n, r.GPUs, r.Mask, Interconnect, lv) != nil
	}
	need, per := r.DeviceCount(), int32(r.PerGPUMilli())
	for k, f := range s.GPUFree(n) {
		if f >= per && r.Mask.Has(s.DeviceModel(n, k)) {
			need--
			if need == 0 {
				return true
			}
		}
	}
	return false
}

// allocOn places r on node n, choosing devices; gpu is the scorer's choice for
// a fractional pod.
func (p *Placer) allocOn(n int, r *PodReq, gpu int) bool {
	if !p.apartOK(n, r) {
		return false
	}
	a := cluster.Alloc{CPUMilli: r.CPUMilli, MemMiB: r.MemMiB}
	switch {
	case r.MIG():
		if gpu < 0 {
			_, gpu = p.score(n, r)
		}
		share, ok := migShare(p.s, n, gpu, r)
		if !ok {
			return false
		}
		a.Devices = []cluster.DeviceShare{share}
	case r.shared():
		if gpu < 0 {
			_, gpu = p.scorer.Score(p.s, n, r)
		}
		if gpu < 0 {
			return false
		}
		milli, ok := shareMilli(p.s, n, gpu, r)
		if !ok {
			return false
		}
		a.Devices = []cluster.DeviceShare{{Device: gpu, Milli: milli}}
	case r.GPUs > 0:
		var devs []int
		if r.Devices != nil {
			devs = pickEligible(p.s, n, r, p.devices)
		} else {
			devs = pickScoped(p.s, n, r.GPUs, r.Mask, p.devices, scopeLevel(r.Scope))
		}
		if devs == nil {
			return false
		}
		for _, d := range devs {
			a.Devices = append(a.Devices, cluster.DeviceShare{Device: d, Milli: 1000})
		}
	}
	if p.s.Allocate(n, a) != nil {
		return false
	}
	p.record(r, n, a)
	return true
}

// PlacePod places a single pod on the best-scoring node of the domain (the
// whole cluster for domain 0), ignoring topology. It is the pod-by-pod path
// the baselines use.
func (p *Placer) PlacePod(r *PodReq, within cluster.DomainID) (Assignment, bool) {
	// Every node of the domain is scored, as kube-scheduler does: the
	// baselines know nothing of the topology tree.
	n, gpu := -1, -1
	var best float64
	var bestPref int64
	dom := p.s.Domain(within)
	for i := dom.Lo; i < dom.Hi; i++ {
		if !canHost(p.s, i, r) || !p.apartOK(i, r) {
			continue
		}
		score, g := p.score(i, r)
		if pref := r.preference(i); n < 0 || score > best || score == best && pref > bestPref {
			n, gpu, best, bestPref = i, g, score, pref
		}
	}
	if n < 0 || !p.allocOn(n, r, gpu) {
		return Assignment{}, false
	}
	a := p.log[len(p.log)-1]
	return a, true
}

// bestNode finds a node of domain d where all pods fit. Above the hosts it
// descends into the fullest child domain that can still hold the pods (best
// fit keeps emptier racks and blocks whole for gangs); among the nodes of one
// host-parent domain it takes the best score. Subtrees whose aggregates
// cannot hold the pods are skipped; if a chosen child turns out to fit
// nothing exactly, the next one is tried.
func (p *Placer) bestNode(d cluster.DomainID, pods []PodReq) (best int, bestGPU int) {
	groups := groupPods(pods)
	host := p.s.HostLevel()
	dom := p.s.Domain(d)
	if d == 0 && pods[0].MIG() && boundWith(p.s, d, groups, false, true) < len(pods) {
		// Too few free instances of the profile anywhere: one walk over the
		// GPUs saves descending into every rack.
		return -1, -1
	}
	if dom.Level == host {
		if _, gpu, ok := p.scoreNode(dom.Lo, pods); ok {
			return dom.Lo, gpu
		}
		return -1, -1
	}
	children := dom.Children
	if p.s.Domain(children[0]).Level == host {
		best, bestGPU = -1, -1
		var bestScore float64
		var bestPref int64
		for _, c := range children {
			n := p.s.Domain(c).Lo
			score, gpu, ok := p.scoreNode(n, pods)
			if !ok {
				continue
			}
			if pref := preferenceOf(n, pods); best < 0 || score > bestScore || score == bestScore && pref > bestPref {
				best, bestGPU, bestScore, bestPref = n, gpu, score, pref
			}
		}
		return best, bestGPU
	}
	for _, c := range p.rankDomains(children, nil, pods, groups) {
		if !p.oneNodeMayHold(c, groups) {
			continue
		}
		if n, gpu := p.bestNode(c, pods); n >= 0 {
			return n, gpu
		}
	}
	return -1, -1
}

// oneNodeMayHold reports whether some node of d could hold all the whole-GPU
// pods together, from the per-node histograms of the domain.
func (p *Placer) oneNodeMayHold(d cluster.DomainID, groups []podGroup) bool {
	need := map[cluster.ModelMask]int{}
	var masks []cluster.ModelMask
	for _, g := range groups {
		if g.req.whole() {
			if _, ok := need[g.req.Mask]; !ok {
				masks = append(masks, g.req.Mask)
			}
			need[g.req.Mask] += g.count * g.req.GPUs
		}
	}
	for _, m := range masks {
		if p.s.MostFreeOnANode(d, m) < need[m] {
			return false
		}
	}
	return true
}

// scoreNode rates putting every pod of pods on node n. A single pod is scored
// directly; several are placed tentatively one after another and rolled back.
func (p *Placer) scoreNode(n int, pods []PodReq) (float64, int, bool) {
	if len(pods) == 1 {
		if !canHost(p.s, n, &pods[0]) {
			return 0, -1, false
		}
		score, gpu := p.score(n, &pods[0])
		return score, gpu, true
	}
	m := p.mark()
	defer p.rollback(m)
	total := 0.0
	for i := range pods {
		if !canHost(p.s, n, &pods[i]) {
			return 0, -1, false
		}
		score, gpu := p.score(n, &pods[i])
		if !p.allocOn(n, &pods[i], gpu) {
			return 0, -1, false
		}
		total += score
	}
	return total, -1, true
}

// fill places pods into domain d, spanning as few of its children as possible.
// With all set it places every pod or none; otherwise it places a prefix and
// returns how many.
func (p *Placer) fill(d cluster.DomainID, pods []PodReq, all bool) int {
	m := p.mark()
	dom := p.s.Domain(d)
	placed := 0
	if dom.Level == p.s.HostLevel() {
		n := dom.Lo
		for placed < len(pods) {
			r := &pods[placed]
			if !canHost(p.s, n, r) {
				break
			}
			_, gpu := p.score(n, r)
			if !p.allocOn(n, r, gpu) {
				break
			}
			placed++
		}
	} else {
		used := map[cluster.DomainID]bool{}
		for placed < len(pods) {
			rest := pods[placed:]
			groups := groupPods(rest)
			if p.placeWhole(dom.Children, used, rest, groups) {
				placed = len(pods)
				break
			}
			// No single child holds the rest: fill the roomiest child.
			var pick cluster.DomainID = -1
			pickBound := 0
			for _, c := range dom.Children {
				if used[c] {
					continue
				}
				if b := p.bound(c, groups); b > pickBound {
					pick, pickBound = c, b
				}
			}
			if pick < 0 {
				break
			}
			used[pick] = true
			k := p.fill(pick, rest, false)
			placed += k
		}
	}
	if all && placed < len(pods) {
		p.rollback(m)
		return 0
	}
	return placed
}

// Gang asks for all pods of a job to be placed together.
type Gang struct {
	Pods      []PodReq
	Required  int // level index every pod must share a domain of; -1 none
	Preferred int // level index tried first; -1 none
	// Within pins every pod inside one domain (0, the cluster, pins
	// nothing): the rest of a partly bound gang must join the domain its
	// bound pods occupy, and a replaced rank stays in its gang's rack.
	Within cluster.DomainID
	// Exclusive, above 0, is a level index: each part of the gang (the
	// pods sharing a PartOf value) goes into a domain of that level of its
	// own, one no other exclusive gang holds (exclusive.go). 0: none.
	Exclusive int
	// PartOf is each pod's part, parallel to Pods; used with Exclusive.
	PartOf []int
}

// Result is where a gang went, or why not.
type Result struct {
	Assignments []Assignment
	Level       int // the level of the single domain holding the gang
	Domain      cluster.DomainID
	Failure     *Failure
}

// PlaceGang places every pod of g or none. It looks for the lowest level
// with a domain that holds the whole gang, from the host up to the required
// level (or the cluster), and within that domain spans as few child domains
// as it can.
func (p *Placer) PlaceGang(g Gang) Result {
	if g.Exclusive > 0 {
		return p.placeExclusive(g)
	}
	host := p.s.HostLevel()
	top := 0
	if g.Required >= 0 {
		top = g.Required
	}
	within := p.s.Domain(g.Within)
	if within.Level > top {
		top = within.Level
	}
	pods := g.Pods
	groups := groupPods(pods)
	m := p.mark()
	floor := spreadFloor(p.s, pods)
	for lv := host; lv >= top; lv-- {
		if lv < host && len(pods) == 1 {
			// One pod is always on one node: nothing above the host can help.
			break
		}
		if lv >= floor {
			// Anti-affinity keeps two of the pods out of any one domain here.
			continue
		}
		if lv == host {
			n, gpu := p.bestNode(g.Within, pods)
			if n < 0 {
				continue
			}
			ok := true
			for i := range pods {
				gg := -1
				if i == 0 {
					gg = gpu
				}
				if !p.allocOn(n, &pods[i], gg) {
					ok = false
					break
				}
			}
			if ok {
				return Result{Assignments: p.taken(m), Level: host, Domain: p.s.NodeDomain(n, host)}
			}
			p.rollback(m)
			continue
		}
		for _, d := range p.rankDomains(domainsInside(p.s, lv, within), nil, pods, groups) {
			if p.fill(d, pods, true) == len(pods) {
				return Result{Assignments: p.taken(m), Level: lv, Domain: d}
			}
		}
	}
	return Result{Failure: explain(p.s, g, groups, top)}
}

func (p *Placer) taken(m int) []Assignment {
	return append([]Assignment(nil), p.log[m:]...)
}
