// Package cycle is the contract of one scheduling cycle: the Snapshot the
// engine reads, the Plan it returns, and the policy inputs a snapshot carries
// (queue specs, pools, runtime history, failures, spares, suspects). It sits
// below every policy package (queue, backfill, preempt, health) and the
// engine, so each of them can name these types without importing another;
// it holds data and small pure helpers only, no decisions.
package cycle

import (
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// PendingJob is a job with pods still waiting. Waiting lists them; nil means
// every pod of the job.
type PendingJob struct {
	Job     *workload.Job
	Waiting []workload.PodRef
	// Within pins the waiting pods inside one topology domain. Drivers set
	// it for the replacement ranks of a job that ReplaceRanks remediated
	// (from Plan.Remediations); such pods are placed before other jobs and
	// may use the spares held there. Empty: the waiting pods of a partly
	// bound gang stay inside the domain its bound pods share at the job's
	// required level, if it has one.
	Within Pin
}

// Pin names one topology domain: a level and a domain name at it.
type Pin struct {
	Level  string
	Domain string
}

// RunningJob is a job with pods placed and running. Its pods' capacity is
// already taken out of Snapshot.State.
type RunningJob struct {
	Job  *workload.Job
	Pods []PodBind
	// Start is when the job (last) started running.
	Start time.Time
	// Checkpoints are the saves the job reported in this run, ascending
	// (at most MaxCheckpoints). None reported: a preemption loses all its
	// work since Start; a declared interval is never assumed in their place.
	Checkpoints Checkpoints
}

// TerminatingPod is a pod evicted for a job that has not terminated yet.
type TerminatingPod struct {
	Name  string         // for reasons, e.g. namespace/name
	For   workload.JobID // the job it was evicted for
	Since time.Time      // when it began terminating
}

// VictimWait bounds how long a job waits for the pods evicted for it to
// terminate: a pod stuck terminating (its node is gone) must not block it
// forever; past this, the cycle decides afresh.
const VictimWait = 5 * time.Minute

// Snapshot is everything one cycle may look at.
type Snapshot struct {
	// State is the cluster's free capacity now. The engine does not change it.
	State   *cluster.State
	Pending []PendingJob
	// Running lists the jobs holding capacity, for preemption, reservations
	// and remediation. Order does not matter: the engine sorts what it uses.
	Running []RunningJob
	// Queues is the queue tree as admins wrote it; empty means one implicit
	// queue holding every job.
	Queues []QueueSpec
	// Terminating lists the pods on their way out (evicted, not gone yet)
	// that were evicted to make room for a job: their capacity is still
	// taken in State. That job waits until they are gone (at most
	// VictimWait from when they began terminating): a kubelet counts a pod
	// until it has terminated, so binding at once would have the node
	// reject the job, and evicting again would take more than needed.
	// Drivers read it from the cluster, so a restarted one keeps the job
	// waiting too.
	Terminating []TerminatingPod
	// Mix is the expected workload, used to keep capacity useful for it:
	// the pods present now (pending and running), as engine.MixOf counts
	// them in both drivers.
	Mix placement.Mix
	Now time.Time
	// Pools is capacity held for classes of jobs (issue 6); invalid pools
	// are left out and named in Plan.PoolProblems.
	Pools []Pool
	// Runtimes is the history of completed runtimes the driver keeps, for
	// estimates of jobs that declare none; nil means no history.
	Runtimes *History

	// Health inputs (internal/health). Failures says what failed and since
	// when (failed devices are also out of State; failed nodes are also
	// unschedulable in it). Spares is capacity held back from ordinary
	// placement for replacing failed ranks. Suspects are nodes that
	// rejected pods at admission: scored last, left out at SuspectLimit
	// rejections (0: health.DefaultSuspectLimit).
	Failures     []Failure
	Spares       []Spare
	Suspects     []Suspect
	SuspectLimit int

	// Later lists, per gang, the members its controller creates only after
	// the first ones are placed (LeaderWorkerSet under LeaderReady, JobSet
	// children under exclusive placement). The engine holds their room
	// beside the bound pods until the hold times out (later.go in engine).
	Later []LaterMembers
}

// LaterMembers are the members of a gang not created yet. Their pod sets
// are in the job (requests read from the owner's template); the engine
// places them with the gang, binds none of them and, once the first pods
// are bound, holds their room beside those until Since+HoldFor. Drivers
// read Since from the cluster (the gang's first binding), so a restarted
// driver keeps the hold.
type LaterMembers struct {
	Job  workload.JobID
	Pods []workload.PodRef
	// Since is when the gang's first pod was bound; zero: none is yet.
	Since   time.Time
	HoldFor time.Duration
}

// PodBind puts one pod on a node with specific devices: the placed pod
// (its node index and allocation) with the names a driver writes.
type PodBind struct {
	cluster.Placed
	Node    string   // the node's name
	Devices []string // device ids, in the order of Alloc.Devices
	NICs    []string // NICs sharing a PCIe switch with the devices
}
