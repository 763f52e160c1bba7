package engine

import (
	"fmt"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/placement"
)

// place decides pending job i: the baselines place pod by pod; corral
// places the whole gang or nothing, within its queue's limits and around
// the holds of backfill and health, then tries to make room (shrinking,
// pool reclaim, preemption) and finally explains why it waits.
func (c *run) place(i int) {
	c.hc.Spares().HoldAgain(c.l.view) // spares let in for the job before
	pj := c.s.Pending[i]
	if c.hc.Handled(pj.Job.ID) || c.bf.LetIn(pj.Job.ID) {
		return
	}
	if _, ok := c.later[pj.Job.ID]; ok && pj.Waiting != nil {
		// Its members that exist go into the room held for the gang; the
		// room of the others is held again after (later.go).
		c.liftLater(pj)
		defer c.holdJob(pj.Job.ID, nil)
	}
	c.l.plan.Stats.JobsConsidered++
	if r, waits := c.awaitingVictims(pj); waits { // victims.go
		c.wait(pj, r)
		return
	}
	leaf := c.qs.LeafOfJob(i)
	pods, reason, ok := resolvePods(c.l.view, pj)
	if !ok {
		c.wait(pj, reason)
		return
	}
	if !c.e.v.gangs {
		n := len(c.l.plan.Binds)
		c.l.podByPod(pj, pods)
		c.qs.BoundBinds(leaf, c.l.view, c.l.plan.Binds[n:])
		return
	}
	// Under strict FIFO nobody passes a blocked head.
	if r, blocked := c.bf.FIFOBlocked(); blocked {
		c.wait(pj, r)
		return
	}
	gang, reason, ok := gangOf(c.l.view, pj.Job, pods)
	if !ok {
		c.wait(pj, reason)
		return
	}
	if pj.Waiting != nil {
		// Part of the gang is bound: if the whole gang could never fit,
		// say so (rollBack then evicts the bound part) rather than place
		// the rest.
		if all, _, ok := resolvePods(c.l.view, PendingJob{Job: pj.Job}); ok {
			whole := gang
			whole.Pods = all
			if f := placement.CheckNeverFits(c.l.view, whole); f != nil {
				c.wait(pj, Reason{Verdict: f.Verdict, Level: f.Level, Message: f.Message, Best: f.Best,
					BestFits: f.BestFits, Pods: len(all)})
				return
			}
		}
	}
	// Queue limit, before placing: what the job asks for would take its
	// queue past a limit.
	if r := c.qs.LimitBefore(leaf, c.l.view, pj); r.Verdict == placement.WaitQuota {
		r.Pods = len(gang.Pods)
		c.wait(pj, r)
		return
	}
	// Backfill holds the reserved nodes this job cannot leave in time and
	// the pools it may not use.
	key := shapeKey(gang) + c.room.ShapeSuffix(pj.Job, leaf) + "#" + c.bf.Admit(pj.Job)
	if _, held := c.later[pj.Job.ID]; held && pj.Waiting != nil {
		// Late members go into the room held for them: inside the domain
		// their bound peers share at the required level (later.go).
		if lj, ok := c.l.byID[pj.Job.ID]; ok {
			if d, ok := sharedDomain(c.l.view, lj.run.Pods, gang.Required); ok {
				gang.Within = d
				key += fmt.Sprintf("@%d", d)
			}
		}
	}

	if r, seen := c.failed[key]; seen {
		c.l.plan.Stats.ShapeCacheHits++
		c.wait(pj, r)
		return
	}
	// Spares a job could never fit beside are let in for it (health).
	c.hc.Spares().LetIn(c.l.view, max(0, c.l.view.LevelIndex(pj.Job.Topology.Required)), int(pj.Job.GPUs()))
	res := health.PlaceBeside(c.l.placer, gang, c.beside(pj, gang))
	if res.Failure != nil && pj.Waiting == nil && pj.Job.GangMin() < len(pods) {
		// Not all of an elastic job fits: start its minimum now.
		minGang := gang
		minGang.Pods = pods[:pj.Job.GangMin()]
		if r2 := c.l.placer.PlaceGang(minGang); r2.Failure == nil {
			res = r2
		}
	}
	// MIG: no free instance serves the job; plan re-partitions of idle MIG
	// GPUs for it (devices.go).
	if res.Failure != nil && c.l.view.HasMIG() && c.l.planMIG(pj.Job, gang) {
		return
	}
	res, evictions := c.makeRoom(pj, leaf, gang, res)
	if res.Failure != nil {
		r := Reason{Verdict: res.Failure.Verdict, Level: res.Failure.Level, Message: res.Failure.Message,
			Best: res.Failure.Best, BestFits: res.Failure.BestFits, Pods: len(gang.Pods)}
		c.failed[key] = r
		// A blocked head job gets a reservation (corral) or stops everyone
		// behind it (fifo).
		c.wait(pj, c.bf.Blocked(pj.Job, gang, r))
		return
	}
	// Queue limit, once the GPU models are known. A placement that evicted
	// victims stands: the limit was checked before, on what the job asks
	// for; only a pod accepting several models can differ.
	if r := c.qs.LimitAfter(leaf, c.l.view, res.Assignments); r.Verdict == placement.WaitQuota && len(evictions) == 0 {
		c.l.placer.Undo()
		r.Pods = len(gang.Pods)
		c.wait(pj, r)
		return
	}
	c.qs.Bound(leaf, c.l.view, res.Assignments)
	for _, ev := range evictions {
		c.l.Evict(ev)
	}
	c.l.placer.Commit()
	gb := c.l.Bind(pj.Job, res)
	c.l.plan.Stats.JobsPlaced++
	c.l.plan.Stats.PodsPlaced += len(res.Assignments)
	c.bf.Placed(pj.Job, gb)
}

