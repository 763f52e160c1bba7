package baseline

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

// KueueTAS is Kueue v0.17.0 admitting jobs with topology-aware scheduling
// (TAS), configured as its documentation recommends for training: one
// ClusterQueue over the whole cluster with queueingStrategy BestEffortFIFO
// and preemption withinClusterQueue: LowerPriority.
//
//   - Order: pending workloads by priority, then creation
//     (pkg/cache/queue: BestEffortFIFO); a workload that does not fit is
//     skipped and the next is tried, so nothing waits behind it and nothing
//     is reserved for it.
//   - Placement (pkg/cache/scheduler/tas_flavor_snapshot.go, the default
//     BestFit profile): the count of the job's pods each node can hold is
//     summed per domain. For a required level, the domains of that level are
//     sorted by that count (descending, then name) and the first with the
//     lowest count that still holds every pod is taken
//     (findBestFitDomainBy); none means the job waits. For a preferred level
//     the search climbs one level at a time until one domain holds the job;
//     a job with no topology request may span nodes. Inside the chosen
//     domain, children are taken largest first with the last one chosen best
//     fit (updateCountsToMinimumGeneric), down to a pod count per node;
//     kube-scheduler then binds the pods to those nodes.
//   - Preemption (pkg/scheduler/preemption): candidates are the running
//     jobs of lower priority, the lowest priority first, then the most
//     recently admitted; they are removed one by one until the job fits,
//     then added back from the last-but-one while it still fits
//     (minimalPreemptions' fill-back). Whole workloads are evicted.
//
// With --queues, each queue is a ClusterQueue in a tree of Cohorts
// (kueueQuota says how the tree maps): a job is admitted only when its
// ClusterQueue's available quota (nominal, plus what it may borrow from its
// Cohorts) holds what it asks for; jobs within nominal quota go before jobs
// that would borrow; preemption takes lower-priority jobs of the same
// ClusterQueue (withinClusterQueue: LowerPriority) and, for a queue under
// its nominal quota that may reclaim, jobs of ClusterQueues that are
// borrowing (reclaimWithinCohort: Any; the job must then fit within its
// nominal quota), until both the quota and the topology fit
// (kueueQuota.attempts). Without queues, one
// ClusterQueue's nominal quota is the whole cluster.
//
// Not modelled: lending limits, fair sharing, BorrowWithinCohort, TAS's
// pod-set slices and leader pod sets, and the scheduler's one admission per
// ClusterQueue per cycle (here every pending job is tried at each cycle).
type KueueTAS struct{}

