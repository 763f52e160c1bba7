package preempt

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Config is how a cycle's preemption behaves, chosen once per engine.
type Config struct {
	// Strategy picks victims: LeastLost (corral), or LowestPriorityNewest
	// (the peers' baseline, which never waits for checkpoints and never
	// consolidates).
	Strategy Strategy
	// Budget caps the placements one cycle tries while searching for
	// victims (DefaultBudget when zero).
	Budget int
	// Consolidate turns consolidation moves on.
	Consolidate bool
	// CheckpointWait bounds how long a preemption may wait for its
	// victims' next checkpoint (DeferToCheckpoint).
	CheckpointWait time.Duration
	// ReclaimMaxLost and ReclaimGrace bound the progress reclaim throws
	// away (SparedFromReclaim): zero means DefaultReclaimMaxLost and
	// DefaultReclaimGrace; a negative ReclaimMaxLost spares nobody.
	ReclaimMaxLost time.Duration
	ReclaimGrace   time.Duration
	// MaxLostPerWork bounds what a priority preemption may throw away, as
	// a multiple of the work the preemptor is expected to do
	// (WorthEvicting): zero means DefaultMaxLostPerWork; a negative value
	// sets no bound, so that only the wait the eviction saves decides.
	MaxLostPerWork float64
}

// DefaultBudget is the placements a cycle may try while searching for
// victims, across all its waiting jobs; a single job gets at most
// perJobBudget of them.
const (
	DefaultBudget = 500
	perJobBudget  = 100
	// consolidationTries caps the gangs a cycle tries to consolidate for:
	// estimating the wait walks every running job of every domain.
	consolidationTries = 16
)

// Ledger is what preemption needs of the cycle's ledger (internal/engine).
type Ledger interface {
	Snapshot() *cycle.Snapshot
	// View is the running view, to read; Placer places on it.
	View() *cluster.State
	Placer() *placement.Placer
	// Running lists the jobs that ran before the cycle and no decision of
	// it evicted, in id order; Evicted says a decision since took pods
	// from job id.
	Running() []cycle.RunningJob
	Evicted(id workload.JobID) bool
	// Vacate frees victims' capacity for the preemptor; the cycle records
	// their evictions once the preemptor is bound. Restore takes it back.
	Vacate(pods []cluster.Placed)
	Restore(pods []cluster.Placed)
	Stats() *cycle.CycleStats
	// Gang resolves a job's pods into its gang (for a consolidation move
	// placed again elsewhere); ok is false for an invalid job.
	Gang(pj cycle.PendingJob) (g placement.Gang, key string, ok bool)
}

// Queues is what preemption asks of the cycle's queues (queue.State):
// each side's standing for the rules, and the charge of what it moves.
type Queues interface {
	Usage(leaf string) cycle.Amounts
	Guarantee(leaf string) cycle.Amounts
	Fair(leaf string) cycle.Amounts
	Reclaims(leaf string) bool
	// StrictReclaim: the leaf's reclaim may leave a borrower's queue below
	// its own guarantee (reclaimPolicy Strict on it or an ancestor).
	StrictReclaim(leaf string) bool
	// RunningLeaf is a running job's leaf queue; ok is false when its
	// queue is refused (it is charged nowhere).
	RunningLeaf(id workload.JobID) (string, bool)
	// Charge adds (+1) or takes back (-1) amounts from a leaf and the
	// queues above it.
	Charge(leaf string, c cycle.Amounts, sign int64)
	// Demand is what a pending job's waiting pods would charge its queue;
	// Held what pods hold, charged to their GPU model.
	Demand(view *cluster.State, pj cycle.PendingJob) cycle.Amounts
	Held(view *cluster.State, pods []cluster.Placed) cycle.Amounts
}

