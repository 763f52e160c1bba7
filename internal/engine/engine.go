package engine

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Policy names a scheduling policy. corral is the real one; the others are
// the baselines every report compares it with, run by the same engine.
type Policy string

const (
	// Corral: whole gangs, tightest topology domain, fragmentation-aware nodes,
	// GPUs chosen by interconnect distance.
	Corral Policy = "corral"
	// Spread: pod by pod onto the least-allocated node, like kube-scheduler's
	// default scoring; no gangs, no topology.
	Spread Policy = "spread"
	// Binpack: pod by pod onto the fullest node that fits (best fit); no gangs.
	Binpack Policy = "binpack"
	// FIFO: corral in strict order: once a job is blocked, every job behind
	// it waits too (head-of-line blocking, no backfill). Same placement,
	// queues and preemption as corral; no reservations, pools or growth.
	FIFO Policy = "fifo"
	// Greedy: corral where any job that fits starts and a blocked job
	// reserves nothing (corral before issue 6): big gangs can starve. Same
	// placement, queues and preemption as corral; no pools or growth.
	Greedy Policy = "greedy"
)

// CorralNewest is corral with the peers' preemption: victims by lowest
// priority, then newest, never waiting for checkpoints. It is the baseline for
// preemption reports, not in Policies (default runs leave it out).
const CorralNewest Policy = "corral-newest"

// CorralConsolidate is corral with consolidation moves on
// (Config.Consolidate).
const CorralConsolidate Policy = "corral-consolidate"

// Policies lists every policy in report order.
var Policies = []Policy{Corral, Spread, Binpack, FIFO, Greedy}

// gangs reports whether the policy places whole gangs with corral's search.
func (p Policy) gangs() bool { return p == Corral || p == FIFO || p == Greedy }

// ParsePolicy checks a policy name.
func ParsePolicy(s string) (Policy, error) {
	for _, p := range append(Policies, CorralNewest, CorralConsolidate) {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown policy %q (known: corral, spread, binpack, fifo, greedy, corral-newest, corral-consolidate)", s)
}

// Orderer decides the order in which pending jobs are considered. It is the
// seam where queues and fair share plug in.
type Orderer interface {
	Order(s *Snapshot) []int
}

// PriorityFIFO orders by priority (high first), then submit time, then id.
type PriorityFIFO struct{}

// Order implements Orderer.
func (PriorityFIFO) Order(s *Snapshot) []int {
	idx := make([]int, len(s.Pending))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ja, jb := s.Pending[idx[a]].Job, s.Pending[idx[b]].Job
		if ja.Priority != jb.Priority {
			return ja.Priority > jb.Priority
		}
		if !ja.Submit.Equal(jb.Submit) {
			return ja.Submit.Before(jb.Submit)
		}
		return ja.ID < jb.ID
	})
	return idx
}

// Config chooses the engine's behaviour.
type Config struct {
	Policy  Policy
	Orderer Orderer // nil: PriorityFIFO; unused when the snapshot has queues
	// Aging is the wait that raises a job's priority by one inside its queue
	// (queues only); zero means DefaultAging, negative turns aging off.
	Aging time.Duration
	// Preemption picks victims (corral only); "" is PreemptLeastLost.
	Preemption Preemption
	// PreemptBudget caps the placements one cycle tries while searching
	// for victims; zero means DefaultPreemptBudget.
	PreemptBudget int
	// Consolidate turns consolidation moves on. Off by default: in the
	// simulator benchmark (docs/benchmarks.md) the moves threw away more
	// work than the gangs' earlier starts were worth.
	Consolidate bool
	// CheckpointWait is how long a preemption may wait for its victims'
	// next checkpoint (least-lost only); zero means DefaultCheckpointWait,
	// negative never waits.
	CheckpointWait time.Duration
	// Backfill tunes reservations and runtime limits.
	Backfill BackfillConfig
}

// Engine runs cycles. Besides configuration it keeps only a memo of a pure
// function (node fragmentation per mix), so a cycle's Plan depends on its
// Snapshot alone. An Engine is used by one goroutine at a time.
type Engine struct {
	cfg   Config
	name  Policy // as asked for: CorralNewest runs as Corral
	frag  placement.FragMemo
	trees treeCache
}

