package engine

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/preempt"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

// Preemption names how the engine picks victims.
type Preemption string

const (
	// PreemptLeastLost (the default for corral) evicts the set of jobs that
	// throws away the least work (GPU-seconds since their last checkpoint
	// plus restart overhead), and consolidates scattered GPUs.
	PreemptLeastLost Preemption = "least-lost"
	// PreemptNewest evicts the lowest-priority, newest jobs first, as peer
	// schedulers do; no consolidation. A baseline for reports.
	PreemptNewest Preemption = "newest"
	// PreemptOff never evicts.
	PreemptOff Preemption = "off"
)

// DefaultPreemptBudget is the placements a cycle may try while searching
// for victims, across all its waiting jobs; a single job gets at most
// perJobBudget of them.
const (
	DefaultPreemptBudget = 500
	perJobBudget         = 100
	// DefaultCheckpointWait bounds how long a preemption may wait for its
	// victims' next checkpoint (Config.CheckpointWait).
	DefaultCheckpointWait = preempt.DefaultCheckpointWait
	// consolidationTries caps the gangs a cycle tries to consolidate for:
	// estimating the wait walks every running job of every domain.
	consolidationTries = 16
)

// roomMaker makes room for jobs that did not fit, one cycle long. It keeps
// the running jobs in id order and forgets the ones it evicted.
type roomMaker struct {
	e       *Engine
	l       *ledger
	s       *Snapshot
	view    *cluster.State
	placer  *placement.Placer
	scorer  placement.Scorer
	devices placement.DeviceOrder
	qs      *queue.State
	// running are the jobs that may lose pods, as the cycle's earlier
	// steps left them; the ledger says which a later decision evicted.
	running []RunningJob
	budget  int
	stats   *CycleStats
	// minPrio is the lowest priority among running jobs that may be
	// evicted at all: a job at or below it can only reclaim, and most
	// waiting jobs are turned away here in O(1).
	minPrio      int32
	consolidates int
	// evictable marks the running jobs neither protected nor empty;
	// unitsOf caches each one's units (costs do not change within a cycle).
	evictable []bool
	unitsOf   map[int][]preempt.Unit
	// retry is when a deferred preemption should be looked at again.
	retry time.Time
	// reserved, set by the backfill step (corral), says whether node n is
	// held for a reservation the job being placed may not use: evicting a
	// job there would only hand the reservation's room to the preemptor.
	reserved func(n int) bool
	// startedStarved says a running job started only after waiting past
	// the starvation age (backfill): priority preemption leaves it alone.
	startedStarved func(RunningJob) bool
}

func (e *Engine) newRoomMaker(l *ledger, scorer placement.Scorer, devices placement.DeviceOrder, qs *queue.State) *roomMaker {
	if !e.v.gangs || e.cfg.Preemption == PreemptOff {
		return nil
	}
	running := l.Running()
	if len(running) == 0 {
		return nil
	}
	s, view, placer, stats := l.s, l.view, l.placer, &l.plan.Stats
	budget := e.cfg.PreemptBudget
	if budget <= 0 {
		budget = DefaultPreemptBudget
	}
	m := &roomMaker{e: e, l: l, s: s, view: view, placer: placer, scorer: scorer, devices: devices, qs: qs,
		running: running, budget: budget, stats: stats, minPrio: math.MaxInt32,
		evictable: make([]bool, len(running)), unitsOf: map[int][]preempt.Unit{}}
	for i, rj := range running {
		if len(rj.Pods) > 0 && preempt.Protected(rj.Job, preempt.RunFor(rj, s.Now)) == "" {
			m.evictable[i] = true
			m.minPrio = min(m.minPrio, rj.Job.Priority)
		}
	}
	if m.minPrio == math.MaxInt32 {
		return nil // nothing may be evicted this cycle
	}
	return m
}

// shapeSuffix keeps the failed-shape cache honest: with preemption, two
// gangs of one shape may differ in what they may evict.
func (m *roomMaker) shapeSuffix(j *workload.Job, leaf string) string {
	if m == nil {
		return ""
	}
	return fmt.Sprintf("|%s|%d", leaf, j.Priority)
}

