// Package metrics holds what a simulation run measured. The JSON keys are a
// stable, documented interface (docs/metrics.md): add keys, never rename them.
package metrics

// Result is one policy's run on one input with one seed.
type Result struct {
	Policy   string  `json:"policy"`
	Seed     int64   `json:"seed"`
	Cluster  string  `json:"cluster"`
	Trace    string  `json:"trace"`
	Protocol string  `json:"protocol"`
	Summary  Summary `json:"summary"`
	Series   Series  `json:"-"`
}

// Summary is the headline figures of a run.
type Summary struct {
	// Capacity.
	Nodes         int   `json:"nodes"`
	GPUs          int   `json:"gpus"`
	CapacityMilli int64 `json:"capacity_gpu_milli"`

	// Allocation at the end of the run (fgd: when 130% has arrived; replay:
	// time-averaged over the run is UtilizationPct).
	GPUAllocPct       float64 `json:"gpu_alloc_pct"`       // GPU-milli allocated / capacity
	WholeGPUAllocPct  float64 `json:"whole_gpu_alloc_pct"` // GPUs with any allocation / GPUs
	UnallocatedGPUPct float64 `json:"unallocated_gpu_pct"` // 100 - gpu_alloc_pct
	FragPct           float64 `json:"frag_pct"`            // expected fragmentation / capacity
	// UnallocatedAt maps arrived-% checkpoints ("100", "110", ...) to the
	// unallocated GPU % when arrivals first reached them (fgd protocol).
	UnallocatedAt map[string]float64 `json:"unallocated_at,omitempty"`
	FragAt        map[string]float64 `json:"frag_at,omitempty"`

	// Jobs.
	JobsSubmitted    int `json:"jobs_submitted"`
	JobsStarted      int `json:"jobs_started"`
	JobsCompleted    int `json:"jobs_completed"`
	JobsNeverFit     int `json:"jobs_never_fit"` // rejected: no domain could ever hold them
	JobsStillPending int `json:"jobs_still_pending"`
	// JobsOverQueueLimit counts jobs that never started because each asks
	// more than its queue's (or an ancestor's) limit alone: limits never
	// change in a run, so they never could. Not in JobsStillPending
	// (replay with queues).
	JobsOverQueueLimit int `json:"jobs_over_queue_limit"`
	// JobsTerminated counts jobs stopped for good at their max runtime.
	JobsTerminated int `json:"jobs_terminated"`
	PodsPlaced     int `json:"pods_placed"`
	// PartialGangs counts jobs that at some point had some, but fewer than
	// their gang minimum, pods running: GPUs held while the job cannot run.
	PartialGangs int `json:"partial_gangs"`
	// PartialGangGPUHours is the GPU time those partial gangs held idle.
	PartialGangGPUHours float64 `json:"partial_gang_gpu_hours"`
	// RendezvousFailures counts jobs that failed because their pods had not
	// all started within the rendezvous timeout: they freed the pods they
	// held and were submitted again (replay).
	RendezvousFailures int `json:"rendezvous_failures"`
	// JobsGaveUp counts jobs whose controller gave up after their rendezvous
	// failed more than a Job's default backoffLimit (6) times (replay).
	JobsGaveUp int `json:"jobs_gave_up"`

	// Evictions and restarts (preemption, reclaim, failures).
	// Evictions counts eviction decisions carried out; JobsRestarted the
	// jobs that stopped because of one and went back to pending.
	Evictions int `json:"evictions"`
	// MIGRepartitions counts idle MIG GPUs re-partitioned by the plans.
	MIGRepartitions int `json:"mig_repartitions,omitempty"`
	JobsRestarted   int `json:"jobs_restarted"`
	// GPUHoursLost is the work thrown away by those restarts: GPUs × the
	// time since each job's last checkpoint.
	GPUHoursLost float64 `json:"gpu_hours_lost"`
	// Evictions by cause (replay): priority preemption, reclaim across
	// queues, consolidation moves; and the part of GPUHoursLost that
	// preemption with reclaim, and consolidation, threw away.
	Preempted                 int     `json:"preempted"`
	Reclaimed                 int     `json:"reclaimed"`
	Consolidated              int     `json:"consolidated"`
	GPUHoursLostPreemption    float64 `json:"gpu_hours_lost_preemption"`
	GPUHoursLostConsolidation float64 `json:"gpu_hours_lost_consolidation"`

	// Queues (replay with queues). FairnessJain is Jain's index of the leaf
	// queues' GPU allocation / fair share, time-averaged over the arrival
	// window (1 = every queue at its share; fair shares are the engine's,
	// by guarantee, weight and demand). LateQueue is the queue whose first
	// job arrived last. A queue is short while it holds less than 95% of
	// its fair share with jobs waiting; LateQueueToShareS is how long the
	// late queue's first shortage lasted (-1: it never ended),
	// LateQueueShortMeanS the mean over all its shortages.
	FairnessJain        float64 `json:"fairness_jain,omitempty"`
	LateQueue           string  `json:"late_queue,omitempty"`
	LateQueueToShareS   float64 `json:"late_queue_to_share_s"`
	LateQueueShortMeanS float64 `json:"late_queue_short_mean_s"`

	// Failures (replay with failure injection). GoodputPct is the work of
	// completed jobs (GPUs × runtime) / GPU time allocated, in %.
	// FailureLostGPUHours is what failures cost: work rolled back to the
	// last checkpoint, restart overhead, GPUs a paused gang held idle
	// while its failed ranks were replaced, and GPUs a gang held hung on a
	// failed node before the failure was acted on (the four parts follow).
	// Recovery is the time from a failure to the job running whole again.
	Failures                int     `json:"failures,omitempty"`
	GoodputPct              float64 `json:"goodput_pct,omitempty"`
	WorkGPUHours            float64 `json:"work_gpu_hours,omitempty"`
	FailureLostGPUHours     float64 `json:"failure_lost_gpu_hours,omitempty"`
	FailureRollbackGPUHours float64 `json:"failure_rollback_gpu_hours,omitempty"`
	FailureOverheadGPUHours float64 `json:"failure_overhead_gpu_hours,omitempty"`
	FailureIdleGPUHours     float64 `json:"failure_idle_gpu_hours,omitempty"`
	FailureHungGPUHours     float64 `json:"failure_hung_gpu_hours,omitempty"`
	Recoveries              int     `json:"recoveries,omitempty"`
	// Remediations counts the engine's decisions on jobs hit by failures,
	// by action (RestartGang, ReplaceRanks, WaitForRepair).
	Remediations  map[string]int `json:"remediations,omitempty"`
	RecoveryMeanS float64        `json:"recovery_mean_s,omitempty"`
	RecoveryP95S  float64        `json:"recovery_p95_s,omitempty"`

	// Time.
	WaitP50S  float64 `json:"wait_p50_s"`
	WaitP95S  float64 `json:"wait_p95_s"`
	WaitMaxS  float64 `json:"wait_max_s"`
	WaitMeanS float64 `json:"wait_mean_s"`
	// The largest jobs: those at or above the 95th percentile of GPU size
	// of the input (LargeJobMinGPUs); their waits count a job that never
	// started with its wait until the end of the run.
	LargeJobMinGPUs float64 `json:"large_job_min_gpus"`
	LargeJobs       int     `json:"large_jobs"`
	LargeWaitP95S   float64 `json:"large_wait_p95_s"`
	LargeWaitMaxS   float64 `json:"large_wait_max_s"`
	LargeWaitMeanS  float64 `json:"large_wait_mean_s"`
	JCTMeanS        float64 `json:"jct_mean_s"`
	JCTP50S         float64 `json:"jct_p50_s"`
	JCTP95S         float64 `json:"jct_p95_s"`
	MakespanS       float64 `json:"makespan_s"`
	// UtilizationPct is the GPU-milli held by running jobs / capacity,
	// time-averaged from the first to the last arrival (the drain after it is
	// left out); AllocatedPct also counts GPUs held by partially started
	// gangs, which cannot run.
	UtilizationPct float64 `json:"utilization_pct"`
	// UtilizationMakespanPct is the same over the whole run, the drain after
	// the last arrival included: a policy that defers big jobs past the
	// arrival window cannot hide their drain from it.
	UtilizationMakespanPct float64 `json:"utilization_makespan_pct"`
	// WorkMakespanPct is the work of the jobs that completed, at full speed
	// (GPUs × runtime, without the communication slowdown, rolled-back
	// work or restart overhead), over the GPU capacity × the makespan. Two
	// runs of the same jobs differ in it only by their makespans; a policy
	// whose placements slow jobs down shows a higher useful % for the
	// same work, not a higher work %.
	WorkMakespanPct float64 `json:"work_makespan_pct"`
	AllocatedPct    float64 `json:"allocated_pct"`
	// AllocatedMakespanPct is AllocatedPct over the whole run: GPUs held,
	// whether doing useful work or not (partial gangs, hung jobs).
	AllocatedMakespanPct float64 `json:"allocated_makespan_pct"`
	// WaitCensoredMeanS and WaitCensoredP95S are the waits of every job
	// that was not rejected, a job that never started counting with its
	// wait until the end of the run (censored): the wait_* figures above
	// count only jobs that started.
	WaitCensoredMeanS float64 `json:"wait_censored_mean_s"`
	WaitCensoredP95S  float64 `json:"wait_censored_p95_s"`
	// SizeClasses are the whole-run figures by job size (replay).
	SizeClasses []SizeClass `json:"size_classes,omitempty"`

	// Topology locality of multi-node gangs, per level from the host up:
	// the share (0-1) placed in the minimum possible number of domains, and
	// the mean number of domains spanned.
	MultiNodeGangs     int                `json:"multi_node_gangs"`
	MinDomainShare     map[string]float64 `json:"min_domain_share"`
	MeanDomainsSpanned map[string]float64 `json:"mean_domains_spanned"`
	// Inside nodes: the share (0-1) of multi-GPU pods whose GPUs sit in the
	// fewest possible PCIe switches.
	MinPCIeShare float64 `json:"min_pcie_share"`
	// JCT slowdown under the communication model (1.0 = every gang ideally placed).
	CommSlowdownMean float64 `json:"comm_slowdown_mean"`

	// Engine cost.
	Cycles         int     `json:"cycles"`
	DecisionMeanUS float64 `json:"decision_mean_us"` // engine time per pod placed
	CycleMeanUS    float64 `json:"cycle_mean_us"`
	CycleMaxUS     float64 `json:"cycle_max_us"`
	WallSeconds    float64 `json:"wall_seconds"`
}