// Cycle implements Scheduler.
func (*KueueTAS) Cycle(s *engine.Snapshot) engine.Plan {
	view := s.State.Clone()
	placer := placement.NewPlacer(view, kubeScorer{}, placement.FirstFree)
	probe := placement.NewPlacer(view, kubeScorer{}, placement.FirstFree)
	run := newRunning(s)
	var plan engine.Plan
	remediate(s, view, run, &plan)
	quota := newKueueQuota(s, run)
	failed := map[string]engine.Reason{}
	for _, i := range quota.orderKueue(s, byPriority(s)) {
		pj := s.Pending[i]
		plan.Stats.JobsConsidered++
		cq, demand := -1, cycle.Amounts(nil)
		if quota != nil {
			leaf, err := quota.leaf(pj.Job.Queue, pj.Job.Namespace)
			if err != nil {
				plan.Pending = append(plan.Pending, engine.Pending{Job: pj.Job.ID, Reason: inadmissible(err)})
				continue
			}
			cq, demand = quota.index[leaf], quota.quotaOf(queue.DemandOf(view, pj))
		}
		t, reason, ok := topologyOf(view, pj.Job)
		if !ok {
			plan.Pending = append(plan.Pending, engine.Pending{Job: pj.Job.ID, Reason: reason})
			continue
		}
		pods, reason, ok := waitingPods(view, pj, t.required)
		if !ok {
			plan.Pending = append(plan.Pending, engine.Pending{Job: pj.Job.ID, Reason: reason})
			continue
		}
		key := fmt.Sprintf("%d/%s", cq, shape(t, pods, pj.Job.Priority))
		if r, seen := failed[key]; seen {
			// Capacity only shrinks within a cycle: the same shape fails again.
			plan.Stats.ShapeCacheHits++
			plan.Pending = append(plan.Pending, engine.Pending{Job: pj.Job.ID, Reason: r})
			continue
		}
		var placed []placement.Assignment
		why := ""
		if quota != nil {
			why = quota.shortfall(cq, demand)
		}
		if why == "" {
			placed, why = t.place(view, placer, probe, pods)
		}
		var victims []*runJob
		if placed == nil {
			acct := tasAccount{view: view, quota: quota}
			attempts := []preemptAttempt{{cands: run.lowerThan(pj.Job.Priority), borrow: true}}
			var rank func(*runJob) int
			if quota != nil {
				attempts, rank = quota.attempts(run, cq, pj.Job.Priority, demand), quota.otherQueueFirst(cq)
			}
			for _, at := range attempts {
				fits := func() bool {
					if quota != nil && (quota.shortfall(cq, demand) != "" || !at.borrow && quota.borrows(cq, demand)) {
						return false
					}
					return t.fits(view, probe, pods)
				}
				vs := preemptTAS(acct, at.cands, fits, rank)
				if vs == nil {
					continue
				}
				if placed, _ = t.place(view, placer, probe, pods); placed != nil {
					victims = vs
					break
				}
				for _, v := range vs {
					acct.hold(v)
				}
			}
		}
		if placed == nil {
			r := waitFree(t.levelName(view), why, len(pods))
			if quota != nil && strings.HasPrefix(why, "ClusterQueue ") {
				r = quotaReason(why, len(pods))
				r.AboveLimit = quota.aboveCapacity(cq, demand) != ""
			}
			failed[key] = r
			plan.Pending = append(plan.Pending, engine.Pending{Job: pj.Job.ID, Reason: r})
			continue
		}
		placer.Commit()
		if quota != nil {
			quota.admitted(string(pj.Job.ID), cq, queue.ChargeOfAssignments(view, placed))
		}
		for _, v := range victims {
			v.gone = true
			ev := evictWhole(v, pj.Job.ID, "preempted by a higher-priority workload")
			plan.Evictions = append(plan.Evictions, ev)
			plan.Stats.CountEviction(ev.Cause)
		}
		plan.Binds = append(plan.Binds, bindOf(view, pj.Job.ID, placed))
		plan.Stats.JobsPlaced++
		plan.Stats.PodsPlaced += len(placed)
	}
	plan.Queues = queueStanding(s, view, &plan) // kueue_standing.go
	return plan
}

// tasRequest is a job's topology request as level indexes (-1: none).
type tasRequest struct {
	required, preferred int
}

func topologyOf(s *cluster.State, j *workload.Job) (tasRequest, engine.Reason, bool) {
	t := tasRequest{required: -1, preferred: -1}
	for _, lv := range []struct {
		name string
		to   *int
	}{{j.Topology.Required, &t.required}, {j.Topology.Preferred, &t.preferred}} {
		if lv.name == "" {
			continue
		}
		if *lv.to = s.LevelIndex(lv.name); *lv.to < 0 {
			return t, never(lv.name, fmt.Sprintf("unknown topology level %q (levels: %s)",
				lv.name, strings.Join(s.Levels(), ", "))), false
		}
	}
	return t, engine.Reason{}, true
}

func (t tasRequest) levelName(s *cluster.State) string {
	switch {
	case t.required >= 0:
		return s.Levels()[t.required]
	case t.preferred >= 0:
		return s.Levels()[t.preferred]
	}
	return cluster.LevelHost
}

func shape(t tasRequest, pods []placement.PodReq, prio int32) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d/%d", t.required, t.preferred, prio)
	for _, p := range pods {
		fmt.Fprintf(&b, "|%d,%d,%d,%d,%d,%s,%x,%d,%t,%v", p.CPUMilli, p.MemMiB, p.GPUs, p.GPUMilli, p.GPUMemMiB,
			p.MIGProfile, uint64(p.Mask), p.Scope, p.DRA, p.NodeLabels)
		if p.Devices != nil {
			fmt.Fprintf(&b, ",%q/%t", p.Devices.Key, p.Devices.All)
		}
	}
	return b.String()
}

