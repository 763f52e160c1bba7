package health

import (
	"fmt"
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// CycleLedger is what the health step needs of the cycle's ledger
// (internal/engine): the running view, the holds table, and the verbs
// through which remediations, binds, evictions and waits enter the plan.
type CycleLedger interface {
	Ledger
	Snapshot() *cycle.Snapshot
	View() *cluster.State
	Placer() *placement.Placer
	Holds() *cluster.Holds
	Bind(j *workload.Job, res placement.Result) cycle.GangBind
	// Evict records an eviction and gives back its pods not vacated yet.
	Evict(ev cycle.Eviction)
	// Remediated records what was done about a job a failure hit.
	Remediated(r cycle.Remediation)
	// Wait records why a pending job waits.
	Wait(job workload.JobID, r cycle.Reason)
	Stats() *cycle.CycleStats
	// RestartCost prices evicting pods of rj (nil: all) with the
	// restart-cost model.
	RestartCost(rj cycle.RunningJob, pods []workload.PodRef) float64
	// Resolve turns a pending job's waiting pods into its gang, or says
	// why it can never be placed.
	Resolve(pj cycle.PendingJob) (placement.Gang, cycle.Reason, bool)
}

// Cycle is the health step of one cycle: spares held, running jobs on
// failed devices or nodes remediated, and the ranks that replace failed
// ones placed before anyone else. Without Full (the baselines) every hit
// job restarts whole, anywhere, and no spare is held, as Kubernetes does.
type Cycle struct {
	l      CycleLedger
	full   bool
	spares *Spares
	// handled are the pending jobs this step placed or explained: the
	// ordinary placement leaves them alone.
	handled map[workload.JobID]bool
}

// NewCycle starts the health step of a cycle on the ledger l.
func NewCycle(l CycleLedger, full bool) *Cycle {
	return &Cycle{l: l, full: full, handled: map[workload.JobID]bool{}}
}

// Spares are the spares held this cycle (nil: none).
func (h *Cycle) Spares() *Spares { return h.spares }

// Handled reports whether this step placed or explained pending job id.
func (h *Cycle) Handled(id workload.JobID) bool { return h.handled[id] }

// Run holds the spares, remediates the running jobs hit by failures and
// places the pinned replacement ranks.
func (h *Cycle) Run() {
	s, view, stats := h.l.Snapshot(), h.l.View(), h.l.Stats()
	idx, problems := NewIndex(view, s.Failures)
	if h.full && len(s.Spares) > 0 {
		want, p := ExpandSpares(view, s.Spares)
		problems = append(problems, p...)
		h.spares = HoldSpares(view, h.l.Holds(), want)
		stats.SpareGPUsHeld = h.spares.HeldGPUs()
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		stats.HealthProblems = problems
	}
	byID := h.remediate(idx)
	if h.full {
		h.placePins(byID)
	}
}

// remediate decides about every running job a failure hit, in id order,
// and returns the running jobs by id.
func (h *Cycle) remediate(idx *Index) map[workload.JobID]cycle.RunningJob {
	s, view := h.l.Snapshot(), h.l.View()
	rem := &Remediator{Ledger: h.l, View: view, Placer: h.l.Placer(), Index: idx, Spares: h.spares, Now: s.Now,
		RestartOnly: !h.full}
	paused := pausedGangs(s)
	running := append([]cycle.RunningJob(nil), s.Running...)
	sort.Slice(running, func(a, b int) bool { return running[a].Job.ID < running[b].Job.ID })
	byID := make(map[workload.JobID]cycle.RunningJob, len(running))
	for _, rj := range running {
		byID[rj.Job.ID] = rj
		d, hit := rem.Remediate(rj)
		if !hit {
			continue
		}
		r := cycle.Remediation{Job: rj.Job.ID, Action: d.Action, Failed: d.Failed, Pods: d.Evict, Message: d.Message}
		if d.Action == workload.ReplaceRanks {
			// Always pinned, the cluster included: the new ranks are then
			// placed first, may use spares, and a gang whose room is gone
			// restarts rather than holding its healthy ranks idle.
			dom := view.Domain(d.Within)
			r.Level, r.Domain = view.Levels()[dom.Level], dom.Name
		}
		h.l.Remediated(r)
		if len(d.Evict) == 0 {
			continue
		}
		lost := d.Evict
		if d.WholeGang || d.Action == workload.RestartGang {
			lost = nil // every rank rolls back to the last checkpoint
		}
		cost := h.l.RestartCost(rj, lost)
		if paused[rj.Job.ID] {
			cost = 0 // its rollback was counted when its first rank went
		}
		h.l.Evict(cycle.Eviction{Job: rj.Job.ID, Pods: d.Evict, Cause: cycle.CauseFailure,
			Message: d.Message, LostGPUSeconds: cost})
		// An escalation later in this cycle restarts what the job still
		// holds: not these pods again (a Plan names each eviction once).
		byID[rj.Job.ID] = without(rj, d.Evict)
		if d.Action == workload.RestartGang {
			h.handled[rj.Job.ID] = true
		}
	}
	return byID
}

// placePins places the waiting pods of partly bound jobs pinned to a
// domain (replacement ranks, or the rest of a gang with a required level)
// before anyone else; a strict gang whose replacements found no room
// restarts whole (Escalate).
func (h *Cycle) placePins(byID map[workload.JobID]cycle.RunningJob) {
	s, view := h.l.Snapshot(), h.l.View()
	for _, pj := range s.Pending {
		if pj.Waiting == nil {
			continue
		}
		if h.handled[pj.Job.ID] {
			h.l.Wait(pj.Job.ID, cycle.Reason{Verdict: placement.WaitFree, Message: "restarting the whole gang after a failure"})
			continue
		}
		rj, running := byID[pj.Job.ID]
		within, pinned, replacing, why := PinOf(view, pj, rj.Pods)
		if why != "" {
			h.handled[pj.Job.ID] = true
			h.l.Wait(pj.Job.ID, cycle.Reason{Verdict: placement.NeverFits, Level: pj.Within.Level, Message: why})
			continue
		}
		if !pinned {
			continue // no pin: the ordinary path places it
		}
		h.handled[pj.Job.ID] = true
		placed := h.placePinned(pj, within, replacing, rj.Pods)
		// A gang this cycle's remediation left holding nothing restarts
		// whole already: nothing is left to escalate.
		if !placed && running && replacing && len(rj.Pods) > 0 && Escalates(pj.Job) {
			// Not priced: the strict gang rolled back (and was charged its
			// restart overhead) when its failed ranks were evicted, and its
			// ranks have sat idle since (pausedGangs).
			rem, ev := Escalate(rj)
			h.l.Remediated(rem)
			h.l.Evict(ev)
		}
	}
}

// placePinned places a pinned job's waiting pods inside within; replacement
// ranks may use the spares held there. The rest of a gang is tried beside
// its bound pods first, in the tightest domain holding them (Beside).
func (h *Cycle) placePinned(pj cycle.PendingJob, within cluster.DomainID, replacing bool, bound []cycle.PodBind) bool {
	view, placer := h.l.View(), h.l.Placer()
	g, reason, ok := h.l.Resolve(pj)
	if ok {
		g.Within = within
		var tighter []cluster.DomainID
		var released []SpareKey
		if replacing {
			released = h.spares.Release(view, within, pj.Job.Queue)
		} else {
			tighter = Beside(view, pj.Job, bound, view.Domain(within).Level)
		}
		res := PlaceBeside(placer, g, tighter)
		if res.Failure == nil {
			placer.Commit()
		}
		h.spares.Rehold(view, released)
		if res.Failure == nil {
			h.l.Bind(pj.Job, res)
			h.l.Stats().JobsPlaced++
			h.l.Stats().PodsPlaced += len(res.Assignments)
			return true
		}
		f := res.Failure
		reason = cycle.Reason{Verdict: f.Verdict, Level: f.Level, Best: f.Best, BestFits: f.BestFits, Pods: len(g.Pods),
			Message: fmt.Sprintf("the rest of the gang is bound in %s: %s", view.Domain(within).Name, f.Message)}
	}
	h.l.Wait(pj.Job.ID, reason)
	return false
}

// without is rj holding none of the pods gone.
func without(rj cycle.RunningJob, gone []workload.PodRef) cycle.RunningJob {
	out := make(map[workload.PodRef]bool, len(gone))
	for _, p := range gone {
		out[p] = true
	}
	kept := make([]cycle.PodBind, 0, len(rj.Pods))
	for _, p := range rj.Pods {
		if !out[p.Pod] {
			kept = append(kept, p)
		}
	}
	rj.Pods = kept
	return rj
}

// pausedGangs are the strict gangs waiting for replacement ranks (pending
// with the driver's replacement pin): their whole gang rolled back to its
// last checkpoint, and was priced so, when the failed ranks were evicted,
// and their healthy ranks have made no progress since. Evicting those ranks
// now, for a second failure or to restart the gang (Escalate), throws away
// no more work: pricing it again counted one rollback two or three times
// in the lost-work metric and events.
func pausedGangs(s *cycle.Snapshot) map[workload.JobID]bool {
	out := map[workload.JobID]bool{}
	for _, pj := range s.Pending {
		if pj.Waiting != nil && pj.Within.Domain != "" && StrictGang(pj.Job) {
			out[pj.Job.ID] = true
		}
	}
	return out
}
