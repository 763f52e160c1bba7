// Package v1alpha1 is corral's user-facing API: the CRDs (group corral.dev),
// the scheduler's configuration file, and the labels and annotations users
// put on their pods and jobs. Names here are a stable contract: documented in
// docs/api.md, added to, never renamed.
package v1alpha1

// SchedulerName is the spec.schedulerName of the pods corral schedules.
const SchedulerName = "corral"

// Labels and annotations a user sets on a pod (or on a Job / JobSet / LWS pod
// template). Where both a label and an annotation would do, labels are used
// for what selectors need (the queue) and annotations for the rest.
const (
	// LabelQueue names the leaf queue; absent, the namespace's default queue.
	LabelQueue = "corral.dev/queue"

	// AnnotationGang groups bare pods into one gang: pods of a namespace with
	// the same value form one job.
	AnnotationGang = "corral.dev/gang"
	// AnnotationMinMembers is the gang minimum (an integer); default: every pod
	// (for a batch/v1 Job: its parallelism).
	AnnotationMinMembers = "corral.dev/min-members"
	// AnnotationRequiredTopology: every pod of the job must share one domain of
	// this topology level (a level name of the Topology object, e.g. "rack").
	AnnotationRequiredTopology = "corral.dev/topology-required"
	// AnnotationPreferredTopology: try one domain of this level first.
	AnnotationPreferredTopology = "corral.dev/topology-preferred"
	// AnnotationGPUModels restricts the GPU models a pod accepts, "|"-separated
	// (e.g. "H100|H200"), matched against the node's model label.
	AnnotationGPUModels = "corral.dev/gpu-models"
	// AnnotationGPUMilli asks for a fraction of one GPU in milli (1-999),
	// instead of whole GPUs.
	AnnotationGPUMilli = "corral.dev/gpu-milli"
	// AnnotationGPUMemory asks for a share of one GPU by memory, as a
	// Kubernetes quantity (e.g. "10Gi"), instead of whole GPUs or milli. The
	// pod takes that much of one GPU's memory and the same share of its
	// compute (see docs/api.md).
	AnnotationGPUMemory = "corral.dev/gpu-memory"
	// AnnotationExpectedRuntime is the user's runtime estimate (a Go duration,
	// e.g. "6h"), used by backfill.
	AnnotationExpectedRuntime = "corral.dev/expected-runtime"
	// AnnotationCheckpointInterval is how often the job checkpoints (a Go
	// duration), used to price preemption.
	AnnotationCheckpointInterval = "corral.dev/checkpoint-interval"
	// AnnotationLastCheckpoint is an RFC 3339 time the training loop (or its
	// operator) updates after each checkpoint.
	AnnotationLastCheckpoint = "corral.dev/last-checkpoint"
	// AnnotationPreemptible marks a job that may be preempted ("true"/"false").
	AnnotationPreemptible = "corral.dev/preemptible"
	// AnnotationRestartOverhead is the time a restarted job spends before it
	// makes progress again (pulling images, loading its checkpoint), a Go
	// duration; it is added to the price of preempting the job.
	AnnotationRestartOverhead = "corral.dev/restart-overhead"
	// AnnotationMinRuntime protects a freshly started job from preemption
	// for this long (a Go duration).
	AnnotationMinRuntime = "corral.dev/min-runtime"
	// AnnotationUser names who submitted the job, for runtime estimates
	// learned per user. Also read as a label (LabelUser); the annotation
	// wins, since it can hold names a label value cannot (an e-mail
	// address). Absent, the job has no user: Kubernetes records no
	// submitter on a pod or its owner.
	AnnotationUser = "corral.dev/user"
	// LabelUser is AnnotationUser as a label, for platforms that already
	// label workloads with their owner.
	LabelUser = "corral.dev/user"
)