// makeRoom tries, for a job that waits only for capacity, preemption (or
// reclaim) and then consolidation. On success the job is placed on the
// view (not committed) and the evictions are returned; otherwise the view is
// as before and why says what the search found.
func (m *roomMaker) makeRoom(pj PendingJob, leaf string, gang placement.Gang, f *placement.Failure) (placement.Result, []Eviction, string) {
	if m == nil || pj.Waiting != nil || f == nil || f.Verdict != placement.WaitFree || m.budget <= 0 {
		return placement.Result{}, nil, ""
	}
	charge := queue.DemandOf(m.view, pj)
	res, evs, why := m.preempt(pj, leaf, gang, charge)
	if res.Failure == nil && len(res.Assignments) > 0 {
		return res, evs, ""
	}
	if m.e.cfg.Preemption == PreemptNewest || !m.e.cfg.Consolidate {
		return placement.Result{}, nil, why
	}
	res, evs, cwhy := m.consolidate(pj, gang)
	if res.Failure == nil && len(res.Assignments) > 0 {
		return res, evs, ""
	}
	switch {
	case why == "":
		why = cwhy
	case cwhy != "":
		why += "; consolidation: " + cwhy
	}
	return placement.Result{}, nil, why
}

// standing is a job's side of the rules.
func (m *roomMaker) standing(j *workload.Job, leaf string) preempt.Standing {
	st := preempt.Standing{Queue: leaf, Priority: j.Priority}
	if m.qs != nil && leaf != "" {
		st.Usage = m.qs.Usage(leaf)
		st.Guarantee = m.qs.Guarantee(leaf)
		st.Fair = m.qs.Fair(leaf)
		st.Reclaim = m.qs.Reclaims(leaf)
	}
	return st
}

// units turns a running job into evictable units: the whole job, or for an
// elastic job running above its minimum, its extra pods and then the rest.
func (m *roomMaker) units(i int, out []preempt.Unit, kind []preempt.Kind, k preempt.Kind) ([]preempt.Unit, []preempt.Kind) {
	us, ok := m.unitsOf[i]
	if !ok {
		us = m.unitsOfJob(m.running[i])
		m.unitsOf[i] = us
	}
	base := len(out)
	for _, u := range us {
		if u.Needs >= 0 {
			u.Needs += base
		}
		out = append(out, u)
		kind = append(kind, k)
	}
	return out, kind
}

// unitsOfJob builds a job's units with Needs relative to the first.
func (m *roomMaker) unitsOfJob(rj RunningJob) []preempt.Unit {
	pods := append([]PodBind(nil), rj.Pods...)
	sort.Slice(pods, func(a, b int) bool {
		if pods[a].Pod.PodSet != pods[b].Pod.PodSet {
			return pods[a].Pod.PodSet < pods[b].Pod.PodSet
		}
		return pods[a].Pod.Index < pods[b].Pod.Index
	})
	conv := func(ps []PodBind) []cluster.Placed {
		out := make([]cluster.Placed, len(ps))
		for i, p := range ps {
			out[i] = cluster.Placed{Pod: p.Pod, Node: p.NodeIndex, Alloc: p.Alloc}
		}
		return out
	}
	refs := func(ps []PodBind) []workload.PodRef {
		out := make([]workload.PodRef, len(ps))
		for i, p := range ps {
			out[i] = p.Pod
		}
		return out
	}
	whole := preempt.RestartCost(rj, nil, m.s.Now)
	base := preempt.Unit{Job: rj.Job.ID, Priority: rj.Job.Priority, Start: rj.Start, Needs: -1}
	if gm := rj.Job.GangMin(); gm < len(pods) && gm > 0 {
		extra, keep := pods[gm:], pods[:gm]
		u, v := base, base
		u.Pods, u.Cost = conv(extra), preempt.RestartCost(rj, refs(extra), m.s.Now)
		v.Pods, v.Cost, v.Needs = conv(keep), max(0, whole-u.Cost), 0
		return []preempt.Unit{u, v}
	}
	u := base
	u.Pods, u.Cost = conv(pods), whole
	return []preempt.Unit{u}
}