// Point is one sample of a curve.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Series are the curves a report draws.
type Series struct {
	// AllocVsArrived: x = GPU-milli arrived / capacity (%), y = allocated (%).
	AllocVsArrived []Point
	// Utilization: x = hours since the first arrival, y = GPU-milli of
	// running jobs doing useful work (%) from x until the next point.
	Utilization []Point
	// Allocated: the same axes, y = GPU-milli held at all (%): also by
	// gangs still gathering their pods, hung jobs and rendezvous that never
	// complete. The gap to Utilization is capacity held for nothing.
	Allocated []Point
	// Waits is each started job's queueing delay in seconds.
	Waits []float64
	// Pending: x = hours since the first arrival, y = jobs waiting to
	// start (replay), from x until the next point.
	Pending []Point
	// QueueGPUs: per leaf queue (replay with queues), x = hours, y = the
	// GPU-milli its started jobs hold, % of capacity.
	QueueGPUs map[string][]Point
	// Domains is GPU allocation per topology domain over time (replay).
	Domains *DomainSeries
}

// DomainSeries is GPU allocation per domain of one topology level (the
// narrowest above the host, e.g. racks): Alloc[t][d] is the % of domain
// Names[d]'s GPU-milli held or out of service from Hours[t] until the next
// sample.
type DomainSeries struct {
	Level string
	Names []string
	Hours []float64
	Alloc [][]float64
}

// SizeClass is the whole-run figures of the jobs of one size range. Waits
// are censored (a job that never started counts with its wait until the end
// of the run); JCTs count the jobs that completed.
type SizeClass struct {
	// Class names the range of GPUs per job: "<=1", "2-8", "9-64", ">64".
	Class     string  `json:"class"`
	Jobs      int     `json:"jobs"`
	Started   int     `json:"started"`
	Completed int     `json:"completed"`
	WaitMeanS float64 `json:"wait_mean_s"`
	WaitP95S  float64 `json:"wait_p95_s"`
	JCTMeanS  float64 `json:"jct_mean_s"`
	JCTP95S   float64 `json:"jct_p95_s"`
}

// SizeClasses are the ranges of GPUs per job SizeClass uses, by upper bound.
var SizeClasses = []struct {
	Name string
	Max  float64
}{{"<=1", 1}, {"2-8", 8}, {"9-64", 64}, {">64", 1 << 30}}
