package engine

import (
	"time"

	"github.com/corral-dev/corral/internal/preempt"
	"github.com/corral-dev/corral/internal/workload"
)

// Preemption names how the engine picks victims.
type Preemption string

const (
	// PreemptLeastLost (the default for corral) evicts the set of jobs that
	// throws away the least work (GPU-seconds since their last checkpoint
	// plus restart overhead), and may consolidate scattered GPUs.
	PreemptLeastLost Preemption = "least-lost"
	// PreemptNewest evicts the lowest-priority, newest jobs first, as peer
	// schedulers do; no consolidation. A baseline for reports.
	PreemptNewest Preemption = "newest"
	// PreemptOff never evicts.
	PreemptOff Preemption = "off"
)

const (
	// DefaultPreemptBudget is the placements a cycle may try while
	// searching for victims (Config.PreemptBudget).
	DefaultPreemptBudget = preempt.DefaultBudget
	// DefaultCheckpointWait bounds how long a preemption may wait for its
	// victims' next checkpoint (Config.CheckpointWait).
	DefaultCheckpointWait = preempt.DefaultCheckpointWait
)

// newRoom sets up the cycle's preemption (internal/preempt) on the
// ledger, nil when nothing may be evicted.
func (c *run) newRoom() *preempt.Room {
	if !c.e.v.preempts {
		return nil
	}
	var qs preempt.Queues
	if c.qs != nil {
		qs = c.qs
	}
	return preempt.NewRoom(c.e.v.preempt, c.l, c.scorer, c.devices, qs)
}

// RestartCost is preempt.RestartCost, for drivers that report the work an
// eviction throws away (drivers do not import the policy packages).
func RestartCost(rj RunningJob, pods []workload.PodRef, now time.Time) float64 {
	return preempt.RestartCost(rj, pods, now)
}
