package engine

import "github.com/corral-dev/corral/internal/cycle"

// The cycle's contract (what a Snapshot holds, what a Plan decides) is
// defined in internal/cycle, below every policy package, so that queue,
// backfill, preempt and health can name it without importing the engine.
// The drivers keep reading it through these names.
type (
	Snapshot    = cycle.Snapshot
	PendingJob  = cycle.PendingJob
	Pin         = cycle.Pin
	RunningJob  = cycle.RunningJob
	PodBind     = cycle.PodBind
	Plan        = cycle.Plan
	GangBind    = cycle.GangBind
	Pending     = cycle.Pending
	Reason      = cycle.Reason
	Eviction    = cycle.Eviction
	Reservation = cycle.Reservation
	Repartition = cycle.Repartition
	Remediation = cycle.Remediation
	Warning     = cycle.Warning
	// TerminatingPod is a pod evicted for a job, not gone yet.
	TerminatingPod = cycle.TerminatingPod
	QueueStatus    = cycle.QueueStatus
	CycleStats     = cycle.CycleStats
	// LaterMembers are gang members not created yet; HeldRoom their room.
	LaterMembers = cycle.LaterMembers
	HeldRoom     = cycle.HeldRoom
	// EvictionCause says why pods are taken away from a running job.
	EvictionCause = cycle.EvictionCause
)

// Eviction causes, as cycle defines them.
const (
	CausePreempt     = cycle.CausePreempt
	CauseReclaim     = cycle.CauseReclaim
	CauseConsolidate = cycle.CauseConsolidate
	CauseShrink      = cycle.CauseShrink
	CauseFailure     = cycle.CauseFailure
	CauseMaxRuntime  = cycle.CauseMaxRuntime
	CauseRollback    = cycle.CauseRollback
)