// New returns an engine for a policy.
func New(cfg Config) *Engine {
	if cfg.Policy == "" {
		cfg.Policy = Corral
	}
	if cfg.Orderer == nil {
		cfg.Orderer = PriorityFIFO{}
	}
	name := cfg.Policy
	switch cfg.Policy {
	case CorralNewest:
		cfg.Policy, cfg.Preemption = Corral, PreemptNewest
	case CorralConsolidate:
		cfg.Policy, cfg.Consolidate = Corral, true
	}
	if cfg.Preemption == "" {
		cfg.Preemption = PreemptLeastLost
	}
	return &Engine{cfg: cfg, name: name}
}

// Policy returns the engine's policy.
func (e *Engine) Policy() Policy { return e.name }

// Cycle decides what to do now. It:
//  1. copies the free capacity into a running view it alone changes,
//  2. applies health (internal/health): suspect nodes, spares, remediation
//     of running jobs on failed devices, replacement ranks placed first,
//  3. orders the pending jobs: with queues, DRF across leaf queues (the one
//     furthest below its fair share first) and priority with aging inside
//     one; without, the Orderer; jobs whose queue refuses them wait,
//  4. places each job (corral: the whole gang or nothing; baselines: pod by
//     pod), against the running view so nothing is booked twice, within its
//     queue's limits, around reservations for blocked head jobs (backfill),
//  5. makes room for a job that only waits for capacity by shrinking elastic
//     jobs, then preempting, reclaiming or (opt-in) consolidating running
//     jobs (corral only),
//  6. explains every job left waiting and reports the queues.
func (e *Engine) Cycle(s *Snapshot) Plan {
	view := s.State.Clone()
	var scorer placement.Scorer
	devices := placement.FirstFree
	switch e.cfg.Policy {
	case Spread:
		scorer = placement.LeastAllocated()
	case Binpack:
		scorer = placement.MostAllocated()
	default:
		devices = placement.Interconnect
		if len(s.Mix) > 0 {
			scorer = placement.NewFragScorer(view, s.Mix, &e.frag)
		} else {
			scorer = placement.MostAllocated()
		}
	}
	// Health (internal/health, engine/health.go): suspect nodes leave the
	// view or score last, spares are held back, running jobs on failed
	// devices or nodes are remediated, and replacement ranks are placed
	// inside their gang's domain before any other job.
	scorer = e.healthScorer(s, view, scorer)
	placer := placement.NewPlacer(view, scorer, devices)
	var plan Plan
	// Health step (issue 7), first: failed capacity is out and the ranks
	// that replace failed ones are placed before anyone else.
	hc := e.healthStep(s, view, placer, &plan)
	s = withoutEvicted(s, plan.Evictions)
	// Backfill step (issue 6), before anything is placed: jobs past their
	// max runtime leave, and the pools held for job classes are resolved.
	bf := newBackfiller(e.cfg.Backfill, e.cfg.Policy, s, view)
	bf.enforceMaxRuntime(&plan)
	// The backfiller keeps its own account of the jobs it stopped.
	s = withoutEvicted(s, plan.Evictions)
	bf.resolvePools(&plan)
	failed := map[string]Reason{}
	// Queues (issue 5): resolve every job's leaf queue, usage, demand and
	// fair shares; nil without queues. Jobs their queue refuses wait here.
	qs := e.newQueueState(s, view)
	static := e.cfg.Orderer.Order(s)
	var order jobOrder = &fixedOrder{idx: static}
	if qs != nil {
		order = qs
		plan.Pending = append(plan.Pending, qs.refusedPending(s)...)
		plan.Stats.JobsConsidered += len(qs.refused)
		admitted := static[:0:0]
		for _, i := range static {
			if _, no := qs.refused[i]; !no {
				admitted = append(admitted, i)
			}
		}
		static = admitted
	}
	// Preemption (issue 5): nil when nothing may be evicted.
	room := e.newRoomMaker(s, view, placer, scorer, devices, qs, &plan.Stats)
	// Backfill step: preemption and backfill never evict one job twice;
	// elastic growth stays within queue limits.
	bf.attach(room, qs)
	// Backfill step (issue 6): the oldest job waiting past the starvation age
	// gets a reservation before anything is placed, so that no job, whatever
	// its priority or queue, takes its room unless it ends first.
	bf.reserveStarved(static, &plan)
	// Health step: spares released for a job that could never fit beside
	// them are held again, from what it left, before the next job.
	var spareReleased []health.SpareKey
	for i, more := order.next(); more; i, more = order.next() {
		if spareReleased != nil {
			hc.holds.Rehold(view, spareReleased)
			spareReleased = nil
		}
		pj := s.Pending[i]
		if hc.handled[pj.Job.ID] {
			continue
		}
		plan.Stats.JobsConsidered++
		leaf := qs.leafOfJob(i)
		pods, reason, ok := resolvePods(view, pj)
		if !ok {
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: reason})
			continue
		}
		if !e.cfg.Policy.gangs() {
			n := len(plan.Binds)
			e.podByPod(placer, pj, pods, &plan)
			qs.boundBinds(leaf, view, plan.Binds[n:])
			continue
		}
		// Backfill step: under strict FIFO nobody passes a blocked head.
		if r, blocked := bf.fifoBlocked(); blocked {
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: r})
			continue
		}
		gang, reason, ok := gangOf(view, pj.Job, pods)
		if !ok {
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: reason})
			continue
		}
		if pj.Waiting != nil {
			// Part of the gang is bound: if the whole gang could never fit,
			// say so (the driver rolls the bound part back) rather than
			// place the rest.
			if all, _, ok := resolvePods(view, PendingJob{Job: pj.Job}); ok {
				whole := gang
				whole.Pods = all
				if f := placement.CheckNeverFits(view, whole); f != nil {
					plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: Reason{Verdict: f.Verdict,
						Level: f.Level, Message: f.Message, Best: f.Best, BestFits: f.BestFits, Pods: len(all)}})
					continue
				}
			}
		}
		// Queue limit, before placing (issue 5): what the job asks for would
		// take its queue past a limit.
		if why := qs.limitBefore(leaf, view, pj); why != "" {
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: quotaReason(why, len(gang.Pods))})
			continue
		}
		// Backfill step: hold the reserved nodes this job cannot leave in
		// time and the pools it may not use.
		key := shapeKey(gang) + room.shapeSuffix(pj.Job, leaf) + "#" + bf.admit(pj.Job)
		if r, seen := failed[key]; seen {
			// Capacity only shrinks within a cycle: an identical gang fails too.
			plan.Stats.ShapeCacheHits++
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: r})
			continue
		}
		if hc.holds != nil && hc.holds.Crowds(view, max(0, view.LevelIndex(pj.Job.Topology.Required)), int(pj.Job.GPUs())) {
			spareReleased = hc.holds.ReleaseAll(view)
		}
		res := placer.PlaceGang(gang)
		if res.Failure != nil && pj.Waiting == nil && pj.Job.GangMin() < len(pods) {
			// Not all of an elastic job fits: start its minimum now.
			minGang := gang
			minGang.Pods = pods[:pj.Job.GangMin()]
			if r2 := placer.PlaceGang(minGang); r2.Failure == nil {
				res = r2
			}
		}
		// MIG: no free instance serves the job; plan re-partitions of idle
		// MIG GPUs for it (devices.go).
		if res.Failure != nil && view.HasMIG() && planMIG(placer, pj.Job.ID, gang, s.Mix, &plan) {
			continue
		}
		if res.Failure != nil && res.Failure.Verdict == placement.WaitFree {
			// Backfill step, before any preemption: take back pods elastic
			// jobs hold above their minimum, then pools backfilled by others.
			if r2, ok := bf.shrinkFor(placer, pj.Job, gang, &plan); ok {
				res = r2
			} else if r2, ok := bf.reclaimPool(placer, pj.Job, gang, &plan); ok {
				res = r2
			}
		}
		var evictions []Eviction
		if res.Failure != nil {
			// Preemption, reclaim, consolidation (issue 5): on success the
			// job is placed on the view with the victims' capacity.
			r2, evs, why := room.makeRoom(pj, leaf, gang, res.Failure)
			if len(r2.Assignments) > 0 {
				res, evictions = r2, evs
			} else if why != "" {
				res.Failure.Message += "; " + why
			}
		}
		if res.Failure != nil {
			r := Reason{Verdict: res.Failure.Verdict, Level: res.Failure.Level, Message: res.Failure.Message,
				Best: res.Failure.Best, BestFits: res.Failure.BestFits, Pods: len(gang.Pods)}
			failed[key] = r
			// Backfill step: a blocked head job gets a reservation (corral)
			// or stops everyone behind it (fifo).
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: bf.blocked(pj.Job, gang, r, &plan)})
			continue
		}
		// Queue limit, once the GPU models are known (issue 5). A placement
		// that evicted victims stands: the limit was checked before, on what
		// the job asks for; only a pod accepting several models can differ.
		if why := qs.limitAfter(leaf, view, res.Assignments); why != "" && len(evictions) == 0 {
			placer.Undo()
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: quotaReason(why, len(gang.Pods))})
			continue
		}
		qs.bound(leaf, view, res.Assignments)
		plan.Evictions = append(plan.Evictions, evictions...)
		placer.Commit()
		gb := bindOf(view, pj.Job.ID, res)
		plan.Binds = append(plan.Binds, gb)
		plan.Stats.JobsPlaced++
		plan.Stats.PodsPlaced += len(res.Assignments)
		bf.placed(pj.Job, gb, &plan)
	}
	if hc.holds != nil {
		hc.holds.Rehold(view, spareReleased)
		plan.Stats.SpareGPUsHeld = hc.holds.HeldGPUs()
	}
	// Queue status (issue 5): every queue's standing after the cycle.
	if qs != nil {
		plan.Queues = qs.statuses(s, view, plan.Pending)
	}
	// Backfill step: elastic jobs grow into capacity nobody waits for; then
	// every hold is lifted.
	bf.grow(placer, &plan)
	bf.finish()
	// Preemption (issue 5): when a deferred preemption should be looked at.
	if room != nil {
		plan.Retry = room.retry
	}
	return plan
}