// group is a run of identical pods: one TAS pod set.
type group struct {
	req   *placement.PodReq
	pods  []placement.PodReq
	count int
}

func groupsOf(pods []placement.PodReq) []group {
	var out []group
	for i := range pods {
		if n := len(out); n > 0 && out[n-1].req.Request.Equal(pods[i].Request) && out[n-1].req.Ref.PodSet == pods[i].Ref.PodSet {
			out[n-1].pods = append(out[n-1].pods, pods[i])
			out[n-1].count++
			continue
		}
		out = append(out, group{req: &pods[i], pods: []placement.PodReq{pods[i]}, count: 1})
	}
	return out
}

// place assigns every pod set a count per node and binds the pods there;
// nil and why when some pod set finds no domain (nothing stays placed).
func (t tasRequest) place(view *cluster.State, placer, probe *placement.Placer, pods []placement.PodReq) ([]placement.Assignment, string) {
	host := view.HostLevel()
	var out []placement.Assignment
	for _, g := range groupsOf(pods) {
		counts, why := t.assign(view, probe, g.req, g.count)
		if counts == nil {
			placer.Undo()
			return nil, why
		}
		k := 0
		for n := 0; n < len(counts); n++ {
			for c := 0; c < counts[n]; c++ {
				a, ok := placer.PlacePod(&g.pods[k], view.NodeDomain(n, host))
				if !ok {
					placer.Undo()
					return nil, "a node's count did not hold" // the counts are exact: should not happen
				}
				out = append(out, a)
				k++
			}
		}
	}
	return out, ""
}

// fits reports whether every pod set finds a domain, placing nothing.
func (t tasRequest) fits(view *cluster.State, probe *placement.Placer, pods []placement.PodReq) bool {
	for _, g := range groupsOf(pods) {
		if c, _ := t.assign(view, probe, g.req, g.count); c == nil {
			return false
		}
	}
	return true
}

// assign is findTopologyAssignment for one pod set: how many pods go on each
// node, or nil and why.
func (t tasRequest) assign(view *cluster.State, probe *placement.Placer, r *placement.PodReq, count int) ([]int, string) {
	fit := nodeFits(view, probe, r, count)
	sum := make([]int, len(fit)+1)
	for n, f := range fit {
		sum[n+1] = sum[n] + f
	}
	state := func(d cluster.DomainID) int { dom := view.Domain(d); return sum[dom.Hi] - sum[dom.Lo] }
	sorted := func(ds []cluster.DomainID) []cluster.DomainID {
		out := slices.Clone(ds)
		slices.SortStableFunc(out, func(a, b cluster.DomainID) int {
			if c := cmp.Compare(state(b), state(a)); c != 0 {
				return c
			}
			return strings.Compare(view.Domain(a).Name, view.Domain(b).Name)
		})
		return out
	}
	host := view.HostLevel()
	counts := make([]int, len(fit))
	// down spreads k pods over domain d's subtree: children largest first,
	// the last one best fit.
	var down func(d cluster.DomainID, k int)
	down = func(d cluster.DomainID, k int) {
		dom := view.Domain(d)
		if dom.Level == host {
			counts[dom.Lo] += k
			return
		}
		children := sorted(dom.Children)
		for i := 0; k > 0 && i < len(children); i++ {
			c := children[i]
			if state(c) >= k {
				c = bestFit(children[i:], k, state)
				down(c, k)
				return
			}
			down(c, state(c))
			k -= state(c)
		}
	}
	lv, unconstrained := host, true
	switch {
	case t.required >= 0:
		lv, unconstrained = t.required, false
	case t.preferred >= 0:
		lv, unconstrained = t.preferred, false
	}
	for {
		doms := sorted(view.DomainsAt(lv))
		if len(doms) > 0 && state(doms[0]) >= count {
			down(bestFit(doms, count, state), count)
			return counts, ""
		}
		if t.required >= 0 {
			best := 0
			if len(doms) > 0 {
				best = state(doms[0])
			}
			return nil, fmt.Sprintf("no %s holds the %d pods now (the best holds %d)", view.Levels()[lv], count, best)
		}
		if !unconstrained && lv > 0 {
			lv-- // a preferred level: climb until one domain holds the job
			continue
		}
		// No topology request: the pods may span the level's domains.
		k := count
		for i := 0; k > 0 && i < len(doms); i++ {
			d := doms[i]
			if state(d) >= k {
				down(bestFit(doms[i:], k, state), k)
				return counts, ""
			}
			if state(d) == 0 {
				break
			}
			down(d, state(d))
			k -= state(d)
		}
		return nil, fmt.Sprintf("the cluster holds %d of the %d pods now", count-k, count)
	}
}

