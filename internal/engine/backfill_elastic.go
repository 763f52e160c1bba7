package engine

import (
	"fmt"
	"sort"

	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/preempt"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

// shrinkFor takes pods above their minimum from running elastic jobs of no
// higher priority than j, lowest priority and latest start first, until j's
// gang fits. It runs before any preemption: a shrunk job keeps running. If
// shrinking cannot make room, nothing is shrunk.
func (b *backfiller) shrinkFor(placer *placement.Placer, j *workload.Job, g placement.Gang, plan *Plan) (placement.Result, bool) {
	if !b.v.backfill {
		return placement.Result{}, false
	}
	b.syncEvictions(plan)
	var cands []RunningJob
	for _, rj := range b.s.Running {
		if rj.Job.ID != j.ID && !b.gone[rj.Job.ID] && !b.shrunk[rj.Job.ID] && !b.otherEvs[rj.Job.ID] &&
			rj.Job.Priority <= j.Priority && len(rj.Pods) > rj.Job.GangMin() {
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
		pods := append([]PodBind(nil), rj.Pods...)
		sort.Slice(pods, func(a, c int) bool { return podLess(pods[c].Pod, pods[a].Pod) })
		cuts = append(cuts, cut{rj: rj})
		last := &cuts[len(cuts)-1]
		// One pod at a time, highest ordinal first: take no more than needed.
		for _, p := range pods[:len(pods)-rj.Job.GangMin()] {
			b.view.Release(p.NodeIndex, p.Alloc)
			b.holds.Refresh()
			last.pods = append(last.pods, p)
			res := placer.PlaceGang(g)
			if res.Failure != nil {
				continue
			}
			b.commitShrink(j, cuts, plan)
			return res, true
		}
	}
	b.restore(func() {
		for _, c := range cuts {
			for _, p := range c.pods {
				_ = b.view.Allocate(p.NodeIndex, p.Alloc)
			}
		}
	})
	return placement.Result{}, false
}

type cut struct {
	rj   RunningJob
	pods []PodBind
}

// commitShrink turns the pods taken in a successful shrink into evictions.
func (b *backfiller) commitShrink(j *workload.Job, cuts []cut, plan *Plan) {
	for _, c := range cuts {
		if len(c.pods) == 0 {
			continue
		}
		ev := Eviction{Job: c.rj.Job.ID, Cause: CauseShrink, By: j.ID,
			Message: fmt.Sprintf("shrunk by %d pods (to %d, its minimum %d) for job %s",
				len(c.pods), len(c.rj.Pods)-len(c.pods), c.rj.Job.GangMin(), j.ID)}
		gone := map[workload.PodRef]bool{}
		for _, p := range c.pods {
			ev.Pods = append(ev.Pods, p.Pod)
			gone[p.Pod] = true
		}
		sort.Slice(ev.Pods, func(a, c int) bool { return podLess(ev.Pods[a], ev.Pods[c]) })
		// The pods cut lose their work since the last checkpoint, as a
		// preemption of them would.
		ev.LostGPUSeconds = preempt.RestartCost(c.rj, ev.Pods, b.s.Now)
		plan.Evictions = append(plan.Evictions, ev)
		b.shrunk[c.rj.Job.ID] = true
		b.taken(c.rj.Job.ID)
		if i, ok := b.pos[c.rj.Job.ID]; ok {
			var keep []cluster.Placed
			for _, p := range c.rj.Pods {
				if !gone[p.Pod] {
					keep = append(keep, cluster.Placed{Pod: p.Pod, Node: p.NodeIndex, Alloc: p.Alloc})
				}
			}
			b.holders[i].Pods = keep
		}
	}
}

// reclaimPool evicts jobs of other classes that backfill a pool of j's
// class, cheapest restart first, until j fits. If that cannot make room,
// nothing is evicted.
func (b *backfiller) reclaimPool(placer *placement.Placer, j *workload.Job, g placement.Gang, plan *Plan) (placement.Result, bool) {
	var pools []*backfill.ResolvedPool
	for _, p := range b.pools {
		if p.Class == j.Class && p.Others == backfill.PoolPreemptible {
			pools = append(pools, p)
		}
	}
	if len(pools) == 0 {
		return placement.Result{}, false
	}
	b.syncEvictions(plan)
	var cands []RunningJob
	for _, rj := range b.s.Running {
		if rj.Job.Class == j.Class || b.gone[rj.Job.ID] || b.shrunk[rj.Job.ID] || b.otherEvs[rj.Job.ID] {
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
		costs[rj.Job.ID] = preempt.RestartCost(rj, nil, b.s.Now)
	}
	sort.Slice(cands, func(a, c int) bool {
		x, y := cands[a], cands[c]
		if costs[x.Job.ID] != costs[y.Job.ID] {
			return costs[x.Job.ID] < costs[y.Job.ID]
		}
		return x.Job.ID < y.Job.ID
	})
	var taken []RunningJob
	for _, rj := range cands {
		for _, p := range rj.Pods {
			b.view.Release(p.NodeIndex, p.Alloc)
		}
		b.holds.Refresh()
		taken = append(taken, rj)
		res := placer.PlaceGang(g)
		if res.Failure != nil {
			continue
		}
		for _, t := range taken {
			ev := Eviction{Job: t.Job.ID, Cause: CauseReclaim, By: j.ID, LostGPUSeconds: costs[t.Job.ID],
				Message: fmt.Sprintf("held capacity taken back for job %s of class %q", j.ID, j.Class)}
			for _, p := range t.Pods {
				ev.Pods = append(ev.Pods, p.Pod)
			}
			plan.Evictions = append(plan.Evictions, ev)
			b.gone[t.Job.ID] = true
			b.taken(t.Job.ID)
		}
		return res, true
	}
	b.restore(func() {
		for _, t := range taken {
			for _, p := range t.Pods {
				_ = b.view.Allocate(p.NodeIndex, p.Alloc)
			}
		}
	})
	return placement.Result{}, false
}

// restore gives back capacity taken out of the view on a trial: holds are
// lifted so the exact allocations fit again, then taken anew.
func (b *backfiller) restore(fn func()) {
	held := map[int]bool{}
	for n := 0; n < b.view.NumNodes(); n++ {
		if b.holds.Held(n) {
			held[n] = true
		}
	}
	b.holds.ReleaseAll()
	fn()
	b.holds.Sync(held)
}

// grow places missing pods of running elastic jobs into idle capacity, but
// only when no job is left waiting for room: grown pods are the first given
// back (shrinkFor) when one arrives.
func (b *backfiller) grow(placer *placement.Placer, plan *Plan) {
	if !b.v.backfill {
		return
	}
	for _, p := range plan.Pending {
		if p.Reason.Verdict == placement.WaitFree {
			return
		}
	}
	b.syncEvictions(plan)
	running := append([]RunningJob(nil), b.s.Running...)
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
	for _, rj := range running {
		j := rj.Job
		if b.gone[j.ID] || b.shrunk[j.ID] || b.otherEvs[j.ID] || j.GangMin() >= j.Pods() || len(rj.Pods) >= j.Pods() || len(rj.Pods) == 0 {
			continue
		}
		have := map[workload.PodRef]bool{}
		for _, p := range rj.Pods {
			have[p.Pod] = true
		}
		within := cluster.DomainID(0)
		if lv := b.view.LevelIndex(j.Topology.Required); lv > 0 {
			within = b.view.NodeDomain(rj.Pods[0].NodeIndex, lv)
		}
		b.admit(j)
		leaf := ""
		if b.qs != nil {
			var err error
			if leaf, err = b.qs.Leaf(j); err != nil {
				continue
			}
		}
		var res placement.Result
		full := false
		j.EachPod(func(ref workload.PodRef, r workload.Request) {
			if full || have[ref] || j.Validate() != nil {
				return
			}
			pr, _ := placement.Resolve(b.view, ref, r)
			a, ok := placer.PlacePod(&pr, within)
			if !ok {
				return
			}
			// A queue limit is a hard cap, idle capacity or not: grow one
			// pod at a time up to it.
			if why := b.qs.LimitAfter(leaf, b.view, []placement.Assignment{a}); why != "" {
				placer.Undo()
				full = true
				return
			}
			b.qs.Bound(leaf, b.view, []placement.Assignment{a})
			placer.Commit()
			res.Assignments = append(res.Assignments, a)
		})
		if len(res.Assignments) == 0 {
			continue
		}
		gb := bindOf(b.view, j.ID, res)
		plan.Binds = append(plan.Binds, gb)
		plan.Stats.PodsGrown += len(gb.Pods)
		b.placed(j, gb, plan)
	}
}

// attach links the cycle's queues and preemption: growth stays within
// queue limits, and the jobs stopped at their max runtime are no victims.
func (b *backfiller) attach(room *roomMaker, qs *queue.State) {
	b.room, b.qs = room, qs
	if room != nil && b.v.backfill {
		// Preemption honours reservations as placement does: it may not
		// free reserved nodes for a job that may not use them.
		room.reserved = b.holds.Held
		if b.cfg.StarveAfter > 0 {
			// A job that started after waiting past the starvation age is
			// not evicted for priority: it would wait, and drain its
			// domain, all over again, so the bound on its wait would not
			// hold. (A whole-cluster gang started after a four-day drain
			// was evicted within the hour for a one-GPU job.)
			room.starvedRun = make([]bool, len(room.running))
			for i, rj := range room.running {
				room.starvedRun[i] = rj.Start.Sub(rj.Job.Submit) >= b.cfg.StarveAfter
			}
		}
	}
	for id := range b.gone {
		b.taken(id)
	}
}

// taken tells preemption that a backfill step evicted (part of) job id.
func (b *backfiller) taken(id workload.JobID) {
	if b.room != nil {
		b.room.gone[id] = true
	}
}

// syncEvictions takes note of evictions other steps added to the plan: their
// jobs are no candidates for shrinking, pools or growth, and their pods no
// longer hold capacity in a reservation's replay. Holds are taken again, as
// the victims may have freed capacity on held nodes.
func (b *backfiller) syncEvictions(plan *Plan) {
	if b.seenEvs == len(plan.Evictions) {
		return
	}
	for _, ev := range plan.Evictions[b.seenEvs:] {
		if b.gone[ev.Job] || b.shrunk[ev.Job] {
			continue // one of ours
		}
		b.otherEvs[ev.Job] = true
		i, ok := b.pos[ev.Job]
		if !ok {
			continue
		}
		out := map[workload.PodRef]bool{}
		for _, p := range ev.Pods {
			out[p] = true
		}
		var keep []cluster.Placed
		for _, p := range b.holders[i].Pods {
			if !out[p.Pod] {
				keep = append(keep, p)
			}
		}
		b.holders[i].Pods = keep
	}
	b.seenEvs = len(plan.Evictions)
	b.holds.Refresh()
}

// finish lifts every hold: the view is the cycle's alone, but a clean view
// keeps later steps (other helpers' steps) from seeing held capacity as used.
func (b *backfiller) finish() { b.holds.ReleaseAll() }

func podLess(a, c workload.PodRef) bool {
	if a.PodSet != c.PodSet {
		return a.PodSet < c.PodSet
	}
	return a.Index < c.Index
}