// withoutEvicted is the snapshot with the pods this plan already evicts
// taken out of its running jobs, so that no later step (max runtime,
// preemption, reclaim, shrinking) picks them again: evicting a pod twice in
// one plan would fail the second time in every driver.
func withoutEvicted(s *Snapshot, evs []Eviction) *Snapshot {
	if len(evs) == 0 {
		return s
	}
	gone := map[workload.PodRef]bool{}
	for _, ev := range evs {
		for _, p := range ev.Pods {
			gone[p] = true
		}
	}
	out := *s
	out.Running = make([]RunningJob, 0, len(s.Running))
	for _, rj := range s.Running {
		kept := rj
		kept.Pods = nil
		for _, p := range rj.Pods {
			if !gone[p.Pod] {
				kept.Pods = append(kept.Pods, p)
			}
		}
		if len(kept.Pods) > 0 {
			out.Running = append(out.Running, kept)
		}
	}
	return &out
}

// podByPod is the baselines' path: each waiting pod on its own, no gang.
func (e *Engine) podByPod(placer *placement.Placer, pj PendingJob, pods []placement.PodReq, plan *Plan) {
	var res placement.Result
	for i := range pods {
		a, ok := placer.PlacePod(&pods[i], 0)
		if ok {
			res.Assignments = append(res.Assignments, a)
		}
	}
	placer.Commit()
	if len(res.Assignments) > 0 {
		plan.Binds = append(plan.Binds, bindOf(placer.State(), pj.Job.ID, res))
		plan.Stats.JobsPlaced++
		plan.Stats.PodsPlaced += len(res.Assignments)
	}
	if len(res.Assignments) < len(pods) {
		plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: Reason{
			Verdict: placement.WaitFree, Level: cluster.LevelHost,
			Message: fmt.Sprintf("%d of %d pods found no node", len(pods)-len(res.Assignments), len(pods)),
		}})
	}
}

