package preempt

import (
	"math"
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
)

// trial is one copy of the running view on which victims are taken out and
// put back, and the gang's placement is tested.
type trial struct {
	p      *Problem
	res    *Result
	s      *cluster.State
	placer *placement.Placer
	taken  []bool
	// The gang's size in the unit scopes are measured in: GPU-milli of the
	// models it accepts, or CPU milli for a CPU-only gang.
	gpu    bool
	mask   cluster.ModelMask
	size   int64
	bounds []float64
	// anySet skips Allowed: the first test, with every unit out, asks only
	// whether room could be made at all.
	anySet bool
	// neededBy[i] is the unit that needs unit i (-1: none); onNode lists
	// the units with a pod on each node, so a domain's units are found from
	// its node range.
	neededBy []int
	onNode   [][]int
}

func newTrial(p *Problem, res *Result) *trial {
	t := &trial{p: p, res: res, s: p.View.Clone(), taken: make([]bool, len(p.Units)),
		neededBy: make([]int, len(p.Units)), onNode: make([][]int, p.View.NumNodes())}
	t.placer = placement.NewPlacer(t.s, p.Scorer, p.Devices)
	for i := range t.neededBy {
		t.neededBy[i] = -1
	}
	for i := range p.Units {
		if n := p.Units[i].Needs; n >= 0 && n < len(p.Units) {
			t.neededBy[n] = i
		}
		for _, pod := range p.Units[i].Pods {
			if l := t.onNode[pod.NodeIndex]; len(l) == 0 || l[len(l)-1] != i {
				t.onNode[pod.NodeIndex] = append(l, i)
			}
		}
	}
	for _, pod := range p.Gang.Pods {
		if g := pod.GPUMilliTotal(); g > 0 {
			t.gpu = true
			t.mask |= pod.Mask
			t.size += g
		}
	}
	if !t.gpu {
		for _, pod := range p.Gang.Pods {
			t.size += pod.CPUMilli
		}
	}
	return t
}

// healthy drops shares of failed devices: releasing them gives nothing back,
// so taking them again must not ask for them either.
func (t *trial) healthy(pod cluster.Placed) cluster.Alloc {
	a := pod.Alloc
	for _, d := range a.Devices {
		if !t.s.DeviceHealthy(pod.NodeIndex, d.Device) {
			a.Devices = nil
			for _, e := range pod.Alloc.Devices {
				if t.s.DeviceHealthy(pod.NodeIndex, e.Device) {
					a.Devices = append(a.Devices, e)
				}
			}
			break
		}
	}
	return a
}

// take evicts unit i on the copy, with the unit it needs.
func (t *trial) take(i int) {
	if t.taken[i] {
		return
	}
	if n := t.p.Units[i].Needs; n >= 0 {
		t.take(n)
	}
	for _, pod := range t.p.Units[i].Pods {
		t.s.Release(pod.NodeIndex, t.healthy(pod))
	}
	t.taken[i] = true
}

// put gives unit i its pods back, with every taken unit that needs it.
func (t *trial) put(i int) {
	if !t.taken[i] {
		return
	}
	if j := t.neededBy[i]; j >= 0 {
		t.put(j)
	}
	for _, pod := range t.p.Units[i].Pods {
		// The pod held exactly this before it was released on this copy.
		_ = t.s.Allocate(pod.NodeIndex, t.healthy(pod))
	}
	t.taken[i] = false
}

func (t *trial) reset() {
	for i := range t.taken {
		t.put(i)
	}
}

// fits is one evaluation: does the gang fit on the copy as it stands (and,
// for a consolidation, do the victims fit again beside it)?
func (t *trial) fits() bool {
	if t.res.Evaluations >= t.p.Budget {
		t.res.GaveUp = true
		return false
	}
	t.res.Evaluations++
	if !t.anySet && !t.allowed() {
		return false
	}
	if r := t.placer.PlaceGang(t.p.Gang); r.Failure != nil {
		return false
	}
	ok := true
	if t.p.Move {
		for i := range t.p.Units {
			if g := t.p.Units[i].Gang; t.taken[i] && g != nil {
				if r := t.placer.PlaceGang(*g); r.Failure != nil {
					ok = false
					break
				}
			}
		}
	}
	t.placer.Undo()
	return ok
}

// greedy takes units in order until the gang fits, then puts back every unit
// it turns out not to need (in pruneOrder). It gives up on a set once it
// costs best or more.
func (t *trial) greedy(order []int, need int64, freed map[int]int64, pruneOrder func([]int) []int, best float64) ([]int, float64, bool) {
	t.reset()
	defer t.reset()
	var taken []int
	var got int64
	var cost float64
	ok := false
	for _, u := range order {
		if t.taken[u] {
			continue
		}
		was := append([]bool(nil), t.taken...)
		t.take(u)
		if !t.allowed() {
			// A victim the rules refuse in this set is skipped, not taken:
			// taking more can only make the set worse.
			t.res.Refused++
			for i, now := range t.taken {
				if now && !was[i] {
					t.put(i)
				}
			}
			continue
		}
		for i, now := range t.taken {
			if now && !was[i] {
				taken = append(taken, i)
				cost += t.p.Units[i].Cost
				got += freed[i]
			}
		}
		if cost >= best {
			return nil, 0, false
		}
		if got < need {
			continue // cannot fit yet: do not spend an evaluation
		}
		if t.fits() {
			ok = true
			break
		}
		if t.res.GaveUp {
			return nil, 0, false
		}
	}
	if !ok {
		return nil, 0, false
	}
	for _, u := range pruneOrder(taken) {
		if t.isNeeded(u) {
			continue
		}
		t.put(u)
		if t.fits() {
			cost -= t.p.Units[u].Cost
			continue
		}
		t.take(u)
		if t.res.GaveUp {
			break // the set as it stands was proven to fit
		}
	}
	var set []int
	for _, u := range taken {
		if t.taken[u] {
			set = append(set, u)
		}
	}
	return set, cost, true
}

