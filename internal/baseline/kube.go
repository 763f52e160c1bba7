package baseline

import (
	"fmt"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Kube is kube-scheduler v1.36.3 with its default profile.
//
// Without Gang (`kube`) every pod is scheduled on its own, in PrioritySort
// order (priority, then creation): each feasible node is scored by
// kubeScorer and the best one wins; GPUs are the lowest-numbered free ones,
// as the device plugin hands them out. A pod that fits nowhere runs
// DefaultPreemption (pkg/scheduler/framework/plugins/defaultpreemption and
// framework/preemption): on each node, every pod of lower priority is
// removed, and if the pod then fits, the removed pods are reprieved one by
// one from the most important (higher priority, then older) while it still
// fits; among the nodes that work, the one whose victims have the lowest
// highest priority wins, then the lowest sum of priorities, the fewest
// victims, the latest start of the highest-priority victims, the first node.
// Victims are single pods: the job they belong to breaks (the simulator
// restarts it, as a torchrun job fails when a rank dies). Nothing keeps a
// job's pods together: a job can start part of its pods and hold them; the
// simulator fails such a job after its rendezvous timeout.
//
// With Gang (`kube-gang`) a job's pods are placed all or nothing by the same
// scoring (the GangScheduling plugin's Permit barrier, framework/plugins/
// gangscheduling), and preemption works on whole jobs as the PodGroup
// evaluator does (framework/preemption/podgrouppreemption.go): remove every
// lower-priority job, check that the gang fits, reprieve victims from the
// most important (higher priority, then more pods, then older). No topology.
//
// Simplifications: every feasible node is scored (kube-scheduler stops at
// 100 feasible nodes on clusters of this size, percentageOfNodesToScore);
// the preemptor binds in the same cycle instead of waiting on its nominated
// node for the victims' graceful termination; no PodDisruptionBudgets.
type Kube struct {
	Gang bool
}

// Cycle implements Scheduler.
func (k *Kube) Cycle(s *engine.Snapshot) engine.Plan {
	view := s.State.Clone()
	placer := placement.NewPlacer(view, kubeScorer{}, placement.FirstFree)
	run := newRunning(s)
	var plan engine.Plan
	remediate(s, view, run, &plan)
	pe := map[workload.JobID][]workload.PodRef{} // pod-level evictions, by job
	var peOrder []workload.JobID
	for _, i := range byPriority(s) {
		pj := s.Pending[i]
		plan.Stats.JobsConsidered++
		pods, reason, ok := waitingPods(view, pj, -1)
		if !ok {
			plan.Pending = append(plan.Pending, engine.Pending{Job: pj.Job.ID, Reason: reason})
			continue
		}
		if k.Gang {
			k.gang(view, placer, run, pj, pods, &plan)
			continue
		}
		var placed []placement.Assignment
		for p := range pods {
			a, ok := placer.PlacePod(&pods[p], 0)
			if !ok {
				var victims []podOf
				a, victims, ok = preemptPod(view, placer, run, &pods[p], pj.Job.Priority)
				for _, v := range victims {
					if _, seen := pe[v.job.id]; !seen {
						peOrder = append(peOrder, v.job.id)
					}
					pe[v.job.id] = append(pe[v.job.id], v.job.pods[v.pod].Pod)
				}
			}
			if ok {
				placer.Commit()
				placed = append(placed, a)
			}
		}
		if len(placed) > 0 {
			plan.Binds = append(plan.Binds, bindOf(view, pj.Job.ID, placed))
			plan.Stats.JobsPlaced++
			plan.Stats.PodsPlaced += len(placed)
		}
		if len(placed) < len(pods) {
			plan.Pending = append(plan.Pending, engine.Pending{Job: pj.Job.ID, Reason: waitFree(cluster.LevelHost,
				fmt.Sprintf("%d of %d pods fit no node, even by preempting lower-priority pods", len(pods)-len(placed), len(pods)),
				len(pods))})
		}
	}
	for _, id := range peOrder {
		plan.Evictions = append(plan.Evictions, engine.Eviction{Job: id, Pods: pe[id], Cause: engine.CausePreempt,
			Message: fmt.Sprintf("%d pods preempted by higher-priority pods", len(pe[id]))})
		plan.Stats.CountEviction(engine.CausePreempt)
	}
	return plan
}

// gang places all of a job's waiting pods or none, preempting whole
// lower-priority jobs if that makes the gang fit.
func (k *Kube) gang(view *cluster.State, placer *placement.Placer, run *running, pj engine.PendingJob,
	pods []placement.PodReq, plan *engine.Plan) {
	placed, ok := placeAll(placer, pods)
	var victims []*runJob
	if !ok {
		victims, placed, ok = preemptGang(view, placer, run, pods, pj.Job.Priority)
	}
	if !ok {
		plan.Pending = append(plan.Pending, engine.Pending{Job: pj.Job.ID, Reason: waitFree(cluster.LevelCluster,
			fmt.Sprintf("the %d pods do not all fit, even by preempting lower-priority jobs", len(pods)), len(pods))})
		return
	}
	placer.Commit()
	for _, v := range victims {
		ev := evictWhole(v, pj.Job.ID, "preempted by a higher-priority gang")
		plan.Evictions = append(plan.Evictions, ev)
		plan.Stats.CountEviction(ev.Cause)
	}
	plan.Binds = append(plan.Binds, bindOf(view, pj.Job.ID, placed))
	plan.Stats.JobsPlaced++
	plan.Stats.PodsPlaced += len(placed)
}

// placeAll places every pod by the placer's scorer, or none (undoing what it
// placed since the last commit).
func placeAll(placer *placement.Placer, pods []placement.PodReq) ([]placement.Assignment, bool) {
	out := make([]placement.Assignment, 0, len(pods))
	for i := range pods {
		a, ok := placer.PlacePod(&pods[i], 0)
		if !ok {
			placer.Undo()
			return nil, false
		}
		out = append(out, a)
	}
	return out, true
}

// preemptGang is the PodGroup evaluator: remove every lower-priority job; if
// the gang then fits, reprieve victims from the most important down while it
// still fits. On success the gang is placed (uncommitted) and the victims'
// capacity stays released in the view.
func preemptGang(view *cluster.State, placer *placement.Placer, run *running, pods []placement.PodReq,
	prio int32) ([]*runJob, []placement.Assignment, bool) {
	cands := run.lowerThan(prio)
	if len(cands) == 0 {
		return nil, nil, false
	}
	for _, c := range cands {
		release(view, c)
	}
	if _, ok := placeAll(placer, pods); !ok {
		for _, c := range cands {
			hold(view, c)
		}
		return nil, nil, false
	}
	placer.Undo()
	sort.SliceStable(cands, func(a, b int) bool { return moreImportantJob(cands[a], cands[b]) })
	var victims []*runJob
	for _, c := range cands {
		hold(view, c)
		if _, ok := placeAll(placer, pods); ok {
			placer.Undo()
			continue
		}
		release(view, c)
		victims = append(victims, c)
	}
	placed, ok := placeAll(placer, pods)
	if !ok {
		// Cannot happen: the victims' capacity is what made it fit.
		for _, v := range victims {
			hold(view, v)
		}
		return nil, nil, false
	}
	for _, v := range victims {
		v.gone = true
	}
	return victims, placed, true
}

// moreImportantJob is moreImportantVictim for whole pod groups: higher
// priority, then more pods, then the earlier start, then the id.
func moreImportantJob(a, b *runJob) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if len(a.pods) != len(b.pods) {
		return len(a.pods) > len(b.pods)
	}
	if !a.start.Equal(b.start) {
		return a.start.Before(b.start)
	}
	return a.id < b.id
}

