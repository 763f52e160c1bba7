// Package baseline models the schedulers a user would run instead of corral,
// so that the simulator can compare corral with them on the same input:
//
//   - kube: kube-scheduler 1.36 with its default profile, pod by pod
//     (NodeResourcesFit LeastAllocated plus BalancedAllocation) and
//     DefaultPreemption by priority, one pod at a time; it knows no gangs.
//   - kube-gang: the same scoring with all-or-nothing placement per job and
//     priority preemption of whole jobs (the upstream PodGroup gang
//     scheduling and workload-aware preemption); no topology.
//   - kueue-tas: Kueue's admission with topology-aware scheduling: jobs in
//     priority then submit order, skipped when they do not fit
//     (BestEffortFIFO), a whole gang into one domain of its required level
//     chosen best fit, preemption of the lowest priority then newest jobs;
//     no reservations, no fragmentation scoring.
//
// Each takes the same engine.Snapshot and returns the same engine.Plan as
// engine.Engine.Cycle, built only on internal/cluster and internal/placement:
// a baseline models another system, it is not a setting of corral's engine.
// Sources, read in the Go module cache, are cited on each type and in
// docs/simulator.md.
package baseline

import (
	"fmt"
	"sort"
	"strings"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Names of the baselines, as `corral sim --policies` takes them.
const (
	KubeName     = "kube"
	KubeGangName = "kube-gang"
	KueueTASName = "kueue-tas"
)

// Names lists the baselines in report order.
var Names = []string{KubeName, KubeGangName, KueueTASName}

// Scheduler is one scheduling cycle: a Snapshot in, a Plan out. The engine
// satisfies it too.
type Scheduler interface {
	Cycle(s *engine.Snapshot) engine.Plan
}

var (
	_ Scheduler = (*Kube)(nil)
	_ Scheduler = (*KueueTAS)(nil)
	_ Scheduler = (*engine.Engine)(nil)
)

// New returns the baseline called name, or false if there is none.
func New(name string) (Scheduler, bool) {
	switch name {
	case KubeName:
		return &Kube{}, true
	case KubeGangName:
		return &Kube{Gang: true}, true
	case KueueTASName:
		return &KueueTAS{}, true
	}
	return nil, false
}

// byPriority orders pending jobs as kube-scheduler's PrioritySort and
// Kueue's BestEffortFIFO queue do: higher priority first, then the older
// submission, then the id (the engine's PriorityFIFO order).
func byPriority(s *engine.Snapshot) []int { return engine.PriorityFIFO{}.Order(s) }

// waitingPods resolves the job's waiting pods against the cluster in pod
// order. A job no node could ever hold (an unknown GPU model, a pod larger
// than every node, a gang larger than every domain of its required level) is
// reported NeverFits, as the engine reports it, so that every policy rejects
// the same jobs.
func waitingPods(s *cluster.State, pj engine.PendingJob, required int) ([]placement.PodReq, engine.Reason, bool) {
	if err := pj.Job.Validate(); err != nil {
		return nil, never("", "invalid job: "+err.Error()), false
	}
	waiting := map[workload.PodRef]bool{}
	for _, r := range pj.Waiting {
		waiting[r] = true
	}
	var pods, all []placement.PodReq
	var unknown []string
	pj.Job.EachPod(func(ref workload.PodRef, r workload.Request) {
		pr, unk := placement.Resolve(s, ref, r)
		if pr.Mask == 0 && r.NeedsGPU() {
			unknown = append(unknown, unk...)
		}
		all = append(all, pr)
		if pj.Waiting == nil || waiting[ref] {
			pods = append(pods, pr)
		}
	})
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, never(cluster.LevelCluster, fmt.Sprintf("no GPU of model %s in the cluster (models: %s)",
			strings.Join(unknown, "|"), strings.Join(s.Models(), ", "))), false
	}
	if f := placement.CheckNeverFits(s, placement.Gang{Pods: all, Required: required, Preferred: -1}); f != nil {
		return nil, engine.Reason{Verdict: f.Verdict, Level: f.Level, Message: f.Message, Pods: len(all)}, false
	}
	return pods, engine.Reason{}, true
}

func never(level, msg string) engine.Reason {
	return engine.Reason{Verdict: placement.NeverFits, Level: level, Message: msg}
}

func waitFree(level, msg string, pods int) engine.Reason {
	return engine.Reason{Verdict: placement.WaitFree, Level: level, Message: msg, Pods: pods}
}

// bindOf turns assignments into the plan's bind decision, naming the
// lowest domain that holds them all.
func bindOf(s *cluster.State, job workload.JobID, as []placement.Assignment) engine.GangBind {
	gb := engine.GangBind{Job: job, Level: cluster.LevelCluster, Domain: cluster.LevelCluster}
	if len(as) > 0 {
		for lv := s.HostLevel(); lv > 0; lv-- {
			d := s.NodeDomain(as[0].Node, lv)
			same := true
			for _, a := range as[1:] {
				if s.NodeDomain(a.Node, lv) != d {
					same = false
					break
				}
			}
			if same {
				gb.Level, gb.Domain = s.Levels()[lv], s.Domain(d).Name
				break
			}
		}
	}
	for _, a := range as {
		node := s.Node(a.Node)
		pb := engine.PodBind{Placed: cluster.Placed{Pod: a.Pod, NodeIndex: a.Node, Alloc: a.Alloc}, Node: node.Name}
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
