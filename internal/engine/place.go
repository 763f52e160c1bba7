package engine

import (
	"github.com/corral-dev/corral/internal/placement"
)

// place decides pending job i: the baselines place pod by pod; corral
// places the whole gang or nothing, within its queue's limits and around
// the holds of backfill and health, then tries to make room (shrinking,
// pool reclaim, preemption) and finally explains why it waits.
func (c *run) place(i int) {
	if c.spareReleased != nil {
		c.hc.holds.Rehold(c.view, c.spareReleased)
		c.spareReleased = nil
	}
	pj := c.s.Pending[i]
	if c.hc.handled[pj.Job.ID] {
		return
	}
	c.plan.Stats.JobsConsidered++
	leaf := c.qs.LeafOfJob(i)
	pods, reason, ok := resolvePods(c.view, pj)
	if !ok {
		c.wait(pj, reason)
		return
	}
	if !c.e.v.gangs {
		n := len(c.plan.Binds)
		c.e.podByPod(c.placer, pj, pods, &c.plan)
		c.qs.BoundBinds(leaf, c.view, c.plan.Binds[n:])
		return
	}
	// Under strict FIFO nobody passes a blocked head.
	if r, blocked := c.bf.fifoBlocked(); blocked {
		c.wait(pj, r)
		return
	}
	gang, reason, ok := gangOf(c.view, pj.Job, pods)
	if !ok {
		c.wait(pj, reason)
		return
	}
	if pj.Waiting != nil {
		// Part of the gang is bound: if the whole gang could never fit,
		// say so (the driver rolls the bound part back) rather than place
		// the rest.
		if all, _, ok := resolvePods(c.view, PendingJob{Job: pj.Job}); ok {
			whole := gang
			whole.Pods = all
			if f := placement.CheckNeverFits(c.view, whole); f != nil {
				c.wait(pj, Reason{Verdict: f.Verdict, Level: f.Level, Message: f.Message, Best: f.Best,
					BestFits: f.BestFits, Pods: len(all)})
				return
			}
		}
	}
	// Queue limit, before placing: what the job asks for would take its
	// queue past a limit.
	if why := c.qs.LimitBefore(leaf, c.view, pj); why != "" {
		c.wait(pj, quotaReason(why, len(gang.Pods)))
		return
	}
	// Backfill holds the reserved nodes this job cannot leave in time and
	// the pools it may not use.
	key := shapeKey(gang) + c.room.shapeSuffix(pj.Job, leaf) + "#" + c.bf.admit(pj.Job)
	if r, seen := c.failed[key]; seen {
		c.plan.Stats.ShapeCacheHits++
		c.wait(pj, r)
		return
	}
	if c.hc.holds != nil && c.hc.holds.Crowds(c.view, max(0, c.view.LevelIndex(pj.Job.Topology.Required)), int(pj.Job.GPUs())) {
		c.spareReleased = c.hc.holds.ReleaseAll(c.view)
	}
	res := c.placer.PlaceGang(gang)
	if res.Failure != nil && pj.Waiting == nil && pj.Job.GangMin() < len(pods) {
		// Not all of an elastic job fits: start its minimum now.
		minGang := gang
		minGang.Pods = pods[:pj.Job.GangMin()]
		if r2 := c.placer.PlaceGang(minGang); r2.Failure == nil {
			res = r2
		}
	}
	// MIG: no free instance serves the job; plan re-partitions of idle MIG
	// GPUs for it (devices.go).
	if res.Failure != nil && c.view.HasMIG() && planMIG(c.placer, pj.Job.ID, gang, c.s.Mix, &c.plan) {
		return
	}
	res, evictions := c.makeRoom(pj, leaf, gang, res)
	if res.Failure != nil {
		r := Reason{Verdict: res.Failure.Verdict, Level: res.Failure.Level, Message: res.Failure.Message,
			Best: res.Failure.Best, BestFits: res.Failure.BestFits, Pods: len(gang.Pods)}
		c.failed[key] = r
		// A blocked head job gets a reservation (corral) or stops everyone
		// behind it (fifo).
		c.wait(pj, c.bf.blocked(pj.Job, gang, r, &c.plan))
		return
	}
	// Queue limit, once the GPU models are known. A placement that evicted
	// victims stands: the limit was checked before, on what the job asks
	// for; only a pod accepting several models can differ.
	if why := c.qs.LimitAfter(leaf, c.view, res.Assignments); why != "" && len(evictions) == 0 {
		c.placer.Undo()
		c.wait(pj, quotaReason(why, len(gang.Pods)))
		return
	}
	c.qs.Bound(leaf, c.view, res.Assignments)
	c.plan.Evictions = append(c.plan.Evictions, evictions...)
	c.placer.Commit()
	gb := bindOf(c.view, pj.Job.ID, res)
	c.plan.Binds = append(c.plan.Binds, gb)
	c.plan.Stats.JobsPlaced++
	c.plan.Stats.PodsPlaced += len(res.Assignments)
	c.bf.placed(pj.Job, gb, &c.plan)
}

// makeRoom is tried for a gang that did not fit: a gang that only waits
// for capacity first takes back what elastic jobs hold above their
// minimum, then pools backfilled by others; then preemption, reclaim and
// consolidation (corral only) may evict running jobs. On success the gang
// is placed on the view and the evictions are returned for the plan.
func (c *run) makeRoom(pj PendingJob, leaf string, gang placement.Gang, res placement.Result) (placement.Result, []Eviction) {
	if res.Failure != nil && res.Failure.Verdict == placement.WaitFree {
		if r2, ok := c.bf.shrinkFor(c.placer, pj.Job, gang, &c.plan); ok {
			res = r2
		} else if r2, ok := c.bf.reclaimPool(c.placer, pj.Job, gang, &c.plan); ok {
			res = r2
		}
	}
	if res.Failure == nil {
		return res, nil
	}
	r2, evs, why := c.room.makeRoom(pj, leaf, gang, res.Failure)
	if len(r2.Assignments) > 0 {
		return r2, evs
	}
	if why != "" {
		res.Failure.Message += "; " + why
	}
	return res, nil
}
