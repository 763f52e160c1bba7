package engine

import (
	"time"

	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/placement"
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
	// DefaultReclaimMaxLost and DefaultReclaimGrace bound the progress a
	// reclaim throws away (Config.ReclaimMaxLost, Config.ReclaimGrace).
	DefaultReclaimMaxLost = preempt.DefaultReclaimMaxLost
	DefaultReclaimGrace   = preempt.DefaultReclaimGrace
	// DefaultMaxLostPerWork bounds what a priority preemption throws away,
	// as a multiple of the preemptor's expected work (Config.MaxLostPerWork).
	DefaultMaxLostPerWork = preempt.DefaultMaxLostPerWork
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
	m := preempt.NewRoom(c.e.v.preempt, c.l, c.scorer, c.devices, qs)
	if m != nil {
		m.RoomFrees = c.roomFrees
	}
	return m
}

// roomFrees is how long job j (gang g) would wait for room if nothing
// were evicted: backfill's replay of the running jobs' expected ends on
// the running view (nodes held for others offer nothing), as a
// reservation would be found. With queues it counts only room backfill
// holds for the job (backfill.HeldRoom): each queue gets one reservation
// a cycle and the cycle's order interleaves the queues by fair share, so
// room nobody holds went to other jobs first (docs/preemption.md).
// Priority preemption buys at most that wait (preempt.WorthEvicting).
func (c *run) roomFrees(j *workload.Job, g placement.Gang) (time.Duration, bool) {
	if c.qs != nil {
		return c.bf.HeldRoom(j, g)
	}
	c.l.RetakeHolds()
	slot, ok := backfill.Earliest(c.l.view, c.l.Holders(), g, c.s.Now, c.s.Runtimes, c.bf.Closed)
	if !ok {
		return 0, false
	}
	return max(0, slot.Start.Sub(c.s.Now)), true
}

// RestartCost is preempt.RestartCost, for drivers that report the work an
// eviction throws away (drivers do not import the policy packages).
func RestartCost(rj RunningJob, pods []workload.PodRef, now time.Time) float64 {
	return preempt.RestartCost(rj, pods, now)
}