// makeRoom is tried for a gang that did not fit: a gang that only waits
// for capacity first takes back what elastic jobs hold above their
// minimum, then pools backfilled by others; then preemption, reclaim and
// consolidation (corral only) may evict running jobs. On success the gang
// is placed on the view and the evictions are returned for the plan.
func (c *run) makeRoom(pj PendingJob, leaf string, gang placement.Gang, res placement.Result) (placement.Result, []Eviction) {
	if res.Failure != nil && res.Failure.Verdict == placement.WaitFree {
		if r2, ok := c.bf.ShrinkFor(pj.Job, gang); ok {
			res = r2
		} else if r2, ok := c.bf.ReclaimPool(pj.Job, gang); ok {
			res = r2
		}
	}
	if res.Failure == nil {
		return res, nil
	}
	r2, evs, why := c.room.MakeRoom(pj, leaf, gang, res.Failure)
	if len(r2.Assignments) > 0 {
		return r2, evs
	}
	if why != "" {
		res.Failure.Message += "; " + why
	}
	return res, nil
}

// beside lists the domains the rest of a gang below its minimum is tried
// in before anywhere else: those holding all its bound pods, tightest
// first (health.Beside). A gang cut off mid-bind so finishes where the engine
// placed it whole, decided from the snapshot alone.
func (c *run) beside(pj PendingJob, gang placement.Gang) []cluster.DomainID {
	if pj.Waiting == nil || pj.Within.Domain != "" {
		return nil
	}
	if lj, ok := c.l.byID[pj.Job.ID]; ok && !lj.evicted {
		bound := lj.run.Pods
		// The waiting pods of one exclusive part join that part's pods
		// (later.go).
		if part := onePart(pj.Job, pj.Waiting); part != "" {
			if peers := partPods(pj.Job, bound, part); len(peers) > 0 {
				bound = peers
			}
		}
		return health.Beside(c.l.view, pj.Job, bound, gang.Required)
	}
	return nil
}