// allowed asks Problem.Allowed about the set taken now (no placement).
func (t *trial) allowed() bool {
	if t.p.Allowed == nil {
		return true
	}
	var set []int
	for i, in := range t.taken {
		if in {
			set = append(set, i)
		}
	}
	return t.p.Allowed(set)
}

func (t *trial) isNeeded(u int) bool {
	j := t.neededBy[u]
	return j >= 0 && t.taken[j]
}

// scope is one topology domain the gang could land in once victims there
// are gone.
type scope struct {
	d     cluster.DomainID
	level int
	order []int // units with pods in d, least cost per amount freed first
	freed map[int]int64
	need  int64
	// bound is a lower bound on the cost of any set of these units that
	// frees need in d (the fractional-knapsack bound).
	bound float64
}

// scope measures domain d: what each unit frees there and what is missing.
func (t *trial) scope(d cluster.DomainID) *scope {
	dom := t.s.Domain(d)
	sc := &scope{d: d, level: dom.Level, freed: map[int]int64{}}
	seen := map[int]bool{}
	var inDomain []int
	for n := dom.Lo; n < dom.Hi; n++ {
		for _, u := range t.onNode[n] {
			if !seen[u] {
				seen[u] = true
				inDomain = append(inDomain, u)
			}
		}
	}
	sort.Ints(inDomain)
	for _, i := range inDomain {
		var f int64
		touches := false
		for _, pod := range t.p.Units[i].Pods {
			if pod.NodeIndex < dom.Lo || pod.NodeIndex >= dom.Hi {
				continue
			}
			touches = true
			if t.gpu {
				for _, sh := range t.healthy(pod).Devices {
					if t.mask.Has(t.s.DeviceModel(pod.NodeIndex, sh.Device)) {
						f += int64(sh.Milli)
					}
				}
			} else {
				f += pod.Alloc.CPUMilli
			}
		}
		if touches {
			sc.order = append(sc.order, i)
			sc.freed[i] = f
		}
	}
	var free int64
	if t.gpu {
		free = t.s.DomainFreeMilli(d, t.mask)
		if dom.Level == t.s.HostLevel() {
			free = 0
			for k, v := range t.s.GPUFree(dom.Lo) {
				if t.mask.Has(t.s.DeviceModel(dom.Lo, k)) {
					free += int64(v)
				}
			}
		}
	} else {
		free = t.s.DomainFreeCPU(d)
	}
	sc.need = max(0, t.size-free)
	ratio := func(u int) float64 {
		if sc.freed[u] <= 0 {
			return math.Inf(1)
		}
		return t.p.Units[u].Cost / float64(sc.freed[u])
	}
	sort.SliceStable(sc.order, func(a, b int) bool {
		x, y := sc.order[a], sc.order[b]
		if rx, ry := ratio(x), ratio(y); rx != ry {
			return rx < ry
		}
		if t.p.Units[x].Cost != t.p.Units[y].Cost {
			return t.p.Units[x].Cost < t.p.Units[y].Cost
		}
		return x < y
	})
	left := sc.need
	for _, u := range sc.order {
		if left <= 0 {
			break
		}
		f := sc.freed[u]
		if f <= 0 {
			break
		}
		if f >= left {
			sc.bound += t.p.Units[u].Cost * float64(left) / float64(f)
		} else {
			sc.bound += t.p.Units[u].Cost
		}
		left -= f
	}
	if left > 0 {
		sc.bound = math.Inf(1) // these victims cannot free enough here
	}
	return sc
}

// scopes lists the domains worth searching, most promising first: every
// domain at or below the gang's required level (hosts only when the gang's
// GPUs fit on one node) whose victims could free enough, by lower bound on
// the cost, then tighter levels first, then topology order.
func (t *trial) scopes() []*scope {
	top := 0
	if t.p.Gang.Required >= 0 {
		top = t.p.Gang.Required
	}
	host := t.s.HostLevel()
	var out []*scope
	for lv := top; lv <= host; lv++ {
		if lv == host && !t.fitsOneNode() {
			continue
		}
		for _, d := range t.s.DomainsAt(lv) {
			sc := t.scope(d)
			if len(sc.order) == 0 || math.IsInf(sc.bound, 1) {
				continue
			}
			t.bounds = append(t.bounds, sc.bound)
			out = append(out, sc)
		}
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].bound != out[b].bound {
			return out[a].bound < out[b].bound
		}
		if out[a].level != out[b].level {
			return out[a].level > out[b].level
		}
		return out[a].d < out[b].d
	})
	return out
}

// scopesInTopologyOrder is scopes() ordered by level (tightest first),
// then topology order, without looking at costs.
func (t *trial) scopesInTopologyOrder() []*scope {
	out := t.scopes()
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].level != out[b].level {
			return out[a].level > out[b].level
		}
		return out[a].d < out[b].d
	})
	return out
}

// fitsOneNode: could the whole gang ever sit on one node of the cluster?
func (t *trial) fitsOneNode() bool {
	if len(t.p.Gang.Pods) == 1 {
		return true
	}
	for n := 0; n < t.s.NumNodes(); n++ {
		node := t.s.Node(n)
		var gpus int64
		for k := range node.Devices {
			if t.mask.Has(t.s.DeviceModel(n, k)) {
				gpus += 1000
			}
		}
		if !t.gpu || gpus >= t.size {
			return true
		}
	}
	return false
}
