package engine

import (
	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/preempt"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

// Cycle decides what to do now, in numbered steps; each changes capacity
// only through the cycle's ledger (ledger.go), so nothing is booked twice,
// and each step's policy lives in the package named for it.
func (e *Engine) Cycle(s *Snapshot) Plan {
	c := e.begin(s)    // 1. the running view, the scorer and the placer
	c.warn()           //    preferences the cluster cannot honour, ignored (warnings.go)
	c.health()         // 2. health: suspects, spares, remediation, replacement ranks first
	c.backfillPre()    // 3. backfill: max runtime enforced, pools resolved
	c.holdLater()      //    room of gang members not created yet held beside their peers (later.go)
	c.queues()         // 4. queues: leaves, usage, fair shares, refused jobs, the order
	c.reserveStarved() // 5. preemption set up; the starved job reserved before anyone
	for i, more := c.order.Next(); more; i, more = c.order.Next() {
		c.place(i) // 6. each job: the whole gang (corral) or pod by pod (baselines)
	}
	c.stripLater()    //    members not created yet held, not bound (later.go)
	c.rollBack()      // 7. gangs below their minimum rolled back (rollback.go)
	return c.finish() // 8. spares re-held, queue statuses, growth, holds lifted
}

// run is one cycle's working state: the snapshot as the driver gave it,
// the ledger (what the steps so far decided) and each policy's part of
// the cycle.
type run struct {
	e       *Engine
	s       *Snapshot
	l       *ledger // the running view, the jobs in it, the holds and the plan
	scorer  placement.Scorer
	devices placement.DeviceOrder
	hc      *health.Cycle
	bf      *backfill.Cycle
	qs      *queue.State
	order   jobOrder
	static  []int // the pending jobs their queue admits, in the Orderer's order
	room    *preempt.Room
	// later are the gang members not created yet whose room is held, by job.
	later map[workload.JobID]LaterMembers
	// failed remembers the reason of each gang shape that found no room:
	// capacity only shrinks within a cycle, so an identical gang fails too.
	failed map[string]Reason
}

// begin copies the free capacity into a running view only this cycle
// changes and picks the scorer and device chooser of the policy.
func (e *Engine) begin(s *Snapshot) *run {
	c := &run{e: e, s: s, l: newLedger(s, s.State.Clone()), devices: placement.FirstFree, failed: map[string]Reason{}}
	switch e.v.scorer {
	case scoreLeastAllocated:
		c.scorer = placement.LeastAllocated()
	case scoreMostAllocated:
		c.scorer = placement.MostAllocated()
	default:
		c.devices = placement.Interconnect
		if len(s.Mix) > 0 {
			c.scorer = placement.NewFragScorer(c.l.view, s.Mix, &e.frag)
		} else {
			c.scorer = placement.MostAllocated()
		}
	}
	// Suspect nodes leave the view or score last (internal/health).
	c.scorer = e.healthScorer(s, c.l.view, c.scorer)
	c.l.placer = placement.NewPlacer(c.l.view, c.scorer, c.devices)
	// Domains running exclusive jobs hold are no other exclusive job's.
	for _, rj := range s.Running {
		if lv := c.l.view.LevelIndex(rj.Job.Topology.Exclusive); rj.Job.Topology.Exclusive != "" && lv > 0 {
			for _, pb := range rj.Pods {
				if pb.NodeIndex < 0 || pb.NodeIndex >= c.l.view.NumNodes() {
					continue
				}
				c.l.placer.ClaimExclusive(c.l.view.NodeDomain(pb.NodeIndex, lv))
			}
		}
	}
	return c
}

// health takes failed capacity out, holds the spares, remediates running
// jobs on failed devices and places the ranks that replace failed ones
// before anyone else.
func (c *run) health() {
	c.hc = health.NewCycle(c.l, c.e.v.health)
	c.hc.Run()
}

// backfillPre runs backfill's steps that come before any placement: jobs
// past their max runtime leave, and the pools held for job classes are
// resolved.
func (c *run) backfillPre() {
	c.bf = backfill.NewCycle(c.e.cfg.Backfill, c.e.v.backfill, c.l)
	c.bf.EnforceMaxRuntime()
	c.l.plan.PoolProblems = c.bf.ResolvePools()
}

// queues resolves every job's leaf queue, usage, demand and fair shares
// (queue.State; nil without queues) and sets the order jobs are taken in:
// with queues, DRF across leaves and priority with aging inside one;
// without, the Orderer. Jobs their queue refuses wait here.
func (c *run) queues() {
	c.qs = c.e.newQueueState(c.s, c.l.Running(), c.l.view)
	c.static = c.e.cfg.Orderer.Order(c.s)
	c.order = &fixedOrder{idx: c.static}
	if c.qs == nil {
		return
	}
	c.order = c.qs
	c.l.plan.Pending = append(c.l.plan.Pending, c.qs.RefusedPending(c.s)...)
	c.l.plan.Stats.JobsConsidered += c.qs.NumRefused()
	admitted := c.static[:0:0]
	for _, i := range c.static {
		if !c.qs.Refused(i) {
			admitted = append(admitted, i)
		}
	}
	c.static = admitted
}

// reserveStarved sets up preemption (nil when nothing may be evicted), ties
// backfill to it so no job is evicted twice and growth stays within queue
// limits, and gives the oldest job waiting past the starvation age a
// reservation before anything is placed, so that no job, whatever its
// priority or queue, takes its room unless it ends first.
func (c *run) reserveStarved() {
	c.room = c.newRoom()
	if c.qs != nil {
		c.bf.SetQueues(c.qs)
	}
	if c.room != nil {
		// Preemption honours reservations as placement does, and leaves
		// alone the jobs that started only after starving; a starved job
		// may evict the long jobs in its way when no queue rules them.
		c.room.Reserved = c.bf.Closed
		c.room.StartedStarved = c.bf.StartedStarved
		c.room.Remaining = c.bf.Remaining
		c.bf.Stragglers = c.qs == nil
	}
	c.bf.ReserveStarved(c.static)
}

// finish re-holds the spares, reports every queue's standing, lets elastic
// jobs grow into capacity nobody waits for, lifts every hold and says when
// a deferred preemption should be looked at again.
func (c *run) finish() Plan {
	if sp := c.hc.Spares(); sp != nil {
		sp.HoldAgain(c.l.view)
		c.l.plan.Stats.SpareGPUsHeld = sp.HeldGPUs()
	}
	if c.qs != nil {
		c.l.plan.Queues = c.qs.Statuses(c.s, c.l.view, c.l.plan.Pending)
	}
	c.bf.Grow()
	c.bf.Finish()
	c.l.plan.Retry = c.room.Retry()
	for _, h := range c.l.plan.Held {
		c.l.plan.Stats.PodsHeld += h.Pods
	}
	return c.l.plan
}

// wait records why a job stays pending.
func (c *run) wait(pj PendingJob, r Reason) {
	c.l.plan.Pending = append(c.l.plan.Pending, Pending{Job: pj.Job.ID, Reason: r})
}
