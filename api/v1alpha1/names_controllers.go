package v1alpha1

// Annotations for gangs whose members a workload controller creates only
// after the first of them is placed (a LeaderWorkerSet with startupPolicy
// LeaderReady, a JobSet with exclusive placement or startupPolicy InOrder).
// corral places such a gang whole: it binds the pods that exist and holds
// the room the engine chose for the others, written on the first pod's
// binding so that a restarted scheduler keeps holding it.
const (
	// AnnotationHoldTimeout bounds how long room is held for members not yet
	// created (a Go duration, default DefaultHoldTimeout). Past it the room is
	// released and late members are placed like any others, beside the bound
	// ones when the job has a required level.
	AnnotationHoldTimeout = "corral.dev/hold-timeout"

	// AnnotationHeldRoom (written by corral on the binding of a gang's
	// first pod) says what room the engine holds for the members not
	// created yet, for people: corral does not read it back.
	AnnotationHeldRoom = "corral.dev/held-room"
	// AnnotationHeldUntil (written by corral) is when the hold ends (RFC 3339).
	AnnotationHeldUntil = "corral.dev/held-until"
)

// DefaultHoldTimeout is how long room is held for members not yet created
// when the pods do not set AnnotationHoldTimeout.
const DefaultHoldTimeout = "5m"
