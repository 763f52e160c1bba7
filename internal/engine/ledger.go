package engine

import (
	"sort"

	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/preempt"
	"github.com/corral-dev/corral/internal/workload"
)

// ledger is the one account of a cycle: the running view (the snapshot's
// free capacity, cloned), the jobs holding capacity in it, the holds that
// keep capacity from placement, and the Plan being built. Every step and
// policy changes capacity through its verbs only:
//
//   - bind: a placement made on the view becomes a GangBind of the plan and
//     its pods join their job;
//   - evict: pods leave their job and the plan records why; their capacity
//     returns to the view (at once, or already by a trial's vacate);
//   - hold / release: capacity kept from placement by an owner (a
//     reservation, a pool, a spare), and given back.
//
// So each step sees what the steps before it decided, and no pod is
// evicted twice in one plan: an evicted pod is no longer in its job.
type ledger struct {
	s      *Snapshot
	view   *cluster.State
	placer *placement.Placer
	plan   Plan
	// jobs are the jobs holding capacity: those running when the cycle
	// began, in id order, then those bound this cycle, in bind order.
	jobs []*liveJob
	byID map[workload.JobID]*liveJob
	// vacated are pods a trial freed in the view ahead of their eviction.
	vacated map[workload.PodRef]bool
	// holds keeps capacity from placement for reservations, pools and
	// spares: one table, keyed by owner.
	holds *cluster.Holds
	// heldAt is how many evictions the plan had when the closed nodes were
	// last taken (RetakeHolds).
	heldAt int
	// running and holders cache Running and Holders until the next change.
	running []RunningJob
	holders []backfill.Holder
}

// liveJob is one job holding capacity in the cycle.
type liveJob struct {
	// run is the job as it ran before the cycle, with the pods of then it
	// still holds (evictions take pods out).
	run RunningJob
	// placed are the pods bound to it this cycle.
	placed []cluster.Placed
	// evicted: a decision of this cycle took pods from it for room or
	// runtime, so no other decision takes more. A failure's remediation
	// does not count: the healthy ranks stay in play like any running pod.
	evicted bool
}

func newLedger(s *Snapshot, view *cluster.State) *ledger {
	l := &ledger{s: s, view: view, byID: make(map[workload.JobID]*liveJob, len(s.Running)),
		vacated: map[workload.PodRef]bool{}, holds: cluster.NewHolds(view)}
	l.jobs = make([]*liveJob, 0, len(s.Running))
	for _, rj := range s.Running {
		lj := &liveJob{run: rj}
		l.jobs = append(l.jobs, lj)
	}
	sort.Slice(l.jobs, func(a, b int) bool { return l.jobs[a].run.Job.ID < l.jobs[b].run.Job.ID })
	for _, lj := range l.jobs {
		l.byID[lj.run.Job.ID] = lj
	}
	return l
}

// Running lists the jobs that ran before the cycle, still hold pods from
// then and were not evicted by a decision of this cycle, in id order, each
// with the pods it still holds: the candidates for every decision that
// takes capacity from running work. The list is shared until the next
// eviction: callers must not change it.
func (l *ledger) Running() []RunningJob {
	if l.running != nil {
		return l.running
	}
	l.running = make([]RunningJob, 0, len(l.jobs))
	for _, lj := range l.jobs {
		if len(lj.run.Pods) > 0 && !lj.evicted {
			l.running = append(l.running, lj.run)
		}
	}
	return l.running
}

// Evicted reports whether a decision of this cycle took pods from job id.
func (l *ledger) Evicted(id workload.JobID) bool {
	lj, ok := l.byID[id]
	return ok && lj.evicted
}

// Bind turns a placement on the view into the plan's bind decision for
// job j and books the pods to it.
func (l *ledger) Bind(j *workload.Job, res placement.Result) GangBind {
	gb := bindOf(l.view, j.ID, res)
	l.plan.Binds = append(l.plan.Binds, gb)
	l.holders = nil
	lj, ok := l.byID[j.ID]
	if !ok {
		lj = &liveJob{run: RunningJob{Job: j, Start: l.s.Now}}
		l.byID[j.ID] = lj
		l.jobs = append(l.jobs, lj)
	}
	for _, p := range gb.Pods {
		lj.placed = append(lj.placed, p.Placed)
	}
	return gb
}

// Vacate frees pods' capacity in the view ahead of a decision (a trial:
// would the gang fit without them?); evict then records them, restore
// takes the capacity back.
func (l *ledger) Vacate(pods []cluster.Placed) {
	for _, p := range pods {
		l.view.Release(p.NodeIndex, p.Alloc)
		l.vacated[p.Pod] = true
	}
}

// Restore undoes vacate.
func (l *ledger) Restore(pods []cluster.Placed) {
	for _, p := range pods {
		// The pod held exactly this before it was vacated.
		_ = l.view.Allocate(p.NodeIndex, p.Alloc)
		delete(l.vacated, p.Pod)
	}
}

