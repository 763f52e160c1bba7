package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// deviceProblem says why a MIG or memory-share request could never be served
// by this cluster, or returns "". unknownModel is set when the request names
// models the cluster lacks (reported separately).
func deviceProblem(s *cluster.State, pr *placement.PodReq, unknownModel bool) string {
	r := pr.Request
	switch {
	case r.MIG():
		if pr.Mask != 0 {
			return ""
		}
		mask := s.MIGMask()
		if mask == 0 {
			return fmt.Sprintf("asks for MIG profile %s, but no GPU in the cluster runs MIG", r.MIGProfile)
		}
		where := "no MIG GPU in the cluster"
		if len(r.Models) > 0 {
			var accepted cluster.ModelMask
			for i, name := range s.Models() {
				if base, ok := cluster.MIGBaseModel(name); ok && slices.Contains(r.Models, base) {
					accepted |= 1 << uint(i)
				}
			}
			if accepted&mask != 0 {
				mask &= accepted
			}
			where = fmt.Sprintf("no MIG GPU of model %s", strings.Join(r.Models, "|"))
		}
		return fmt.Sprintf("%s offers MIG profile %s (profiles offered: %s)", where, r.MIGProfile,
			strings.Join(s.MIGProfiles(mask), ", "))
	case r.ByMemory():
		if pr.Mask == 0 || unknownModel || pr.MemMilli > 0 {
			return ""
		}
		largest := placement.LargestGPUMemory(s, pr.Mask)
		if largest == 0 {
			return fmt.Sprintf("asks %s of one GPU, but no accepted GPU states its memory", workload.MemText(r.GPUMemMiB))
		}
		return fmt.Sprintf("asks %s of one GPU; the largest accepted GPU has %s, and a share never spans GPUs",
			workload.MemText(r.GPUMemMiB), workload.MemText(largest))
	}
	return ""
}

// planMIG tries to serve a MIG gang that no free instance serves by
// re-partitioning idle MIG GPUs. When it does, the planned re-partitions go
// into the plan, the gang's instances stay reserved in the running view,
// and the job waits with a reason naming the GPUs; if every instance
// already existed (nothing to wait for) the gang is bound.
func (l *ledger) planMIG(j *workload.Job, gang placement.Gang) bool {
	res, planned, waits, ok := l.placer.PlanMIG(gang, l.s.Mix)
	if !ok {
		return false
	}
	l.placer.Commit()
	s, plan, job := l.view, &l.plan, j.ID
	if !waits {
		l.Bind(j, res)
		plan.Stats.JobsPlaced++
		plan.Stats.PodsPlaced += len(res.Assignments)
		return true
	}
	for _, rp := range planned {
		node := s.Node(rp.Node)
		plan.Repartitions = append(plan.Repartitions, Repartition{
			Node: node.Name, NodeIndex: rp.Node, Device: node.Devices[rp.Device].ID, DeviceIndex: rp.Device,
			Layout: rp.Layout, Old: rp.Old,
			Reason: fmt.Sprintf("no free MIG instance serves job %s", job),
		})
	}
	// Name every GPU the gang waits for, planned now or earlier.
	var gpus []string
	seen := map[string]bool{}
	for _, a := range res.Assignments {
		for _, d := range a.Alloc.Devices {
			if !s.MIGPending(a.Node, d.Device) {
				continue
			}
			node := s.Node(a.Node)
			g := node.Name + "/" + node.Devices[d.Device].ID
			if !seen[g] {
				seen[g] = true
				gpus = append(gpus, g)
			}
		}
	}
	plan.Pending = append(plan.Pending, Pending{Job: job, Reason: Reason{
		Verdict: placement.WaitFree, Level: cluster.LevelHost, Pods: len(gang.Pods),
		Message: "waiting for MIG re-partition of " + strings.Join(gpus, ", "),
	}})
	return true
}
