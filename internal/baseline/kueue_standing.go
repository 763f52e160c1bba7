package baseline

import (
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

// queueStanding is every queue's standing after a kueue-tas cycle, measured
// as corral's engine measures its own (queue.State's Statuses): what each
// ClusterQueue's running workloads hold once this cycle's evictions and
// admissions are applied, against the fair share corral's water-filling
// gives the same tree and demand. Kueue has no fair share of its own here
// (fair sharing is not modelled, see KueueTAS), so the yardstick is the
// same for every scheduler and Jain's index compares them (issue 17).
// Nil without queues.
func queueStanding(s *engine.Snapshot, view *cluster.State, plan *engine.Plan) []engine.QueueStatus {
	if len(s.Queues) == 0 {
		return nil
	}
	tree, problems := queue.Build(s.Queues)
	// Demand counts the evicted jobs too: they wait again (as the engine's
	// standing counts its victims).
	qs := queue.NewState(tree, problems, s, s.Running, view, 0)
	pods := map[workload.PodRef]cluster.Placed{}
	for _, rj := range s.Running {
		for _, p := range rj.Pods {
			pods[p.Pod] = p.Placed
		}
	}
	for _, ev := range plan.Evictions {
		var gone []cluster.Placed
		for _, ref := range ev.Pods {
			if p, ok := pods[ref]; ok {
				gone = append(gone, p)
			}
		}
		qs.Unbound(ev.Job, view, gone)
	}
	byID := make(map[workload.JobID]*workload.Job, len(s.Pending))
	for _, pj := range s.Pending {
		byID[pj.Job.ID] = pj.Job
	}
	for i, b := range plan.Binds {
		j, ok := byID[b.Job]
		if !ok {
			continue
		}
		if leaf, err := qs.Leaf(j); err == nil {
			qs.BoundBinds(leaf, view, plan.Binds[i:i+1])
		}
	}
	return qs.Statuses(s, view, plan.Pending)
}