// preempt evicts by priority inside the queue and reclaims across queues.
func (m *roomMaker) preempt(pj PendingJob, leaf string, gang placement.Gang, charge queue.Amounts) (placement.Result, []Eviction, string) {
	me := m.standing(pj.Job, leaf)
	if pj.Job.Priority <= m.minPrio && !me.Reclaim {
		return placement.Result{}, nil, "" // no lower priority to preempt, no right to reclaim
	}
	m.budget-- // a scan of the running jobs costs like a placement tried
	var units []preempt.Unit
	var kinds []preempt.Kind
	// The rules look at a victim's queue and priority only: one answer per
	// pair serves every running job that shares it.
	type side struct {
		leaf string
		prio int32
	}
	kindOf := map[side]preempt.Kind{}
	for i, rj := range m.running {
		if m.l.Evicted(rj.Job.ID) || !m.evictable[i] {
			continue
		}
		vleaf := ""
		if m.qs != nil {
			l, ok := m.qs.RunningLeaf(rj.Job.ID)
			if !ok {
				continue // its queue is refused: it is charged nowhere, so reclaiming it restores nothing
			}
			vleaf = l
		}
		key := side{vleaf, rj.Job.Priority}
		k, seen := kindOf[key]
		if !seen {
			k = preempt.Eligible(me, charge, m.standing(rj.Job, vleaf))
			kindOf[key] = k
		}
		if k == preempt.NotAllowed || (k == preempt.ByPriority && m.startedStarved != nil && m.startedStarved(rj)) ||
			(k == preempt.ByPriority && m.onReserved(rj)) {
			continue
		}
		units, kinds = m.units(i, units, kinds, k)
	}
	if len(units) == 0 {
		return placement.Result{}, nil, ""
	}
	strategy := preempt.LeastLost
	if m.e.cfg.Preemption == PreemptNewest {
		strategy = preempt.LowestPriorityNewest
	}
	r := m.search(preempt.Problem{Gang: gang, Units: units, Strategy: strategy,
		Allowed: m.reclaimKeeps(me, charge, units, kinds)})
	if !r.Found {
		return placement.Result{}, nil, "preemption: " + r.Why
	}
	if strategy == preempt.LeastLost {
		if why := m.deferToCheckpoint(units, r.Victims); why != "" {
			return placement.Result{}, nil, why
		}
	}
	return m.apply(pj, leaf, gang, units, r, func(u int) EvictionCause {
		if kinds[u] == preempt.ByReclaim {
			return CauseReclaim
		}
		return CausePreempt
	})
}

// onReserved reports whether a pod of rj sits on a node reserved against
// the job being placed. Such a victim is never chosen for priority
// preemption: what it frees belongs to a reservation the preemptor would
// outlast, and placing the preemptor there would delay the reservation by
// the preemptor's whole runtime (on gen:llm seed 42 a starved whole-cluster
// gang was pushed back by more than four days this way). Reclaim passes it
// (issue 17): a queue taking back its guarantee restores a promise made
// before the reservation, which was built on borrowed capacity; guarding
// reclaim too cost the issue-5 queues workload fairness (Jain 0.676
// against 0.732).
func (m *roomMaker) onReserved(rj RunningJob) bool {
	if m.reserved == nil {
		return false
	}
	for _, p := range rj.Pods {
		if m.reserved(p.NodeIndex) {
			return true
		}
	}
	return false
}

