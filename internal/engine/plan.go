// Package engine is corral's scheduling cycle: it reads an immutable Snapshot
// and returns a Plan. It never performs I/O, never reads the clock and gives
// the same Plan for the same Snapshot; the simulator and the Kubernetes
// adapter carry the Plan out.
package engine

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
}

// Snapshot is everything one cycle may look at.
type Snapshot struct {
	// State is the cluster's free capacity now. The engine does not change it.
	State   *cluster.State
	Pending []PendingJob
	// Mix is the expected workload, used to keep capacity useful for it.
	Mix placement.Mix
	Now time.Time
}

// PodBind puts one pod on a node with specific devices.
type PodBind struct {
	Pod       workload.PodRef
	Node      string
	NodeIndex int
	Alloc     cluster.Alloc
	Devices   []string // device ids, in the order of Alloc.Devices
	NICs      []string // NICs sharing a PCIe switch with the devices
}

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
}

// Plan is all one cycle decided; drivers apply it in field order.
type Plan struct {
	Binds   []GangBind
	Pending []Pending
	Stats   CycleStats
}

// CycleStats counts the work of one cycle.
type CycleStats struct {
	JobsConsidered int
	JobsPlaced     int
	PodsPlaced     int
	ShapeCacheHits int // jobs skipped because an identical shape already failed this cycle
}
