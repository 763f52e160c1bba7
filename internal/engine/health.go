package engine

import (
	"fmt"
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/preempt"
	"github.com/corral-dev/corral/internal/workload"
)

// healthCycle is the health step's state within one cycle.
type healthCycle struct {
	holds   *health.Spares
	handled map[workload.JobID]bool // pending jobs the health step placed or explained
}

// healthScorer applies suspect nodes to the view (corral only: the
// baselines know nothing of them, as kube-scheduler does not) and returns
// the scorer that puts the remaining suspects last.
func (e *Engine) healthScorer(s *Snapshot, view *cluster.State, scorer placement.Scorer) placement.Scorer {
	if !e.v.health || len(s.Suspects) == 0 {
		return scorer
	}
	avoid, _ := health.Suspects(view, s.Suspects, s.Now, s.SuspectLimit)
	if len(avoid) == 0 {
		return scorer
	}
	return health.AvoidScorer{Inner: scorer, Avoid: avoid}
}

// healthStep holds the spares, remediates running jobs hit by failures and
// places pinned replacement ranks, before any other job is considered.
// The baselines restart every hit job whole and hold no spares.
func (e *Engine) healthStep(l *ledger) healthCycle {
	s, view, placer, plan := l.s, l.view, l.placer, &l.plan
	hc := healthCycle{handled: map[workload.JobID]bool{}}
	corral := e.v.health
	idx, problems := health.NewIndex(view, s.Failures)
	if corral && len(s.Spares) > 0 {
		want, p := health.ExpandSpares(view, s.Spares)
		problems = append(problems, p...)
		hc.holds = health.HoldSpares(view, l.holds, want)
		plan.Stats.SpareGPUsHeld = hc.holds.HeldGPUs()
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		plan.Stats.HealthProblems = problems
	}
	rem := &health.Remediator{Ledger: l, View: view, Placer: placer, Index: idx, Spares: hc.holds, Now: s.Now, RestartOnly: !corral}
	running := make([]int, len(s.Running))
	for i := range running {
		running[i] = i
	}
	sort.Slice(running, func(a, b int) bool { return s.Running[running[a]].Job.ID < s.Running[running[b]].Job.ID })
	byID := map[workload.JobID]int{}
	for _, i := range running {
		rj := s.Running[i]
		byID[rj.Job.ID] = i
		d, hit := rem.Remediate(rj)
		if !hit {
			continue
		}
		r := Remediation{Job: rj.Job.ID, Action: d.Action, Failed: d.Failed, Pods: d.Evict, Message: d.Message}
		if d.Action == workload.ReplaceRanks {
			// Always pinned, the cluster included: the new ranks are then
			// placed first, may use spares, and a gang whose room is gone
			// restarts rather than holding its healthy ranks idle.
			dom := view.Domain(d.Within)
			r.Level, r.Domain = view.Levels()[dom.Level], dom.Name
		}
		plan.Remediations = append(plan.Remediations, r)
		if len(d.Evict) == 0 {
			continue
		}
		lost := d.Evict
		if d.WholeGang || d.Action == workload.RestartGang {
			lost = nil // every rank rolls back to the last checkpoint
		}
		l.Evict(Eviction{Job: rj.Job.ID, Pods: d.Evict, Cause: CauseFailure,
			Message: d.Message, LostGPUSeconds: preempt.RestartCost(rj, lost, s.Now)})
		if d.Action == workload.RestartGang {
			hc.handled[rj.Job.ID] = true
		}
	}
	if !corral {
		return hc
	}
	for _, pj := range s.Pending {
		if pj.Waiting == nil {
			continue
		}
		if hc.handled[pj.Job.ID] {
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: Reason{Verdict: placement.WaitFree,
				Message: "restarting the whole gang after a failure"}})
			continue
		}
		var bound []PodBind
		if i, ok := byID[pj.Job.ID]; ok {
			bound = s.Running[i].Pods
		}
		within, pinned, replacing, why := health.PinOf(view, pj, bound)
		if why != "" {
			hc.handled[pj.Job.ID] = true
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: never(pj.Within.Level, why)})
			continue
		}
		if !pinned {
			continue // no pin: the ordinary path places it
		}
		hc.handled[pj.Job.ID] = true
		placed := l.placePinned(hc.holds, pj, within, replacing)
		if i, ok := byID[pj.Job.ID]; !placed && ok && replacing && health.Escalates(pj.Job) {
			rem, ev := health.Escalate(s.Running[i])
			ev.LostGPUSeconds = preempt.RestartCost(s.Running[i], nil, s.Now)
			plan.Remediations = append(plan.Remediations, rem)
			l.Evict(ev)
		}
	}
	return hc
}

// placePinned places a pinned job's waiting pods inside within; replacement
// ranks may use the spares held there.
func (l *ledger) placePinned(holds *health.Spares, pj PendingJob, within cluster.DomainID, replacing bool) bool {
	view, placer, plan := l.view, l.placer, &l.plan
	pods, reason, ok := resolvePods(view, pj)
	if ok {
		var g placement.Gang
		g, reason, ok = gangOf(view, pj.Job, pods)
		g.Within = within
		if ok {
			var released []health.SpareKey
			if replacing {
				released = holds.Release(view, within, pj.Job.Queue)
			}
			res := placer.PlaceGang(g)
			if res.Failure == nil {
				placer.Commit()
			}
			holds.Rehold(view, released)
			if res.Failure == nil {
				l.Bind(pj.Job, res)
				plan.Stats.JobsPlaced++
				plan.Stats.PodsPlaced += len(res.Assignments)
				return true
			}
			f := res.Failure
			reason = Reason{Verdict: f.Verdict, Level: f.Level, Best: f.Best, BestFits: f.BestFits, Pods: len(pods),
				Message: fmt.Sprintf("the rest of the gang is bound in %s: %s", view.Domain(within).Name, f.Message)}
		}
	}
	plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: reason})
	return false
}