// deferToCheckpoint holds a preemption back when every victim is about to
// checkpoint (preempt.DeferToCheckpoint), books when to look again and
// returns the reason the job waits; "" evicts now.
func (m *roomMaker) deferToCheckpoint(units []preempt.Unit, victims []int) string {
	jobs := map[workload.JobID]bool{}
	for _, u := range victims {
		jobs[units[u].Job] = true
	}
	d, ok := preempt.DeferToCheckpoint(m.running, jobs, m.s.Now, m.e.cfg.CheckpointWait)
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

// reclaimKeeps vets a set of victims queue by queue (preempt.Keeps), so
// that reclaim never takes so much that the victims' queue could take it
// back in a later cycle.
func (m *roomMaker) reclaimKeeps(me preempt.Standing, charge queue.Amounts, units []preempt.Unit, kinds []preempt.Kind) func([]int) bool {
	if m.qs == nil {
		return nil
	}
	return func(set []int) bool {
		removed := map[string]queue.Amounts{}
		var leaves []string
		for _, u := range set {
			if kinds[u] != preempt.ByReclaim {
				continue
			}
			leaf, _ := m.qs.RunningLeaf(units[u].Job)
			if removed[leaf] == nil {
				removed[leaf] = queue.Amounts{}
				leaves = append(leaves, leaf)
			}
			for _, p := range units[u].Pods {
				queue.AddAlloc(removed[leaf], m.view, p.Node, p.Alloc)
			}
		}
		for _, leaf := range leaves {
			v := preempt.Standing{Queue: leaf, Usage: m.qs.Usage(leaf), Guarantee: m.qs.Guarantee(leaf), Fair: m.qs.Fair(leaf)}
			if !preempt.Keeps(me, charge, v, removed[leaf]) {
				return false
			}
		}
		return true
	}
}

// search runs one bounded search and books its cost in the cycle's stats.
func (m *roomMaker) search(p preempt.Problem) preempt.Result {
	p.View, p.Scorer, p.Devices = m.view, m.scorer, m.devices
	p.Budget = min(m.budget, perJobBudget)
	r := preempt.Search(p)
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
func (m *roomMaker) apply(pj PendingJob, leaf string, gang placement.Gang, units []preempt.Unit, r preempt.Result,
	cause func(u int) EvictionCause) (placement.Result, []Eviction, string) {
	released := []cluster.Placed{}
	for _, u := range r.Victims {
		released = append(released, units[u].Pods...)
	}
	// The victims leave the view now; the cycle evicts them (Ledger.Evict)
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
	var evs []Eviction
	for _, id := range jobs {
		ev := Eviction{Job: id, By: pj.Job.ID}
		whole := false
		var gpus int64
		for _, u := range byJob[id] {
			ev.Cause = cause(u)
			ev.LostGPUSeconds += units[u].Cost
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
				m.qs.Charge(vleaf, chargeOfEvicted(m.view, units, byJob[id]), -1)
			}
		}
	}
	m.stats.Evictions += len(evs)
	return res, evs, ""
}

// isWhole: the unit holds every pod of its job.
func (m *roomMaker) isWhole(units []preempt.Unit, u int) bool {
	for j := range units {
		if units[j].Needs == u {
			return false
		}
	}
	return true
}

func chargeOfEvicted(s *cluster.State, units []preempt.Unit, idx []int) queue.Amounts {
	c := queue.Amounts{}
	for _, u := range idx {
		for _, p := range units[u].Pods {
			queue.AddAlloc(c, s, p.Node, p.Alloc)
		}
	}
	return c
}

// message is the eviction's one line for events: who, why, what it costs.
func (m *roomMaker) message(ev Eviction, pj PendingJob, leaf string, whole bool, milli int64) string {
	var b strings.Builder
	switch ev.Cause {
	case CauseReclaim:
		fmt.Fprintf(&b, "reclaimed for job %s of queue %q", pj.Job.ID, leaf)
		if m.qs != nil {
			if vleaf, ok := m.qs.RunningLeaf(ev.Job); ok {
				fmt.Fprintf(&b, ", which is owed capacity that queue %q holds above its share", vleaf)
			}
		}
	case CauseConsolidate:
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

// RestartCost is preempt.RestartCost, for drivers that report the work an
// eviction throws away (drivers do not import the policy packages).
func RestartCost(rj RunningJob, pods []workload.PodRef, now time.Time) float64 {
	return preempt.RestartCost(rj, pods, now)
}
