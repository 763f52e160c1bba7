package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/corral-dev/corral/internal/cluster"
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
)

// Policies lists every policy in report order.
var Policies = []Policy{Corral, Spread, Binpack}

// ParsePolicy checks a policy name.
func ParsePolicy(s string) (Policy, error) {
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown policy %q (known: corral, spread, binpack)", s)
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
	Orderer Orderer // nil: PriorityFIFO
}

// Engine runs cycles. Besides configuration it keeps only a memo of a pure
// function (node fragmentation per mix), so a cycle's Plan depends on its
// Snapshot alone. An Engine is used by one goroutine at a time.
type Engine struct {
	cfg  Config
	frag placement.FragMemo
}

// New returns an engine for a policy.
func New(cfg Config) *Engine {
	if cfg.Policy == "" {
		cfg.Policy = Corral
	}
	if cfg.Orderer == nil {
		cfg.Orderer = PriorityFIFO{}
	}
	return &Engine{cfg: cfg}
}

// Policy returns the engine's policy.
func (e *Engine) Policy() Policy { return e.cfg.Policy }

// Cycle decides what to do now. It:
//  1. copies the free capacity into a running view it alone changes,
//  2. applies health (internal/health): suspect nodes, spares, remediation
//     of running jobs on failed devices, replacement ranks placed first,
//  3. orders the pending jobs,
//  4. places each job (corral: the whole gang or nothing; baselines: pod by
//     pod), against the running view so nothing is booked twice,
//  5. explains every job left waiting.
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
	hc := e.healthStep(s, view, placer, &plan)
	failed := map[string]Reason{}
	for _, i := range e.cfg.Orderer.Order(s) {
		pj := s.Pending[i]
		if hc.handled[pj.Job.ID] {
			continue
		}
		plan.Stats.JobsConsidered++
		pods, reason, ok := resolvePods(view, pj)
		if !ok {
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: reason})
			continue
		}
		if e.cfg.Policy != Corral {
			e.podByPod(placer, pj, pods, &plan)
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
		key := shapeKey(gang)
		if r, seen := failed[key]; seen {
			// Capacity only shrinks within a cycle: an identical gang fails too.
			plan.Stats.ShapeCacheHits++
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: r})
			continue
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
		if res.Failure != nil {
			r := Reason{Verdict: res.Failure.Verdict, Level: res.Failure.Level, Message: res.Failure.Message,
				Best: res.Failure.Best, BestFits: res.Failure.BestFits, Pods: len(gang.Pods)}
			failed[key] = r
			plan.Pending = append(plan.Pending, Pending{Job: pj.Job.ID, Reason: r})
			continue
		}
		placer.Commit()
		plan.Binds = append(plan.Binds, bindOf(view, pj.Job.ID, res))
		plan.Stats.JobsPlaced++
		plan.Stats.PodsPlaced += len(res.Assignments)
	}
	return plan
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
	pj.Job.EachPod(func(ref workload.PodRef, r workload.Request) {
		if pj.Waiting != nil && !waiting[ref] {
			return
		}
		pr, unk := placement.Resolve(s, ref, r)
		if pr.Mask == 0 && r.GPUMilliTotal() > 0 {
			unknown = append(unknown, unk...)
		}
		pods = append(pods, pr)
	})
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, never(cluster.LevelCluster, fmt.Sprintf("no GPU of model %s in the cluster (models: %s)",
			strings.Join(dedupe(unknown), "|"), strings.Join(s.Models(), ", "))), false
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
		fmt.Fprintf(&b, "|%d,%d,%d,%d,%x,%d", p.CPUMilli, p.MemMiB, p.GPUs, p.GPUMilli, uint64(p.Mask), p.Scope)
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