// bestFit is findBestFitDomainBy: the first domain with the lowest count
// that still holds k, else the first (the largest).
func bestFit(ds []cluster.DomainID, k int, state func(cluster.DomainID) int) cluster.DomainID {
	best := ds[0]
	for _, d := range ds {
		if s := state(d); s >= k && s < state(best) {
			best = d
		}
	}
	return best
}

// nodeFits is how many copies of r each node can take now, up to limit.
func nodeFits(view *cluster.State, probe *placement.Placer, r *placement.PodReq, limit int) []int {
	out := make([]int, view.NumNodes())
	simple := !r.Fractional() && !r.ByMemory() && !r.MIG() && !r.DRA && r.Devices == nil &&
		r.Scope == workload.ScopeAny && len(r.NodeLabels) == 0
	host := view.HostLevel()
	for n := range out {
		if !view.Schedulable(n) {
			continue
		}
		if !simple {
			// The exact check, by placing copies and taking them back.
			k := 0
			for k < limit {
				if _, ok := probe.PlacePod(r, view.NodeDomain(n, host)); !ok {
					break
				}
				k++
			}
			probe.Undo()
			out[n] = k
			continue
		}
		k := limit
		if r.CPUMilli > 0 {
			k = min(k, int(view.FreeCPU(n)/r.CPUMilli))
		}
		if r.MemMiB > 0 {
			k = min(k, int(view.FreeMem(n)/r.MemMiB))
		}
		if r.GPUs > 0 {
			free := 0
			for d, f := range view.GPUFree(n) {
				if f == 1000 && r.Mask.Has(view.DeviceModel(n, d)) {
					free++
				}
			}
			k = min(k, free/r.GPUs)
		}
		out[n] = max(k, 0)
	}
	return out
}

// tasAccount moves a victim's capacity, and its quota when there are
// queues, out of the cycle's view and back.
type tasAccount struct {
	view  *cluster.State
	quota *kueueQuota
}

func (a tasAccount) release(j *runJob) {
	if a.quota != nil {
		a.quota.release(a.view, j)
		return
	}
	release(a.view, j)
}

func (a tasAccount) hold(j *runJob) {
	if a.quota != nil {
		a.quota.hold(a.view, j)
		return
	}
	hold(a.view, j)
}

// preemptTAS is Kueue's minimalPreemptions: take candidates (by rank when
// given: other ClusterQueues first; then lowest priority, then most
// recently started) until the job fits, then give back all but the last
// while it still fits. It returns the victims with their capacity (and
// quota) released, or nil (nothing changed).
func preemptTAS(acct tasAccount, cands []*runJob, fits func() bool, rank func(*runJob) int) []*runJob {
	if len(cands) == 0 {
		return nil
	}
	sort.SliceStable(cands, func(a, b int) bool {
		ca, cb := cands[a], cands[b]
		if rank != nil && rank(ca) != rank(cb) {
			return rank(ca) < rank(cb)
		}
		if ca.priority != cb.priority {
			return ca.priority < cb.priority
		}
		if !ca.start.Equal(cb.start) {
			return ca.start.After(cb.start)
		}
		return ca.id < cb.id
	})
	var targets []*runJob
	for i, c := range cands {
		acct.release(c)
		if fits() {
			targets = cands[:i+1]
			break
		}
	}
	if targets == nil {
		for _, c := range cands {
			acct.hold(c)
		}
		return nil
	}
	kept := []*runJob{targets[len(targets)-1]}
	for i := len(targets) - 2; i >= 0; i-- {
		acct.hold(targets[i])
		if fits() {
			continue // reprieved
		}
		acct.release(targets[i])
		kept = append(kept, targets[i])
	}
	return kept
}