// preemptPod is DefaultPreemption for one pod. On success the pod is placed
// (uncommitted) and the victims' capacity is released in the view.
func preemptPod(view *cluster.State, placer *placement.Placer, run *running, r *placement.PodReq,
	prio int32) (placement.Assignment, []podOf, bool) {
	type cand struct {
		node    int
		victims []podOf
		highest int32
		sum     int64
		latest  time.Time // earliest start among the highest-priority victims
	}
	var best *cand
	host := view.HostLevel()
	for n := 0; n < view.NumNodes(); n++ {
		var lower []podOf
		for _, p := range run.onNode[n] {
			if !p.job.gone && p.job.priority < prio && !p.gonePod() {
				lower = append(lower, p)
			}
		}
		if len(lower) == 0 || !view.Schedulable(n) {
			continue
		}
		dom := view.NodeDomain(n, host)
		for _, p := range lower {
			view.Release(n, p.alloc())
		}
		if _, ok := placer.PlacePod(r, dom); !ok {
			for _, p := range lower {
				_ = view.Allocate(n, p.alloc())
			}
			continue
		}
		placer.Undo()
		sort.SliceStable(lower, func(a, b int) bool { return moreImportantPod(lower[a], lower[b]) })
		c := cand{node: n, highest: -1 << 31}
		for _, p := range lower {
			_ = view.Allocate(n, p.alloc())
			if _, ok := placer.PlacePod(r, dom); ok {
				placer.Undo()
				continue
			}
			view.Release(n, p.alloc())
			c.victims = append(c.victims, p)
		}
		for _, p := range c.victims {
			_ = view.Allocate(n, p.alloc())
			// MaxInt32+1 shift as upstream, so that negative priorities add up.
			c.sum += int64(p.job.priority) + 1<<31
			if p.job.priority > c.highest {
				c.highest, c.latest = p.job.priority, p.job.start
			} else if p.job.priority == c.highest && p.job.start.Before(c.latest) {
				c.latest = p.job.start
			}
		}
		if best == nil || betterNode(c.highest, best.highest, c.sum, best.sum, len(c.victims), len(best.victims), c.latest, best.latest) {
			cc := c
			best = &cc
		}
	}
	if best == nil {
		return placement.Assignment{}, nil, false
	}
	for _, p := range best.victims {
		view.Release(best.node, p.alloc())
		p.job.gonePods()[p.pod] = true
	}
	a, ok := placer.PlacePod(r, view.NodeDomain(best.node, host))
	if !ok {
		return placement.Assignment{}, nil, false
	}
	return a, best.victims, true
}

