package backfill

import (
	"fmt"
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// shrinkFor takes pods above their minimum from running elastic jobs of no
// higher priority than j, lowest priority and latest start first, until j's
// gang fits. It runs before any preemption: a shrunk job keeps running. If
// shrinking cannot make room, nothing is shrunk.
func (b *Cycle) ShrinkFor(j *workload.Job, g placement.Gang) (placement.Result, bool) {
	if b.mode != EASY {
		return placement.Result{}, false
	}
	b.l.RetakeHolds()
	var cands []cycle.RunningJob
	for _, rj := range b.l.Running() {
		if rj.Job.ID != j.ID && rj.Job.Priority <= j.Priority && len(rj.Pods) > rj.Job.GangMin() {
			cands = append(cands, rj)
		}
	}
	if len(cands) == 0 {
		return placement.Result{}, false
	}
	sort.Slice(cands, func(a, c int) bool {
		x, y := cands[a], cands[c]
		if x.Job.Priority != y.Job.Priority {
			return x.Job.Priority < y.Job.Priority
		}
		if !x.Start.Equal(y.Start) {
			return x.Start.After(y.Start)
		}
		return x.Job.ID < y.Job.ID
	})
	var cuts []cut
	for _, rj := range cands {
		pods := append([]cycle.PodBind(nil), rj.Pods...)
		sort.Slice(pods, func(a, c int) bool { return podLess(pods[c].Pod, pods[a].Pod) })
		cuts = append(cuts, cut{rj: rj})
		last := &cuts[len(cuts)-1]
		// One pod at a time, highest ordinal first: take no more than needed.
		for _, p := range pods[:len(pods)-rj.Job.GangMin()] {
			b.l.Vacate([]cluster.Placed{p.Placed})
			b.holds.Refresh()
			last.pods = append(last.pods, p)
			res := b.l.Placer().PlaceGang(g)
			if res.Failure != nil {
				continue
			}
			b.commitShrink(j, cuts)
			return res, true
		}
	}
	b.restore(func() {
		for _, c := range cuts {
			for _, p := range c.pods {
				b.l.Restore([]cluster.Placed{p.Placed})
			}
		}
	})
	return placement.Result{}, false
}

type cut struct {
	rj   cycle.RunningJob
	pods []cycle.PodBind
}

// commitShrink turns the pods taken in a successful shrink into evictions.
func (b *Cycle) commitShrink(j *workload.Job, cuts []cut) {
	for _, c := range cuts {
		if len(c.pods) == 0 {
			continue
		}
		ev := cycle.Eviction{Job: c.rj.Job.ID, Cause: cycle.CauseShrink, By: j.ID,
			Message: fmt.Sprintf("shrunk by %d pods (to %d, its minimum %d) for job %s",
				len(c.pods), len(c.rj.Pods)-len(c.pods), c.rj.Job.GangMin(), j.ID)}
		for _, p := range c.pods {
			ev.Pods = append(ev.Pods, p.Pod)
		}
		sort.Slice(ev.Pods, func(a, c int) bool { return podLess(ev.Pods[a], ev.Pods[c]) })
		// The pods cut lose their work since the last checkpoint, as a
		// preemption of them would.
		ev.LostGPUSeconds = b.l.RestartCost(c.rj, ev.Pods)
		b.l.Evict(ev)
		b.unbound(c.rj.Job.ID, c.pods)
	}
}

// reclaimPool evicts jobs of other classes that backfill a pool of j's
// class, cheapest restart first, until j fits. If that cannot make room,
// nothing is evicted.
func (b *Cycle) ReclaimPool(j *workload.Job, g placement.Gang) (placement.Result, bool) {
	var pools []*ResolvedPool
	for _, p := range b.pools {
		if p.Class == j.Class && p.Others == PoolPreemptible {
			pools = append(pools, p)
		}
	}
	if len(pools) == 0 {
		return placement.Result{}, false
	}
	b.l.RetakeHolds()
	var cands []cycle.RunningJob
	for _, rj := range b.l.Running() {
		if rj.Job.Class == j.Class {
			continue
		}
		in := false
		for _, p := range rj.Pods {
			for _, pl := range pools {
				in = in || pl.Has(p.NodeIndex)
			}
		}
		if in {
			cands = append(cands, rj)
		}
	}
	costs := map[workload.JobID]float64{}
	for _, rj := range cands {
		costs[rj.Job.ID] = b.l.RestartCost(rj, nil)
	}
	sort.Slice(cands, func(a, c int) bool {
		x, y := cands[a], cands[c]
		if costs[x.Job.ID] != costs[y.Job.ID] {
			return costs[x.Job.ID] < costs[y.Job.ID]
		}
		return x.Job.ID < y.Job.ID
	})
	var taken []cycle.RunningJob
	for _, rj := range cands {
		pods := make([]cluster.Placed, len(rj.Pods))
		for i, p := range rj.Pods {
			pods[i] = p.Placed
		}
		b.l.Vacate(pods)
		b.holds.Refresh()
		taken = append(taken, rj)
		res := b.l.Placer().PlaceGang(g)
		if res.Failure != nil {
			continue
		}
		for _, t := range taken {
			ev := cycle.Eviction{Job: t.Job.ID, Cause: cycle.CauseReclaim, By: j.ID, LostGPUSeconds: costs[t.Job.ID],
				Message: fmt.Sprintf("held capacity taken back for job %s of class %q", j.ID, j.Class)}
			for _, p := range t.Pods {
				ev.Pods = append(ev.Pods, p.Pod)
			}
			b.l.Evict(ev)
			b.unbound(t.Job.ID, t.Pods)
		}
		return res, true
	}
	b.restore(func() {
		for _, t := range taken {
			for _, p := range t.Pods {
				b.l.Restore([]cluster.Placed{p.Placed})
			}
		}
	})
	return placement.Result{}, false
}

// unbound takes pods evicted for room off their job's queue usage, as
// preemption does for its victims, so that DRF order and limits later in
// the cycle no longer count them.
func (b *Cycle) unbound(job workload.JobID, pods []cycle.PodBind) {
	if b.queues == nil {
		return
	}
	placed := make([]cluster.Placed, len(pods))
	for i, p := range pods {
		placed[i] = p.Placed
	}
	b.queues.Unbound(job, b.l.View(), placed)
}

// restore gives back capacity taken out of the view on a trial: holds are
// lifted so the exact allocations fit again, then taken anew.
func (b *Cycle) restore(fn func()) {
	held := b.holds.ClosedNodes()
	b.holds.OpenAll()
	fn()
	b.holds.Sync(held)
}

// grow places missing pods of running elastic jobs into idle capacity, but
// only when no job is left waiting for room: grown pods are the first given
// back (shrinkFor) when one arrives.
func (b *Cycle) Grow() {
	if b.mode != EASY || b.l.Waiting() {
		return
	}
	view, placer := b.l.View(), b.l.Placer()
	b.l.RetakeHolds()
	running := append([]cycle.RunningJob(nil), b.l.Running()...)
	sort.Slice(running, func(a, c int) bool {
		x, y := running[a].Job, running[c].Job
		if x.Priority != y.Priority {
			return x.Priority > y.Priority
		}
		if !running[a].Start.Equal(running[c].Start) {
			return running[a].Start.Before(running[c].Start)
		}
		return x.ID < y.ID
	})
	// What each job holds now: its pods from before the cycle and those
	// bound to it this cycle (pinned replacement ranks), not to be grown
	// again.
	holding := map[workload.JobID][]cluster.Placed{}
	for _, h := range b.l.Holders() {
		holding[h.Job.ID] = h.Pods
	}
	for _, rj := range running {
		j := rj.Job
		held := holding[j.ID]
		if j.GangMin() >= j.Pods() || len(held) >= j.Pods() || len(rj.Pods) == 0 {
			continue
		}
		have := map[workload.PodRef]bool{}
		for _, p := range held {
			have[p.Pod] = true
		}
		within := cluster.DomainID(0)
		if lv := view.LevelIndex(j.Topology.Required); lv > 0 {
			within = view.NodeDomain(rj.Pods[0].NodeIndex, lv)
		}
		b.Admit(j)
		leaf := ""
		if b.queues != nil {
			var err error
			if leaf, err = b.queues.Leaf(j); err != nil {
				continue
			}
		}
		var res placement.Result
		full := false
		j.EachPod(func(ref workload.PodRef, r workload.Request) {
			if full || have[ref] || j.Validate() != nil {
				return
			}
			pr, _ := placement.Resolve(view, ref, r)
			a, ok := placer.PlacePod(&pr, within)
			if !ok {
				return
			}
			// A queue limit is a hard cap, idle capacity or not: grow one
			// pod at a time up to it.
			if b.queues != nil {
				if b.queues.LimitAfter(leaf, view, []placement.Assignment{a}).Verdict == placement.WaitQuota {
					placer.Undo()
					full = true
					return
				}
				b.queues.Bound(leaf, view, []placement.Assignment{a})
			}
			placer.Commit()
			res.Assignments = append(res.Assignments, a)
		})
		if len(res.Assignments) == 0 {
			continue
		}
		gb := b.l.Bind(j, res)
		b.l.Stats().PodsGrown += len(gb.Pods)
		b.Placed(j, gb)
	}
}