// Room makes room for jobs that did not fit, one cycle long. It keeps
// the running jobs in id order and forgets the ones it evicted.
type Room struct {
	cfg     Config
	l       Ledger
	s       *cycle.Snapshot
	view    *cluster.State
	placer  *placement.Placer
	scorer  placement.Scorer
	devices placement.DeviceOrder
	qs      Queues
	// running are the jobs that may lose pods, as the cycle's earlier
	// steps left them; the ledger says which a later decision evicted.
	running []cycle.RunningJob
	budget  int
	stats   *cycle.CycleStats
	// minPrio is the lowest priority among running jobs that may be
	// evicted at all: a job at or below it can only reclaim, and most
	// waiting jobs are turned away here in O(1).
	minPrio      int32
	consolidates int
	// evictable marks the running jobs neither protected nor empty;
	// unitsOf caches each one's units (costs do not change within a cycle).
	evictable []bool
	unitsOf   map[int][]Unit
	// byJob indexes running by job id, built at the cycle's first worth
	// check (worthEvicting).
	byJob map[workload.JobID]int
	// retry is when a deferred preemption should be looked at again.
	retry time.Time
	// Reserved, set by the engine from backfill, says whether node n is
	// held for a reservation the job being placed may not use: evicting a
	// job there would only hand the reservation's room to the preemptor.
	Reserved func(n int) bool
	// StartedStarved, set by the engine from backfill, says a running job
	// started only after waiting past the starvation age: priority
	// preemption leaves it alone.
	StartedStarved func(cycle.RunningJob) bool
	// Remaining, set by the engine from backfill's estimates, is how long
	// a running job is expected to run on; ok is false when nothing
	// predicts it. Priority preemption must be worth its cost
	// (WorthEvicting).
	Remaining func(cycle.RunningJob) (left time.Duration, ok bool)
	// RoomFrees, set by the engine from backfill's replay of expected
	// ends, is how long until job j's gang g would fit with no eviction
	// (with queues, only in room held for it: a reservation); ok is false
	// when nothing predicts it. An eviction buys no more than that wait
	// (WorthEvicting).
	RoomFrees func(j *workload.Job, g placement.Gang) (wait time.Duration, ok bool)
}

// NewRoom sets up one cycle's preemption on the ledger l, placing as scorer
// and devices say; qs is nil without queues. It returns nil when nothing
// may be evicted this cycle.
func NewRoom(cfg Config, l Ledger, scorer placement.Scorer, devices placement.DeviceOrder, qs Queues) *Room {
	running := l.Running()
	if len(running) == 0 {
		return nil
	}
	s := l.Snapshot()
	budget := cfg.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	if cfg.ReclaimMaxLost == 0 {
		cfg.ReclaimMaxLost = DefaultReclaimMaxLost
	}
	if cfg.ReclaimGrace == 0 {
		cfg.ReclaimGrace = DefaultReclaimGrace
	}
	if cfg.MaxLostPerWork == 0 {
		cfg.MaxLostPerWork = DefaultMaxLostPerWork
	}
	m := &Room{cfg: cfg, l: l, s: s, view: l.View(), placer: l.Placer(), scorer: scorer, devices: devices, qs: qs,
		running: running, budget: budget, stats: l.Stats(), minPrio: math.MaxInt32,
		evictable: make([]bool, len(running)), unitsOf: map[int][]Unit{}}
	for i, rj := range running {
		if len(rj.Pods) > 0 && Protected(rj.Job, RunFor(rj, s.Now)) == "" {
			m.evictable[i] = true
			m.minPrio = min(m.minPrio, rj.Job.Priority)
		}
	}
	if m.minPrio == math.MaxInt32 {
		return nil // nothing may be evicted this cycle
	}
	return m
}

// ShapeSuffix keeps the engine's failed-shape cache honest: with
// preemption, two gangs of one shape may differ in what they may evict.
func (m *Room) ShapeSuffix(j *workload.Job, leaf string) string {
	if m == nil {
		return ""
	}
	return fmt.Sprintf("|%s|%d", leaf, j.Priority)
}

