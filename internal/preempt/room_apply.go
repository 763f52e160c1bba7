package preempt

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// deferToCheckpoint holds a preemption back when every victim is about to
// checkpoint (DeferToCheckpoint), books when to look again and
// returns the reason the job waits; "" evicts now.
func (m *Room) deferToCheckpoint(units []Unit, victims []int) string {
	jobs := map[workload.JobID]bool{}
	for _, u := range victims {
		jobs[units[u].Job] = true
	}
	d, ok := DeferToCheckpoint(m.running, jobs, m.s.Now, m.cfg.CheckpointWait)
	if !ok {
		return ""
	}
	if m.retry.IsZero() || d.Retry.Before(m.retry) {
		m.retry = d.Retry
	}
	m.stats.PreemptDeferred++
	return fmt.Sprintf("preemption deferred until %s, when its victims checkpoint (saves %.2f GPU-hours)",
		d.Retry.UTC().Format(time.RFC3339), d.Saved/3600)
}

// reclaimKeeps vets a set of victims queue by queue (Keeps), so
// that reclaim never takes so much that the victims' queue could take it
// back in a later cycle. belowGuarantee (a Strict queue's second search)
// lets guarantee reclaim take a victim queue below its own guarantee,
// provided the victim queue could not take it straight back (NoTakeBack); a
// queue hit by fair-share reclaim is still vetted. That cannot start a
// cycle of reclaims either: each such reclaim leaves one queue fewer above
// its guarantee, and none takes from the queue that took from it.
func (m *Room) reclaimKeeps(me Standing, charge cycle.Amounts, units []Unit, kinds []Kind, belowGuarantee bool) func([]int) bool {
	if m.qs == nil {
		return nil
	}
	return func(set []int) bool {
		removed := map[string]cycle.Amounts{}
		fairShare := map[string]bool{}
		var leaves []string
		for _, u := range set {
			if !kinds[u].Reclaims() {
				continue
			}
			leaf, _ := m.qs.RunningLeaf(units[u].Job)
			if removed[leaf] == nil {
				removed[leaf] = cycle.Amounts{}
				leaves = append(leaves, leaf)
			}
			if kinds[u] == ByFairShare {
				fairShare[leaf] = true
			}
			for r, v := range m.qs.Held(m.view, units[u].Pods) {
				removed[leaf][r] += v
			}
		}
		for _, leaf := range leaves {
			v := Standing{Queue: leaf, Usage: m.qs.Usage(leaf), Guarantee: m.qs.Guarantee(leaf), Fair: m.qs.Fair(leaf)}
			if Keeps(me, charge, v, removed[leaf]) {
				continue
			}
			// The relaxed search allows whatever the first did, so it can
			// only differ where a set was refused (Room.preempt runs it then).
			if !belowGuarantee || fairShare[leaf] || !NoTakeBack(me, charge, v) {
				return false
			}
		}
		return true
	}
}

// search runs one bounded search and books its cost in the cycle's stats.
func (m *Room) search(p Problem) Result {
	p.View, p.Scorer, p.Devices = m.view, m.scorer, m.devices
	p.Budget = min(m.budget, perJobBudget)
	r := Search(p)
	m.budget -= r.Evaluations
	m.stats.PreemptSearches++
	m.stats.PreemptEvaluations += r.Evaluations
	if r.GaveUp {
		m.stats.PreemptGaveUp++
	}
	return r
}

// apply evicts the chosen units on the view and places the job there. The
// search proved the placement on a copy of this view with the same placer
// settings; if the view disagrees anyway, every pod goes back and nothing is
// evicted.
func (m *Room) apply(pj cycle.PendingJob, leaf string, gang placement.Gang, units []Unit, r Result,
	cause func(u int) cycle.EvictionCause) (placement.Result, []cycle.Eviction, string) {
	released := []cluster.Placed{}
	for _, u := range r.Victims {
		released = append(released, units[u].Pods...)
	}
	// The victims leave the view now; the cycle records their evictions
	// once the job is bound.
	m.l.Vacate(released)
	res := m.placer.PlaceGang(gang)
	if res.Failure != nil {
		m.l.Restore(released)
		return placement.Result{}, nil, "preemption: the chosen victims did not make room on the running view"
	}
	// One eviction per job: an elastic job losing only its extra pods keeps
	// running; losing its minimum too means the whole gang restarts.
	byJob := map[workload.JobID][]int{}
	var jobs []workload.JobID
	for _, u := range r.Victims {
		id := units[u].Job
		if byJob[id] == nil {
			jobs = append(jobs, id)
		}
		byJob[id] = append(byJob[id], u)
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a] < jobs[b] })
	var evs []cycle.Eviction
	for _, id := range jobs {
		ev := cycle.Eviction{Job: id, By: pj.Job.ID}
		whole := false
		var gpus int64
		for _, u := range byJob[id] {
			ev.Cause = cause(u)
			ev.LostGPUSeconds += units[u].Lost
			whole = whole || units[u].Needs >= 0 || m.isWhole(units, u)
			for _, p := range units[u].Pods {
				ev.Pods = append(ev.Pods, p.Pod)
				gpus += p.Alloc.GPUMilli()
			}
		}
		sort.Slice(ev.Pods, func(a, b int) bool {
			if ev.Pods[a].PodSet != ev.Pods[b].PodSet {
				return ev.Pods[a].PodSet < ev.Pods[b].PodSet
			}
			return ev.Pods[a].Index < ev.Pods[b].Index
		})
		ev.Message = m.message(ev, pj, leaf, whole, gpus)
		evs = append(evs, ev)
		if m.qs != nil {
			if vleaf, ok := m.qs.RunningLeaf(id); ok {
				m.qs.Charge(vleaf, m.chargeOfEvicted(units, byJob[id]), -1)
			}
		}
	}
	return res, evs, "" // counted in the stats when the ledger records them
}

// isWhole: the unit holds every pod of its job.
func (m *Room) isWhole(units []Unit, u int) bool {
	for j := range units {
		if units[j].Needs == u {
			return false
		}
	}
	return true
}

func (m *Room) chargeOfEvicted(units []Unit, idx []int) cycle.Amounts {
	var pods []cluster.Placed
	for _, u := range idx {
		pods = append(pods, units[u].Pods...)
	}
	return m.qs.Held(m.view, pods)
}

// message is the eviction's one line for events: who, why, what it costs.
func (m *Room) message(ev cycle.Eviction, pj cycle.PendingJob, leaf string, whole bool, milli int64) string {
	var b strings.Builder
	switch ev.Cause {
	case cycle.CauseReclaim:
		fmt.Fprintf(&b, "reclaimed for job %s of queue %q", pj.Job.ID, leaf)
		if m.qs != nil {
			if vleaf, ok := m.qs.RunningLeaf(ev.Job); ok {
				fmt.Fprintf(&b, ", which is owed capacity that queue %q holds above its share", vleaf)
			}
		}
	case cycle.CauseConsolidate:
		fmt.Fprintf(&b, "moved to free a whole domain for job %s (%d pods)", pj.Job.ID, pj.Job.Pods())
	default:
		fmt.Fprintf(&b, "preempted by job %s (priority %d, above this job's)", pj.Job.ID, pj.Job.Priority)
	}
	if !whole {
		fmt.Fprintf(&b, "; shrunk by %d pods to its minimum", len(ev.Pods))
	}
	fmt.Fprintf(&b, "; %g GPUs freed, %.2f GPU-hours lost (work since the last checkpoint plus restart overhead)",
		float64(milli)/workload.MilliPerGPU, ev.LostGPUSeconds/3600)
	return b.String()
}
