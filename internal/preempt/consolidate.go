package preempt

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// consolidate frees one domain of a gang's required level when the gang
// waits only because the free GPUs are scattered: the cluster has enough of
// them, but no domain of that level does. It moves preemptible jobs out of
// the domain (they are evicted and placed again elsewhere; the search proves
// they fit beside the gang), and only when what they lose is below what the
// gang gains.
//
// The gain model: without a move, the gang waits until running jobs in some
// domain of its level end and leave room for it (end = start + expected
// runtime; jobs without an estimate are taken to run on). The gang gains its
// GPUs × that wait, in GPU-seconds; the move costs the moved jobs' restart
// costs (GPUs × time since their last checkpoint + restart overhead).
func (m *Room) consolidate(pj cycle.PendingJob, gang placement.Gang) (placement.Result, []cycle.Eviction, string) {
	if gang.Required < 0 || len(gang.Pods) < 2 || m.consolidates >= consolidationTries || m.budget <= 0 {
		return placement.Result{}, nil, ""
	}
	var mask cluster.ModelMask
	var size int64
	for _, p := range gang.Pods {
		if g := p.GPUMilliTotal(); g > 0 {
			mask |= p.Mask
			size += g
		}
	}
	if size == 0 || m.view.DomainFreeMilli(0, mask) < size {
		return placement.Result{}, nil, "" // too few free GPUs in total: not a matter of scattering
	}
	m.consolidates++
	wait, ok := m.expectedWait(gang.Required, mask, size)
	if !ok {
		return placement.Result{}, nil, "consolidation: no estimate of when a domain would free up (no expected runtimes)"
	}
	gain := float64(size) / workload.MilliPerGPU * wait.Seconds()
	if gain <= 0 {
		return placement.Result{}, nil, ""
	}
	var units []Unit
	for _, rj := range m.running {
		if m.l.Evicted(rj.Job.ID) || len(rj.Pods) == 0 || rj.Job.Priority > pj.Job.Priority ||
			Protected(rj.Job, RunFor(rj, m.s.Now)) != "" {
			continue
		}
		if m.qs != nil {
			if _, ok := m.qs.RunningLeaf(rj.Job.ID); !ok {
				continue
			}
		}
		g, _, ok := m.l.Gang(cycle.PendingJob{Job: rj.Job})
		if !ok {
			continue
		}
		cost := RestartCost(rj, nil, m.s.Now)
		u := Unit{Job: rj.Job.ID, Priority: rj.Job.Priority, Start: rj.Start, Needs: -1,
			Cost: cost, Lost: cost, Gang: &g}
		for _, p := range rj.Pods {
			u.Pods = append(u.Pods, p.Placed)
		}
		units = append(units, u)
	}
	if len(units) == 0 {
		return placement.Result{}, nil, ""
	}
	r := m.search(Problem{Gang: gang, Units: units, Strategy: LeastLost, Move: true, MaxCost: gain})
	if !r.Found {
		return placement.Result{}, nil, "consolidation: " + r.Why
	}
	res, evs, why := m.apply(pj, "", gang, units, r, func(int) cycle.EvictionCause { return cycle.CauseConsolidate })
	note := fmt.Sprintf("; the gang would otherwise wait about %s (%.2f GPU-hours gained)",
		wait.Round(time.Minute), gain/3600)
	for i := range evs {
		evs[i].Message += note
	}
	m.stats.Consolidations += len(evs)
	return res, evs, why
}

// expectedWait is the shortest expected time until some domain at level
// frees size GPU-milli of the models in mask, from running jobs' expected
// ends. ok is false when no domain would ever, by the estimates.
func (m *Room) expectedWait(level int, mask cluster.ModelMask, size int64) (time.Duration, bool) {
	best := time.Duration(math.MaxInt64)
	found := false
	for _, d := range m.view.DomainsAt(level) {
		dom := m.view.Domain(d)
		free := m.view.DomainFreeMilli(d, mask)
		type ending struct {
			at    time.Time
			milli int64
		}
		var ends []ending
		for _, rj := range m.running {
			if m.l.Evicted(rj.Job.ID) || rj.Job.ExpectedRuntime <= 0 {
				continue
			}
			var milli int64
			for _, p := range rj.Pods {
				if p.NodeIndex < dom.Lo || p.NodeIndex >= dom.Hi {
					continue
				}
				for _, sh := range p.Alloc.Devices {
					if mask.Has(m.view.DeviceModel(p.NodeIndex, sh.Device)) {
						milli += int64(sh.Milli)
					}
				}
			}
			if milli > 0 {
				ends = append(ends, ending{at: rj.Start.Add(rj.Job.ExpectedRuntime), milli: milli})
			}
		}
		sort.Slice(ends, func(a, b int) bool { return ends[a].at.Before(ends[b].at) })
		for _, e := range ends {
			free += e.milli
			if free >= size {
				w := max(0, e.at.Sub(m.s.Now))
				if w < best {
					best = w
				}
				found = true
				break
			}
		}
	}
	return best, found
}