// Evict records an eviction, and counts it by cause in the plan's stats:
// its pods leave their job and their capacity returns to the view, unless
// vacate freed it already.
func (l *ledger) Evict(ev Eviction) {
	l.plan.Evictions = append(l.plan.Evictions, ev)
	l.running, l.holders = nil, nil
	l.plan.Stats.CountEviction(ev.Cause)
	lj, ok := l.byID[ev.Job]
	if !ok {
		return
	}
	if ev.Cause != CauseFailure {
		lj.evicted = true
	}
	out := make(map[workload.PodRef]bool, len(ev.Pods))
	for _, p := range ev.Pods {
		out[p] = true
	}
	kept := lj.run.Pods[:0:0]
	for _, p := range lj.run.Pods {
		if !out[p.Pod] {
			kept = append(kept, p)
			continue
		}
		if l.vacated[p.Pod] {
			delete(l.vacated, p.Pod)
		} else {
			l.view.Release(p.NodeIndex, p.Alloc)
		}
	}
	lj.run.Pods = kept
}

// RestartCost is the work evicting pods of rj (nil: all) throws away now
// (preempt.RestartCost), for the policies that must not import preempt.
func (l *ledger) RestartCost(rj RunningJob, pods []workload.PodRef) float64 {
	return preempt.RestartCost(rj, pods, l.s.Now)
}

// pods lists what job lj holds now: its pods from before the cycle, then
// those bound this cycle.
func (lj *liveJob) pods() []cluster.Placed {
	out := make([]cluster.Placed, 0, len(lj.run.Pods)+len(lj.placed))
	for _, p := range lj.run.Pods {
		out = append(out, p.Placed)
	}
	return append(out, lj.placed...)
}

// The ledger is the engine's side of the policies' interfaces
// (backfill.Ledger, preempt.Ledger, health.CycleLedger): what they read of the cycle, and the rules of the
// other policies they may not import.

// Snapshot is the cycle's input.
func (l *ledger) Snapshot() *Snapshot { return l.s }

// View is the running view.
func (l *ledger) View() *cluster.State { return l.view }

// Placer places on the running view.
func (l *ledger) Placer() *placement.Placer { return l.placer }

// Holders lists every job holding capacity now, for the replay of
// expected ends: what running jobs still hold, and the jobs bound this
// cycle. The list is shared until the next bind or eviction: callers must
// not change it.
func (l *ledger) Holders() []backfill.Holder {
	if l.holders != nil {
		return l.holders
	}
	l.holders = make([]backfill.Holder, 0, len(l.jobs))
	for _, lj := range l.jobs {
		if pods := lj.pods(); len(pods) > 0 {
			l.holders = append(l.holders, backfill.Holder{Job: lj.run.Job, Start: lj.run.Start, Pods: pods})
		}
	}
	return l.holders
}

// Holds is the cycle's table of capacity kept from placement.
func (l *ledger) Holds() *cluster.Holds { return l.holds }

// Reserve adds a reservation to the plan.
func (l *ledger) Reserve(rv Reservation) { l.plan.Reservations = append(l.plan.Reservations, rv) }

// RetakeHolds takes the closed nodes again when an eviction came since they
// were last taken: the victims may have freed capacity on them.
func (l *ledger) RetakeHolds() {
	if n := len(l.plan.Evictions); n != l.heldAt {
		l.holds.Refresh()
		l.heldAt = n
	}
}

// Waiting reports whether a job waits for capacity so far.
func (l *ledger) Waiting() bool {
	for _, p := range l.plan.Pending {
		if p.Reason.Verdict == placement.WaitFree {
			return true
		}
	}
	return false
}

// Stats are the plan's counters.
func (l *ledger) Stats() *CycleStats { return &l.plan.Stats }

// Protected says rj may never be evicted now (preempt.Protected).
func (l *ledger) Protected(rj RunningJob) bool {
	return preempt.Protected(rj.Job, preempt.RunFor(rj, l.s.Now)) != ""
}

// Remediated records what was done about a job a failure hit.
func (l *ledger) Remediated(r Remediation) { l.plan.Remediations = append(l.plan.Remediations, r) }

// Wait records why a pending job waits.
func (l *ledger) Wait(job workload.JobID, r Reason) {
	l.plan.Pending = append(l.plan.Pending, Pending{Job: job, Reason: r})
}

// Resolve turns a pending job's waiting pods into its gang, or says why it
// can never be placed (an invalid job, a model or level the cluster lacks).
func (l *ledger) Resolve(pj PendingJob) (placement.Gang, Reason, bool) {
	pods, reason, ok := resolvePods(l.view, pj)
	if !ok {
		return placement.Gang{}, reason, false
	}
	return gangOf(l.view, pj.Job, pods)
}

// Gang resolves a job's pods (its waiting ones) into its gang and shape
// key; ok is false for an invalid job.
func (l *ledger) Gang(pj PendingJob) (placement.Gang, string, bool) {
	pods, _, ok := resolvePods(l.view, pj)
	if !ok {
		return placement.Gang{}, "", false
	}
	g, _, ok := gangOf(l.view, pj.Job, pods)
	if !ok {
		return placement.Gang{}, "", false
	}
	return g, shapeKey(g), true
}
