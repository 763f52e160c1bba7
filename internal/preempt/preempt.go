// Package preempt chooses the running work to evict so that a waiting gang
// fits: for preemption inside a queue, for reclaim across queues and for
// consolidation (moving cheap jobs so that a whole domain frees up).
//
// It is engine code: no k8s.io, no I/O, no clock, deterministic. Room is
// one cycle's preemption: which running jobs are eligible (the rules, what
// each would cost to restart, whether to wait for a checkpoint), reached
// through the cycle's ledger (the Ledger interface declared here). Search
// finds the set of victims that loses the least work, and proves every set
// it returns by placing the gang on a copy of the running view with the
// victims removed. It never returns victims for a gang that would still
// not fit.
package preempt

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Unit is pods that can be evicted together without leaving a gang below its
// minimum: a whole job, or an elastic job's pods above its minimum. An
// elastic job is two units: its pods above the minimum, and its minimum,
// which Needs the first (taking it restarts the whole job).
type Unit struct {
	Job  workload.JobID
	Pods []cluster.Placed
	// Cost is what the search weighs: the work the eviction throws away,
	// in GPU-seconds (RestartCost of these pods), or less for a victim
	// the preemption would wait for (AwaitedCost).
	Cost float64
	// Lost is the work evicting it now throws away (RestartCost), as the
	// eviction reports it.
	Lost     float64
	Priority int32
	Start    time.Time
	// Needs is the index of the unit that must be evicted with this one, or -1.
	Needs int
	// Gang re-places the job elsewhere (consolidation only): its pods as
	// placement requests. Nil for preemption.
	Gang *placement.Gang
}

// Strategy is how victims are chosen.
type Strategy uint8

const (
	// LeastLost minimises the total restart cost: it searches topology
	// domains in order of a lower bound on what freeing each would cost
	// (skipping those whose bound is above a set already proven),
	// fills each with the victims that lose the least work per GPU freed,
	// drops every victim the gang turns out not to need, and keeps the
	// cheapest proven set.
	LeastLost Strategy = iota
	// LowestPriorityNewest is the peers' policy, kept as a baseline: victims
	// in order of lowest priority, then newest start, until the gang fits,
	// then the ones it did not need are put back (last taken first). It
	// searches the same topology domains as LeastLost (tightest level
	// first) and keeps the first set that makes room: only the choice of
	// victims differs.
	LowestPriorityNewest
)

func (s Strategy) String() string {
	if s == LowestPriorityNewest {
		return "lowest-priority-newest"
	}
	return "least-lost"
}

// Problem is one search.
type Problem struct {
	// View is the cycle's running view; the search works on copies.
	View    *cluster.State
	Gang    placement.Gang
	Scorer  placement.Scorer
	Devices placement.DeviceOrder
	Units   []Unit
	// Budget caps the placements tried (each test of "does the gang fit
	// with these victims out" is one). The search stops there and keeps the
	// best set proven so far.
	Budget   int
	Strategy Strategy
	// Move makes the search a consolidation: every victim's Gang must fit
	// again outside what the waiting gang takes, on the same copy.
	Move bool
	// MaxCost rejects sets costing this much or more (0: no cap).
	MaxCost float64
	// Allowed, if set, vets a whole set of victims (indexes into Units)
	// that makes room; a set it refuses counts as not making room.
	Allowed func(victims []int) bool
}

// Result is the chosen victims, or why there are none.
type Result struct {
	Found   bool
	Victims []int // indexes into Problem.Units, ascending
	Cost    float64
	// Evaluations is the placements tried; GaveUp says the budget ran out
	// before every promising domain was searched.
	Evaluations int
	GaveUp      bool
	// Refused counts the victims Problem.Allowed turned away from a set.
	Refused int
	// Why explains an empty result in one line.
	Why string
}

