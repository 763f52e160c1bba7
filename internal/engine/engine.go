package engine

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/preempt"
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

// variant is what a policy turns on. New decides it once from the Policy,
// so the cycle's steps ask for a capability instead of comparing names.
type variant struct {
	// gangs: whole gangs with corral's search (corral, fifo, greedy); the
	// others place pod by pod.
	gangs bool
	// health: suspects avoided, spares held, ranks replaced in their domain
	// (corral); the others restart every hit job anywhere, as Kubernetes does.
	health bool
	// backfill is what a blocked job does: EASY (corral: reservations,
	// starvation, pools, shrink, pool reclaim, growth), StrictFIFO (a
	// blocked job stops every job behind it) or Greedy (nothing).
	backfill backfill.Mode
	// preempt is how victims are chosen; preempts is false when the
	// policy never evicts (the pod-by-pod baselines, or PreemptOff).
	preempt  preempt.Config
	preempts bool
	// scorer ranks nodes: spread and binpack score like kube-scheduler's
	// two strategies; the gang policies score fragmentation against the mix
	// and pick GPUs by interconnect.
	scorer scorerKind
}

type scorerKind uint8

const (
	scoreFragmentation scorerKind = iota
	scoreLeastAllocated
	scoreMostAllocated
)

func variantOf(p Policy) variant {
	switch p {
	case Corral:
		return variant{gangs: true, health: true, backfill: backfill.EASY}
	case FIFO:
		return variant{gangs: true, backfill: backfill.StrictFIFO}
	case Greedy:
		return variant{gangs: true}
	case Spread:
		return variant{scorer: scoreLeastAllocated}
	}
	return variant{scorer: scoreMostAllocated}
}

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
	// ReclaimMaxLost and ReclaimGrace: reclaim leaves alone a borrower
	// that would lose more progress than ReclaimMaxLost (time since its
	// last checkpoint plus restart overhead) until the job reclaiming has
	// waited ReclaimGrace (least-lost only; preempt.SparedFromReclaim).
	// Zero means DefaultReclaimMaxLost and DefaultReclaimGrace; a negative
	// ReclaimMaxLost spares nobody.
	ReclaimMaxLost time.Duration
	ReclaimGrace   time.Duration
	// MaxLostPerWork bounds what a priority preemption may throw away: at
	// most this many times the work the preemptor is expected to do, its
	// GPUs × expected runtime (preempt.WorthEvicting). Zero means
	// DefaultMaxLostPerWork; a negative value sets no bound, as before the
	// bound existed, so that only the wait the eviction saves decides.
	MaxLostPerWork float64
	// Backfill tunes reservations and runtime limits.
	Backfill BackfillConfig
}

// Engine runs cycles. Besides configuration it keeps only a memo of a pure
// function (node fragmentation per mix), so a cycle's Plan depends on its
// Snapshot alone. An Engine is used by one goroutine at a time.
type Engine struct {
	cfg   Config
	v     variant
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
	v := variantOf(cfg.Policy)
	v.preempts = v.gangs && cfg.Preemption != PreemptOff
	v.preempt = preempt.Config{Strategy: preempt.LeastLost, Budget: cfg.PreemptBudget,
		Consolidate: cfg.Consolidate, CheckpointWait: cfg.CheckpointWait,
		ReclaimMaxLost: cfg.ReclaimMaxLost, ReclaimGrace: cfg.ReclaimGrace, MaxLostPerWork: cfg.MaxLostPerWork}
	if cfg.Preemption == PreemptNewest {
		v.preempt.Strategy = preempt.LowestPriorityNewest
	}
	return &Engine{cfg: cfg, v: v, name: name}
}

// Policy returns the engine's policy.
func (e *Engine) Policy() Policy { return e.name }

// podByPod is the baselines' path: each waiting pod on its own, no gang.
func (l *ledger) podByPod(pj PendingJob, pods []placement.PodReq) {
	var res placement.Result
	for i := range pods {
		a, ok := l.placer.PlacePod(&pods[i], 0)
		if ok {
			res.Assignments = append(res.Assignments, a)
		}
	}
	l.placer.Commit()
	plan := &l.plan
	if len(res.Assignments) > 0 {
		l.Bind(pj.Job, res)
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
		// A level the cluster lacks leaves -1: a preference, not a
		// constraint, so the job is placed without it (Plan.Warnings).
		g.Preferred = s.LevelIndex(j.Topology.Preferred)
	}
	if j.Topology.Exclusive != "" && len(pods) == j.Pods() {
		// A partly bound gang's parts already have their domains (its
		// waiting pods are pinned there by their own node selectors).
		lv := s.LevelIndex(j.Topology.Exclusive)
		if lv <= 0 {
			return g, never(j.Topology.Exclusive, fmt.Sprintf("unknown exclusive topology level %q (levels: %s)",
				j.Topology.Exclusive, strings.Join(s.Levels(), ", "))), false
		}
		g.Exclusive, g.PartOf = lv, partsOfPods(j, pods)
	}
	return g, Reason{}, true
}

// partsOfPods numbers each pod's exclusive part: pod sets of one Group
// share a part, a pod set without one is a part alone.
func partsOfPods(j *workload.Job, pods []placement.PodReq) []int {
	byGroup := map[string]int{}
	out := make([]int, len(pods))
	for i, pr := range pods {
		ps := j.PodSets[pr.Ref.PodSet]
		if ps.Group == "" {
			out[i] = -1 - pr.Ref.PodSet
			continue
		}
		k, ok := byGroup[ps.Group]
		if !ok {
			k = len(byGroup)
			byGroup[ps.Group] = k
		}
		out[i] = k
	}
	return out
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
	if g.Exclusive > 0 {
		fmt.Fprintf(&b, "/x%d%v", g.Exclusive, g.PartOf)
	}
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
		pb := PodBind{Placed: cluster.Placed{Pod: a.Pod, NodeIndex: a.Node, Alloc: a.Alloc}, Node: node.Name}
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