// betterNode is pickOneNodeForPreemption's order without PDBs.
func betterNode(hi, bestHi int32, sum, bestSum int64, n, bestN int, latest, bestLatest time.Time) bool {
	if hi != bestHi {
		return hi < bestHi
	}
	if sum != bestSum {
		return sum < bestSum
	}
	if n != bestN {
		return n < bestN
	}
	return latest.After(bestLatest)
}

// moreImportantPod: higher priority, then the earlier start.
func moreImportantPod(a, b podOf) bool {
	if a.job.priority != b.job.priority {
		return a.job.priority > b.job.priority
	}
	if !a.job.start.Equal(b.job.start) {
		return a.job.start.Before(b.job.start)
	}
	if a.job.id != b.job.id {
		return a.job.id < b.job.id
	}
	return a.pod < b.pod
}

func (p podOf) alloc() cluster.Alloc { return p.job.pods[p.pod].Alloc }

// gonePod reports whether this pod was evicted earlier in the cycle.
func (p podOf) gonePod() bool { return p.job.evicted != nil && p.job.evicted[p.pod] }

// gonePods is the job's set of pods evicted this cycle.
func (j *runJob) gonePods() map[int]bool {
	if j.evicted == nil {
		j.evicted = map[int]bool{}
	}
	return j.evicted
}
