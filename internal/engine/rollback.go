package engine

import (
	"fmt"
	"time"

	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// CutOffGrace is how long a gang may run below its minimum, the rest of it
// unplaced, before the cycle rolls it back. A gang gets there when its
// binding stopped part-way (the API server went away, a conflict, the
// Lease): the engine had found room for the whole gang, so the rest
// normally lands in the next cycles; waiting longer would hold the bound
// GPUs idle for a job that cannot start.
const CutOffGrace = 10 * time.Second

// rollBack evicts, whole, each gang that runs below its minimum while the
// rest of it found no room this cycle: at once when the rest can never fit
// (the cluster shrank), else once the gang has been so for CutOffGrace
// (measured from RunningJob.Start, the last binding of its pods, which a
// restarted driver reads back). The gang then waits whole, like any
// pending job. Replacement ranks of a remediated job (PendingJob.Within)
// are health's to wait for or escalate, and policies without gangs place
// pod by pod: neither is rolled back.
func (c *run) rollBack() {
	if !c.e.v.gangs {
		return
	}
	why := make(map[workload.JobID]Reason, len(c.l.plan.Pending))
	for _, p := range c.l.plan.Pending {
		why[p.Job] = p.Reason
	}
	for _, pj := range c.s.Pending {
		r, waiting := why[pj.Job.ID]
		if !waiting || pj.Waiting == nil || pj.Within.Domain != "" || r.Verdict == placement.Refused {
			continue
		}
		lj := c.l.byID[pj.Job.ID]
		if lj == nil || lj.evicted || len(lj.placed) > 0 || len(lj.run.Pods) == 0 {
			continue
		}
		bound, min := len(lj.run.Pods), pj.Job.GangMin()
		if bound >= min {
			continue
		}
		never := r.Verdict == placement.NeverFits
		below := c.s.Now.Sub(lj.run.Start)
		if !never && below < CutOffGrace {
			continue
		}
		pods := make([]workload.PodRef, len(lj.run.Pods))
		for i, pb := range lj.run.Pods {
			pods[i] = pb.Pod
		}
		msg := fmt.Sprintf("%d of its pods run, below its minimum %d, and the rest can never fit (%s): rolled back so that it starts again whole",
			bound, min, r.Message)
		if !never {
			msg = fmt.Sprintf("%d of its pods run, below its minimum %d, and the rest found no room for %s (%s): rolled back so that it starts again whole",
				bound, min, below.Round(time.Second), r.Message)
		}
		c.l.Evict(Eviction{Job: pj.Job.ID, Pods: pods, Cause: CauseRollback, Message: msg,
			LostGPUSeconds: RestartCost(lj.run, pods, c.s.Now)})
	}
}
