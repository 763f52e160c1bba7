package v1alpha1

// Labels and annotations of backfill, runtime limits and held capacity
// (docs/backfill.md).
const (
	// AnnotationMaxRuntime is the job's hard runtime limit (a Go duration,
	// e.g. "12h"). Past it corral stops the job (the scheduler's
	// maxRuntimePolicy says whether for good or back to the queue). It also
	// bounds the job's runtime estimate for backfill. Without it, a batch/v1
	// Job's spec.activeDeadlineSeconds is used.
	AnnotationMaxRuntime = "corral.dev/max-runtime"
	// LabelClass names the job's class (e.g. "prefill") for capacity held in
	// pools: a pool is kept for one class.
	LabelClass = "corral.dev/class"
)