// resolvePods lists the job's waiting pods against the cluster, largest
// first so that the hardest pods claim their space before the easy ones.
func resolvePods(s *cluster.State, pj PendingJob) ([]placement.PodReq, Reason, bool) {
	if err := pj.Job.Validate(); err != nil {
		return nil, never("", "invalid job: "+err.Error()), false
	}
	waiting := map[workload.PodRef]bool{}
	for _, r := range pj.Waiting {
		waiting[r] = true
	}
	var pods []placement.PodReq
	var unknown []string
	var problem string
	pj.Job.EachPod(func(ref workload.PodRef, r workload.Request) {
		if pj.Waiting != nil && !waiting[ref] {
			return
		}
		pr, unk := placement.Resolve(s, ref, r)
		if pr.Mask == 0 && r.NeedsGPU() {
			unknown = append(unknown, unk...)
		}
		if problem == "" {
			problem = deviceProblem(s, &pr, len(unk) > 0)
		}
		pods = append(pods, pr)
	})
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, never(cluster.LevelCluster, fmt.Sprintf("no GPU of model %s in the cluster (models: %s)",
			strings.Join(dedupe(unknown), "|"), strings.Join(s.Models(), ", "))), false
	}
	if problem != "" {
		return nil, never(cluster.LevelCluster, problem), false
	}
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].GPUMilliTotal() > pods[j].GPUMilliTotal() })
	return pods, Reason{}, true
}

