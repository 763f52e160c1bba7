package cycle

import (
	"fmt"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/mig"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// GangBind is a set of pods of one job bound in one decision: for corral a
// whole gang, for the pod-by-pod baselines whatever fitted.
type GangBind struct {
	Job  workload.JobID
	Pods []PodBind
	// Level and Domain name the single topology domain holding these pods
	// (the level is "cluster" when they span several top-level domains).
	Level  string
	Domain string
}

// Pending says why a job stays waiting.
type Pending struct {
	Job    workload.JobID
	Reason Reason
}

// Reason is a pending job's cause as data plus one readable line.
type Reason struct {
	Verdict placement.Verdict
	Level   string
	Message string
	// Best names the domain at Level that came closest; BestFits is how
	// many of the Pods waiting pods it could hold now.
	Best     string
	BestFits int
	Pods     int
	// Refusal, for a Refused verdict, names the queue's refusal
	// (UnknownQueue, InvalidQueue, NotLeaf, NamespaceDenied, NoDefault) for
	// drivers that show it as a condition reason.
	Refusal string
	// AboveLimit, for a WaitQuota verdict, says the job alone asks more
	// than its queue's (or an ancestor's) limit: it can start in that
	// queue only once the limit is raised, not when the queue's running
	// jobs end. A driver whose limits never change (the simulator) may
	// count it as never starting; Kubernetes keeps it waiting, since an
	// admin can raise the limit.
	AboveLimit bool
}

// EvictionCause says why pods are taken away from a running job.
type EvictionCause string

const (
	// CausePreempt: a higher-priority job of the same queue needs the room.
	CausePreempt EvictionCause = "Preempted"
	// CauseReclaim: another queue takes back its guarantee or fair share.
	CauseReclaim EvictionCause = "Reclaimed"
	// CauseConsolidate: the job is moved so that a whole domain frees up.
	CauseConsolidate EvictionCause = "Consolidated"
	// CauseShrink: an elastic job gives back pods above its minimum.
	CauseShrink EvictionCause = "Shrunk"
	// CauseFailure: a device or node under the job failed.
	CauseFailure EvictionCause = "DeviceFailed"
	// CauseMaxRuntime: the job ran past its declared maximum runtime.
	CauseMaxRuntime EvictionCause = "MaxRuntimeExceeded"
	// CauseRollback: a gang running below its minimum (a binding cut off
	// part-way, or the rest can never fit) is rolled back to start again
	// whole.
	CauseRollback EvictionCause = "GangRolledBack"
)

// Eviction takes pods away from a running job. Drivers carry evictions out
// before the binds of the same plan, which may use the freed capacity.
type Eviction struct {
	Job workload.JobID
	// Pods lists the evicted pods; when it holds every pod of the job the
	// whole gang goes back to pending.
	Pods  []workload.PodRef
	Cause EvictionCause
	// By is the job the room is made for, if any.
	By workload.JobID
	// Message is one readable line for events.
	Message string
	// LostGPUSeconds is the work thrown away: GPUs × time since the last
	// checkpoint, plus the restart overhead.
	LostGPUSeconds float64
	// Terminal says the job must not run again (a job stopped at its max
	// runtime under the Terminate policy): drivers end it instead of
	// returning it to pending.
	Terminal bool
}

// Reservation holds capacity for a blocked head job until it is expected to
// fit: only jobs expected to end before Start may use the reserved nodes
// meanwhile (EASY backfill). The engine recomputes reservations every cycle.
type Reservation struct {
	Job workload.JobID
	// Level and Domain name the topology domain the job is expected to
	// start in ("cluster" when it spans several top-level domains).
	Level  string
	Domain string
	// Nodes are the reserved nodes, in topology order.
	Nodes []string
	// Start is when the running jobs in the way are expected to have ended.
	Start time.Time
}

// Repartition re-partitions one idle MIG GPU into Layout, for the node's MIG
// manager to carry out. The jobs waiting for it stay pending (reason
// "waiting for MIG re-partition of <node>/<gpu>") until the node reports
// the new layout: only then do its instances exist to bind to.
type Repartition struct {
	Node        string
	NodeIndex   int
	Device      string // device id
	DeviceIndex int
	Layout      mig.Layout
	// Old is the layout the GPU has now (idle: no instance in use).
	Old mig.Layout
	// Reason is one readable line: which job it serves.
	Reason string
}

// Plan is all one cycle decided; drivers apply it in field order.
type Plan struct {
	// Remediations lists what was done about each running job a failure
	// hit, evictions included; drivers report them (events, metrics) and
	// pin ReplaceRanks' new pods to Level/Domain.
	Remediations []Remediation
	Evictions    []Eviction
	// Repartitions come before binds: no bind of the same plan uses them.
	Repartitions []Repartition
	Binds        []GangBind
	// Reservations are the holds for blocked head jobs this cycle made.
	Reservations []Reservation
	// Held is the room held for gang members not created yet
	// (Snapshot.Later), for drivers to report.
	Held    []HeldRoom
	Pending []Pending
	// Queues reports each queue's standing after the cycle, in tree order.
	Queues []QueueStatus
	Stats  CycleStats
	// PoolProblems names pools of the snapshot left out as invalid.
	PoolProblems []string
	// Warnings are what the cycle went past without refusing a job (a
	// preferred topology level the cluster lacks: ignored), for drivers to
	// show; in Snapshot.Pending order.
	Warnings []Warning
	// Retry, when set, is a time at which a cycle may decide differently
	// without any new event (a preemption deferred to its victims' next
	// checkpoint). Drivers that run cycles only on events run one then.
	Retry time.Time
}

// Warning is one problem of a job the cycle went past.
type Warning struct {
	Job     workload.JobID
	Message string
}

// Remediation is one job's remediation after a failure under it.
type Remediation struct {
	Job    workload.JobID
	Action workload.Remediation
	// Failed is what failed under the job.
	Failed []Failure
	// Pods are the evicted pods (none while waiting for repair).
	Pods []workload.PodRef
	// Level and Domain are where ReplaceRanks' new pods must land (level
	// "cluster": anywhere); empty for the other actions.
	Level, Domain string
	Message       string
}

// QueueStatus is one queue's standing, for its status and metrics.
type QueueStatus struct {
	Name string
	// Allocated is what the queue's running jobs hold; FairShare what the
	// water-filling gives it; Pending what its waiting jobs ask for;
	// Borrowed what it holds above its guarantee.
	Allocated, FairShare, Pending, Borrowed Amounts
	// Problem is why the queue is left out of the tree, if it is (its
	// reasons joined by "; ").
	Problem string
	// Leaf: the queue is in the tree and takes jobs.
	Leaf bool
}

// CycleStats counts the work of one cycle.
type CycleStats struct {
	JobsConsidered int
	JobsPlaced     int
	PodsPlaced     int // pods bound by this plan
	// PodsHeld counts the members not created yet whose room the plan
	// holds (Plan.Held): placed in the view, not bound, so not in PodsPlaced.
	PodsHeld       int
	ShapeCacheHits int // jobs skipped because an identical shape already failed this cycle

	// Preemption: searches run, placements they tried, searches that ran out
	// of budget (their jobs keep waiting; the reason says so), and the
	// consolidation moves among the evictions.
	PreemptSearches    int
	PreemptEvaluations int
	PreemptGaveUp      int
	PreemptDeferred    int // preemptions held back for the victims' next checkpoint
	Consolidations     int

	// Evictions counts the Plan's evictions, whatever their cause
	// (preemption, reclaim, consolidation, shrink, pool reclaim, max
	// runtime, failure, rollback), and EvictionsByCause the same by
	// Eviction.Cause (nil when there is none). Each counts a decision, one
	// a job; the drivers' corral_evictions_total{cause} counts the pods
	// they evict, with the same causes.
	Evictions        int
	EvictionsByCause map[EvictionCause]int

	// Backfilled counts jobs placed on reserved nodes because they are
	// expected to end before the reservation starts.
	Backfilled int
	// StarvedReservations counts reservations made for a job waiting past
	// the starvation age, ahead of every placement.
	StarvedReservations int
	// StarvedLetIn counts starved jobs bound ahead of the head of a streak of
	// starved jobs, before every other placement.
	StarvedLetIn int
	// PodsGrown counts pods added to running elastic jobs.
	PodsGrown int

	// SpareGPUsHeld is the spare capacity kept from ordinary placement.
	SpareGPUsHeld int
	// HealthProblems are health inputs the cycle could not use (unknown
	// nodes, devices, levels), sorted.
	HealthProblems []string
}

// CountEviction counts one eviction of the plan, of cause c.
func (s *CycleStats) CountEviction(c EvictionCause) {
	s.Evictions++
	if s.EvictionsByCause == nil {
		s.EvictionsByCause = map[EvictionCause]int{}
	}
	s.EvictionsByCause[c]++
}

// HeldRoom is room held for the members of a gang its controller has not
// created yet.
type HeldRoom struct {
	Job   workload.JobID
	Pods  int      // members held for
	Nodes []string // the nodes holding their room, sorted
	Until time.Time
}

// Message says what the hold keeps, for reasons and events.
func (h HeldRoom) Message() string {
	return fmt.Sprintf("room held for %d members not created yet on %s until %s", h.Pods,
		strings.Join(h.Nodes, ", "), h.Until.UTC().Format(time.RFC3339))
}