// Annotations corral writes.
const (
	// AnnotationAssignedGPUs lists, comma-separated, the ids of the GPUs corral
	// chose on the node (e.g. "gpu0,gpu1"), for device plugins that honour a
	// preferred allocation. Written through the binding.
	AnnotationAssignedGPUs = "corral.dev/assigned-gpus"
	// AnnotationAssignedNICs lists the NICs on the chosen GPUs' PCIe switches.
	AnnotationAssignedNICs = "corral.dev/assigned-nics"
	// AnnotationGPUTopology on a Node describes its GPUs' intra-node
	// coordinates as JSON (written by an admin or a discovery tool: corral
	// has no node agent); without
	// it corral assumes the DGX layout for 8-GPU nodes and one PCIe switch per
	// GPU otherwise.
	AnnotationGPUTopology = "corral.dev/gpu-topology"
	// AnnotationUnhealthyGPUs on a Node lists failed GPU ids, comma-separated
	// (what a health agent writes for extended-resource nodes).
	AnnotationUnhealthyGPUs = "corral.dev/unhealthy-gpus"
	// AnnotationAssignedMIG lists, comma-separated, the MIG instances corral
	// chose as "<gpu id>:<profile>@<start>" (e.g. "gpu2:1g.10gb@6"). Written
	// through the binding; a restarted scheduler rebuilds from it which
	// instances are taken.
	AnnotationAssignedMIG = "corral.dev/assigned-mig"
	// AnnotationMIGLayout on a Node is its MIG GPUs' current layout as JSON,
	// GPU id -> instances ("profile@start", comma-separated; "" for a MIG
	// GPU with no instances), e.g. {"gpu0":"3g.40gb@0,3g.40gb@4"}. The
	// node's MIG manager (or an admin) keeps it true.
	AnnotationMIGLayout = "corral.dev/mig-layout"
	// AnnotationMIGLayoutWanted on a Node is written by corral: the layouts
	// it wants idle MIG GPUs re-partitioned into, same JSON. The node's MIG
	// manager applies them and then updates corral.dev/mig-layout; pods
	// waiting for the new instances are bound only after that.
	AnnotationMIGLayoutWanted = "corral.dev/mig-layout-wanted"
)

// Node labels corral reads when no Topology object says otherwise.
const (
	// LabelGPUModel is the node's GPU model, e.g. "H100" (GPU Feature
	// Discovery's nvidia.com/gpu.product is read too).
	LabelGPUModel = "corral.dev/gpu-model"
	// LabelGFDProduct is GPU Feature Discovery's product label.
	LabelGFDProduct = "nvidia.com/gpu.product"
	// LabelGFDMemory is GPU Feature Discovery's GPU memory label, in MiB.
	LabelGFDMemory = "nvidia.com/gpu.memory"
	// LabelGFDCount is GPU Feature Discovery's count of physical GPUs.
	LabelGFDCount = "nvidia.com/gpu.count"
)

// ResourceMIGPrefix starts the extended resources of MIG instances under
// the NVIDIA device plugin's "mixed" strategy: nvidia.com/mig-1g.10gb.
const ResourceMIGPrefix = "nvidia.com/mig-"

// ResourceGPU is the extended resource of whole NVIDIA GPUs.
const ResourceGPU = "nvidia.com/gpu"

// Health and remediation (docs/health.md).
const (
	// AnnotationRemediation on a pod (or its template) chooses the job's
	// policy when a device or node under it fails: RestartGang,
	// ReplaceRanks or WaitForRepair; absent: by job type.
	AnnotationRemediation = "corral.dev/remediation"
	// AnnotationRepairWait bounds WaitForRepair (a Go duration, e.g. "30m").
	AnnotationRepairWait = "corral.dev/repair-wait"
	// AnnotationReplaceWithin is written by corral on the healthy pods of a
	// gang whose failed ranks it is replacing: "<level>/<domain>", e.g.
	// "rack/r07", the domain the replacements must join. It outlives a
	// scheduler restart; corral reads it only while every bound pod of the
	// gang is still inside that domain.
	AnnotationReplaceWithin = "corral.dev/replace-within"
	// AnnotationEvictedFor is written by corral on a pod it evicts to make
	// room for a job: the job's id. While the pod terminates, that job
	// waits for it (engine.Snapshot.Terminating), across a scheduler
	// restart.
	AnnotationEvictedFor = "corral.dev/evicted-for"
	// ConditionGPUHealthy is a Node condition a health agent sets: status
	// False means the node's GPUs failed (the message says why); corral
	// treats the node as failed until it is True again.
	ConditionGPUHealthy = "corral.dev/GPUHealthy"
	// ReasonUnexpectedAdmissionError is the kubelet's reason on a pod it
	// rejected at admission (a device plugin that restarted or lost its
	// devices); corral counts them per node to mark the node suspect.
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
)