// gangOf resolves the job's topology constraint.
func gangOf(s *cluster.State, j *workload.Job, pods []placement.PodReq) (placement.Gang, Reason, bool) {
	g := placement.Gang{Pods: pods, Required: -1, Preferred: -1}
	if j.Topology.Required != "" {
		g.Required = s.LevelIndex(j.Topology.Required)
		if g.Required < 0 {
			return g, never(j.Topology.Required, fmt.Sprintf("unknown topology level %q (levels: %s)",
				j.Topology.Required, strings.Join(s.Levels(), ", "))), false
		}
	}
	if j.Topology.Preferred != "" {
		g.Preferred = s.LevelIndex(j.Topology.Preferred)
		if g.Preferred < 0 {
			return g, never(j.Topology.Preferred, fmt.Sprintf("unknown topology level %q (levels: %s)",
				j.Topology.Preferred, strings.Join(s.Levels(), ", "))), false
		}
	}
	return g, Reason{}, true
}

func never(level, msg string) Reason {
	return Reason{Verdict: placement.NeverFits, Level: level, Message: msg}
}

func dedupe(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// shapeKey identifies gangs that are interchangeable for placement.
func shapeKey(g placement.Gang) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d", g.Required, g.Preferred)
	for _, p := range g.Pods {
		fmt.Fprintf(&b, "|%d,%d,%d,%d,%d,%s,%x,%d", p.CPUMilli, p.MemMiB, p.GPUs, p.GPUMilli, p.GPUMemMiB, p.MIGProfile,
			uint64(p.Mask), p.Scope)
		if p.Devices != nil {
			// Equal shapes over different eligible devices are not interchangeable.
			fmt.Fprintf(&b, ",devices=%q/%t", p.Devices.Key, p.Devices.All)
		}
		if p.Nodes != nil {
			// Nor are equal shapes over different eligible nodes.
			fmt.Fprintf(&b, ",nodes=%q", p.Nodes.Key)
		}
		for _, a := range p.Apart {
			fmt.Fprintf(&b, ",apart=%q/%q", a.Key, a.Term)
		}
		if len(p.NodeLabels) > 0 {
			keys := make([]string, 0, len(p.NodeLabels))
			for k, v := range p.NodeLabels {
				keys = append(keys, k+"="+v)
			}
			sort.Strings(keys)
			fmt.Fprintf(&b, ",%s", strings.Join(keys, ","))
		}
	}
	return b.String()
}

// bindOf turns placements into the plan's bind decision.
func bindOf(s *cluster.State, job workload.JobID, res placement.Result) GangBind {
	gb := GangBind{Job: job}
	if len(res.Assignments) > 0 && res.Failure == nil && res.Level > 0 {
		gb.Level, gb.Domain = s.Levels()[res.Level], s.Domain(res.Domain).Name
	} else {
		gb.Level, gb.Domain = cluster.LevelCluster, cluster.LevelCluster
	}
	for _, a := range res.Assignments {
		node := s.Node(a.Node)
		pb := PodBind{Pod: a.Pod, Node: node.Name, NodeIndex: a.Node, Alloc: a.Alloc}
		devs := make([]int, len(a.Alloc.Devices))
		for i, d := range a.Alloc.Devices {
			pb.Devices = append(pb.Devices, node.Devices[d.Device].ID)
			devs[i] = d.Device
		}
		pb.NICs = placement.NICs(node, devs)
		gb.Pods = append(gb.Pods, pb)
	}
	return gb
}
