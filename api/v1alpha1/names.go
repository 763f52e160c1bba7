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
	// coordinates as JSON (written by `corral agent` or by an admin); without
	// it corral assumes the DGX layout for 8-GPU nodes and one PCIe switch per
	// GPU otherwise.
	AnnotationGPUTopology = "corral.dev/gpu-topology"
	// AnnotationUnhealthyGPUs on a Node lists failed GPU ids, comma-separated
	// (what a health agent writes for extended-resource nodes).
	AnnotationUnhealthyGPUs = "corral.dev/unhealthy-gpus"
)

// Node labels corral reads when no Topology object says otherwise.
const (
	// LabelGPUModel is the node's GPU model, e.g. "H100" (GPU Feature
	// Discovery's nvidia.com/gpu.product is read too).
	LabelGPUModel = "corral.dev/gpu-model"
	// LabelGFDProduct is GPU Feature Discovery's product label.
	LabelGFDProduct = "nvidia.com/gpu.product"
)

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
	// ConditionGPUHealthy is a Node condition a health agent sets: status
	// False means the node's GPUs failed (the message says why); corral
	// treats the node as failed until it is True again.
	ConditionGPUHealthy = "corral.dev/GPUHealthy"
	// ReasonUnexpectedAdmissionError is the kubelet's reason on a pod it
	// rejected at admission (a device plugin that restarted or lost its
	// devices); corral counts them per node to mark the node suspect.
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
)