// Search finds the victims. See Strategy for how.
func Search(p Problem) Result {
	res := Result{}
	if len(p.Units) == 0 {
		res.Why = "no running job may be evicted for it"
		return res
	}
	t := newTrial(&p, &res)
	// If even every eligible victim together is not enough, stop at once:
	// evicting anything would only lose work.
	for i := range p.Units {
		t.take(i)
	}
	t.anySet = true
	fitsAtAll := t.fits()
	t.anySet = false
	if !fitsAtAll {
		res.Why = fmt.Sprintf("it would not fit even with all %d eligible jobs evicted", countJobs(p.Units, nil))
		return res
	}
	best := math.Inf(1)
	if p.MaxCost > 0 {
		best = p.MaxCost
	}
	var bestSet []int
	try := func(order []int, need int64, freed map[int]int64, pruneOrder func(taken []int) []int) {
		if res.GaveUp {
			return
		}
		set, cost, ok := t.greedy(order, need, freed, pruneOrder, best)
		if ok && cost < best {
			best, bestSet = cost, set
		}
	}
	switch p.Strategy {
	case LowestPriorityNewest:
		// The same domains, tightest level first then in topology order,
		// each filled lowest priority and newest first; the first domain
		// that makes room wins, whatever it costs.
		for _, sc := range t.scopesInTopologyOrder() {
			if res.GaveUp || bestSet != nil {
				break
			}
			order := append([]int(nil), sc.order...)
			sort.SliceStable(order, func(a, b int) bool {
				ua, ub := &p.Units[order[a]], &p.Units[order[b]]
				if ua.Priority != ub.Priority {
					return ua.Priority < ub.Priority
				}
				if !ua.Start.Equal(ub.Start) {
					return ua.Start.After(ub.Start)
				}
				return order[a] < order[b]
			})
			try(order, sc.need, sc.freed, reverse)
		}
	default:
		// One victim alone, cheapest first: often one gang whose pods sit
		// together beats several cheaper-per-GPU ones spread out.
		// (A unit that needs another is tried with it: one whole job.)
		single := func(u int) float64 {
			c := p.Units[u].Cost
			if n := p.Units[u].Needs; n >= 0 {
				c += p.Units[n].Cost
			}
			return c
		}
		singles := make([]int, len(p.Units))
		for i := range singles {
			singles[i] = i
		}
		sort.SliceStable(singles, func(a, b int) bool { return single(singles[a]) < single(singles[b]) })
		t.reset()
		for _, u := range singles {
			if res.GaveUp || single(u) >= best {
				break
			}
			t.take(u)
			if !t.allowed() {
				res.Refused++
			} else if t.fits() {
				best, bestSet = single(u), []int{u}
				if n := p.Units[u].Needs; n >= 0 {
					bestSet = append(bestSet, n)
				}
			}
			t.reset()
		}
		for _, sc := range t.scopes() {
			if res.GaveUp {
				break
			}
			if sc.bound >= best {
				continue // even its cheapest victims cost more than a set already proven
			}
			try(sc.order, sc.need, sc.freed, byCostDesc(p.Units))
		}
	}
	if bestSet == nil {
		switch {
		case res.GaveUp:
			res.Why = fmt.Sprintf("the search gave up after %d placements tried (budget %d)", res.Evaluations, p.Budget)
		case p.MaxCost > 0:
			res.Why = fmt.Sprintf("every set of victims that makes room would lose at least %.0f GPU-seconds, not less than the %.0f it would gain",
				minCost(t.bounds), p.MaxCost)
		case res.Refused > 0:
			res.Why = "no set of eligible jobs makes room that leaves every queue it takes from its guarantee or fair share"
		default:
			res.Why = "no set of eligible jobs makes room within the search"
		}
		return res
	}
	sort.Ints(bestSet)
	res.Found, res.Victims, res.Cost = true, bestSet, best
	return res
}

func countJobs(units []Unit, idx []int) int {
	seen := map[workload.JobID]bool{}
	if idx == nil {
		for i := range units {
			seen[units[i].Job] = true
		}
	} else {
		for _, i := range idx {
			seen[units[i].Job] = true
		}
	}
	return len(seen)
}

func minCost(bounds []float64) float64 {
	m := math.Inf(1)
	for _, b := range bounds {
		m = math.Min(m, b)
	}
	if math.IsInf(m, 1) {
		return 0
	}
	return m
}

func reverse(taken []int) []int {
	out := make([]int, len(taken))
	for i, u := range taken {
		out[len(taken)-1-i] = u
	}
	return out
}

func byCostDesc(units []Unit) func(taken []int) []int {
	return func(taken []int) []int {
		out := append([]int(nil), taken...)
		sort.SliceStable(out, func(a, b int) bool {
			if units[out[a]].Cost != units[out[b]].Cost {
				return units[out[a]].Cost > units[out[b]].Cost
			}
			return out[a] > out[b]
		})
		return out
	}
}