// MakeRoom tries, for a job that waits only for capacity, preemption (or
// reclaim) and then consolidation. On success the job is placed on the
// view (not committed) with its victims vacated, and their evictions are
// returned for the ledger to record; otherwise the view is as before and
// why says what the search found.
func (m *Room) MakeRoom(pj cycle.PendingJob, leaf string, gang placement.Gang, f *placement.Failure) (placement.Result, []cycle.Eviction, string) {
	if m == nil || pj.Waiting != nil || f == nil || f.Verdict != placement.WaitFree || m.budget <= 0 {
		return placement.Result{}, nil, ""
	}
	var charge cycle.Amounts // only queues look at what the job charges
	if m.qs != nil {
		charge = m.qs.Demand(m.view, pj)
	}
	res, evs, why := m.preempt(pj, leaf, gang, charge)
	if res.Failure == nil && len(res.Assignments) > 0 {
		return res, evs, ""
	}
	if m.cfg.Strategy == LowestPriorityNewest || !m.cfg.Consolidate {
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
func (m *Room) standing(j *workload.Job, leaf string) Standing {
	st := Standing{Queue: leaf, Priority: j.Priority}
	if m.qs != nil && leaf != "" {
		st.Usage = m.qs.Usage(leaf)
		st.Guarantee = m.qs.Guarantee(leaf)
		st.Fair = m.qs.Fair(leaf)
		st.Reclaim = m.qs.Reclaims(leaf)
		st.Strict = m.qs.StrictReclaim(leaf)
	}
	return st
}

// units turns a running job into evictable units: the whole job, or for an
// elastic job running above its minimum, its extra pods and then the rest.
func (m *Room) units(i int, out []Unit, kind []Kind, k Kind) ([]Unit, []Kind) {
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
func (m *Room) unitsOfJob(rj cycle.RunningJob) []Unit {
	pods := append([]cycle.PodBind(nil), rj.Pods...)
	sort.Slice(pods, func(a, b int) bool {
		if pods[a].Pod.PodSet != pods[b].Pod.PodSet {
			return pods[a].Pod.PodSet < pods[b].Pod.PodSet
		}
		return pods[a].Pod.Index < pods[b].Pod.Index
	})
	conv := func(ps []cycle.PodBind) []cluster.Placed {
		out := make([]cluster.Placed, len(ps))
		for i, p := range ps {
			out[i] = p.Placed
		}
		return out
	}
	refs := func(ps []cycle.PodBind) []workload.PodRef {
		out := make([]workload.PodRef, len(ps))
		for i, p := range ps {
			out[i] = p.Pod
		}
		return out
	}
	lost := RestartCost(rj, nil, m.s.Now)
	price := lost
	if m.cfg.Strategy == LeastLost {
		price = min(price, AwaitedCost(rj, m.s.Now, m.cfg.CheckpointWait))
	}
	base := Unit{Job: rj.Job.ID, Priority: rj.Job.Priority, Start: rj.Start, Needs: -1}
	if gm := rj.Job.GangMin(); gm < len(pods) && gm > 0 {
		extra, keep := pods[gm:], pods[:gm]
		u, v := base, base
		u.Pods, u.Cost = conv(extra), RestartCost(rj, refs(extra), m.s.Now)
		u.Lost = u.Cost
		v.Pods, v.Cost, v.Lost, v.Needs = conv(keep), max(0, price-u.Cost), max(0, lost-u.Lost), 0
		return []Unit{u, v}
	}
	u := base
	u.Pods, u.Cost, u.Lost = conv(pods), price, lost
	return []Unit{u}
}

// preempt evicts by priority inside the queue and reclaims across queues.
func (m *Room) preempt(pj cycle.PendingJob, leaf string, gang placement.Gang, charge cycle.Amounts) (placement.Result, []cycle.Eviction, string) {
	me := m.standing(pj.Job, leaf)
	if pj.Job.Priority <= m.minPrio && !me.Reclaim {
		return placement.Result{}, nil, "" // no lower priority to preempt, no right to reclaim
	}
	m.budget-- // a scan of the running jobs costs like a placement tried
	var units []Unit
	var kinds []Kind
	// The rules look at a victim's queue and priority only: one answer per
	// pair serves every running job that shares it.
	type side struct {
		leaf string
		prio int32
	}
	kindOf := map[side]Kind{}
	spared := 0 // borrowers reclaim leaves alone for now (SparedFromReclaim)
	var left leftAlone
	waited := m.s.Now.Sub(pj.Job.Submit)
	for i, rj := range m.running {
		if m.l.Evicted(rj.Job.ID) {
			continue
		}
		if !m.evictable[i] {
			if len(rj.Pods) > 0 {
				left.protected++
			}
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
			k = Eligible(me, charge, m.standing(rj.Job, vleaf))
			kindOf[key] = k
		}
		switch {
		case k == NotAllowed:
			left.rules++
			continue
		case k == ByPriority && m.StartedStarved != nil && m.StartedStarved(rj):
			left.starved++
			continue
		case k == ByPriority && m.onReserved(rj):
			left.reserved++
			continue
		case k == ByFairShare && m.cfg.Strategy == LeastLost && SparedFromFairShare(rj, m.s.Now):
			left.fairShare++
			continue
		}
		if k.Reclaims() && m.cfg.Strategy == LeastLost &&
			SparedFromReclaim(LostProgress(rj, m.s.Now), waited, m.cfg.ReclaimMaxLost, m.cfg.ReclaimGrace) {
			spared++
			continue
		}
		units, kinds = m.units(i, units, kinds, k)
	}
	if len(units) == 0 {
		why := ""
		if l := left.String(); l != "" {
			why = "preemption: no running job may be evicted for it" + l
		}
		return placement.Result{}, nil, m.sparedReason(pj, spared, why)
	}
	strategy := m.cfg.Strategy
	r := m.search(Problem{Gang: gang, Units: units, Strategy: strategy,
		Allowed: m.reclaimKeeps(me, charge, units, kinds, false)})
	if !r.Found && me.Strict && r.Refused > 0 {
		// A borrower holding part of its own queue's guarantee in one gang
		// (a whole-cluster job that started on an idle cluster) is no set
		// Keeps allows; a Strict queue takes it anyway, as Kueue does. When
		// Keeps refused no set, the relaxed search would repeat this one.
		if r2 := m.search(Problem{Gang: gang, Units: units, Strategy: strategy,
			Allowed: m.reclaimKeeps(me, charge, units, kinds, true)}); r2.Found {
			r = r2
		}
	}
	if !r.Found {
		why := "preemption: " + r.Why + left.String()
		if r.Refused > 0 && me.Reclaim && !me.Strict && slices.Contains(kinds, ByReclaim) {
			why += " (reclaimPolicy Strict would take a borrower below its own queue's guarantee)"
		}
		return placement.Result{}, nil, m.sparedReason(pj, spared, why)
	}
	if strategy == LeastLost {
		if ok, why := m.worthEvicting(pj, gang, units, kinds, r.Victims); !ok {
			return placement.Result{}, nil, why
		}
		if why := m.deferToCheckpoint(units, r.Victims); why != "" {
			return placement.Result{}, nil, why
		}
	}
	return m.apply(pj, leaf, gang, units, r, func(u int) cycle.EvictionCause {
		if kinds[u].Reclaims() {
			return cycle.CauseReclaim
		}
		return cycle.CausePreempt
	})
}

// leftAlone counts the running jobs a preemption left out of its search, by
// why: when even all the others would not make room, the reason says
// which rule stands in the way (a whole-cluster job waits for every one).
type leftAlone struct {
	protected int // not preemptible, or inside their minimum runtime
	rules     int // the preemption rules allow none: priority, queue
	starved   int // started only after starving (priority preemption)
	reserved  int // on nodes reserved for another job (priority preemption)
	fairShare int // fair-share reclaim spares those without a checkpoint
}

func (l leftAlone) String() string {
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(l.rules, "of priority at least its own or of queues it may not take from")
	add(l.protected, "not preemptible or inside their minimum runtime")
	add(l.starved, "started only after waiting past the starvation age")
	add(l.reserved, "on nodes reserved for other jobs")
	add(l.fairShare, "without a reported checkpoint, spared by fair-share reclaim")
	if len(parts) == 0 {
		return ""
	}
	return " (left alone: " + strings.Join(parts, ", ") + ")"
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
func (m *Room) onReserved(rj cycle.RunningJob) bool {
	if m.Reserved == nil {
		return false
	}
	for _, p := range rj.Pods {
		if m.Reserved(p.NodeIndex) {
			return true
		}
	}
	return false
}

// Retry is when a deferred preemption should be looked at again (zero:
// none was deferred).
func (m *Room) Retry() time.Time {
	if m == nil {
		return time.Time{}
	}
	return m.retry
}

// sparedReason adds to why (the search's reason, "" when there was no
// candidate) that spared borrowers were left out of reclaim, and books a
// cycle for when the grace ends and they no longer are.
func (m *Room) sparedReason(pj cycle.PendingJob, spared int, why string) string {
	if spared == 0 {
		return why
	}
	until := pj.Job.Submit.Add(m.cfg.ReclaimGrace)
	if m.retry.IsZero() || until.Before(m.retry) {
		m.retry = until
	}
	s := fmt.Sprintf("reclaim spares %d borrower(s) that would each lose more than %s of progress since a checkpoint, until %s",
		spared, hoursText(m.cfg.ReclaimMaxLost), until.UTC().Format(time.RFC3339))
	if why == "" {
		return "preemption: " + s
	}
	return why + "; " + s
}

func hoursText(d time.Duration) string {
	if d < time.Hour {
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%g hours", math.Round(d.Hours()*10)/10)
}
