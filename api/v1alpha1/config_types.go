package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SchedulerConfigurationKind is the kind of the scheduler's configuration file.
const SchedulerConfigurationKind = "SchedulerConfiguration"

// Defaults of the SchedulerConfiguration (see Default).
const (
	DefaultLeaderElectionNamespace = "corral-system"
	DefaultLeaseName               = "corral-scheduler"
	DefaultMetricsAddress          = ":8080"
	DefaultHealthAddress           = ":8081"
	DefaultGPUResourceName         = ResourceGPU
	DefaultDRADriver               = "gpu.nvidia.com"

	// AddressOff as metricsAddress or healthAddress turns that endpoint off.
	AddressOff = "0"

	// DefaultRuntimeHistory is the ConfigMap, in the leader-election
	// namespace, that keeps learned runtimes across restarts.
	DefaultRuntimeHistory = "corral-runtime-history"
	// RuntimeHistoryOff as runtimeHistory keeps learned runtimes in memory
	// only.
	RuntimeHistoryOff = "0"
)

// Default durations of the SchedulerConfiguration; the leader-election ones
// are client-go's and kube-scheduler's.
var (
	DefaultLeaseDuration = metav1.Duration{Duration: 15 * time.Second}
	DefaultRenewDeadline = metav1.Duration{Duration: 10 * time.Second}
	DefaultRetryPeriod   = metav1.Duration{Duration: 2 * time.Second}
	DefaultCycleInterval = metav1.Duration{Duration: time.Second}
)

// SchedulerConfiguration is the file `corral scheduler --config` reads
// (apiVersion corral.dev/v1alpha1, kind SchedulerConfiguration). It is not an
// API object: it is not served by the API server. Every field is optional;
// LoadConfig fills in the defaults documented on each field.
//
// +kubebuilder:object:root=true
type SchedulerConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// SchedulerName is the spec.schedulerName of the pods corral schedules.
	// Default: "corral".
	SchedulerName string `json:"schedulerName,omitempty"`

	// LeaderElection: one active scheduler at a time, through a Lease.
	LeaderElection LeaderElectionConfiguration `json:"leaderElection,omitempty"`

	// MetricsAddress is the host:port of the Prometheus /metrics endpoint;
	// "0" turns it off. Default: ":8080".
	MetricsAddress string `json:"metricsAddress,omitempty"`

	// HealthAddress is the host:port of /healthz and /readyz; "0" turns them
	// off. Default: ":8081".
	HealthAddress string `json:"healthAddress,omitempty"`

	// CycleInterval is the longest time between two scheduling cycles; the
	// loop also wakes on cluster events. Default: 1s.
	CycleInterval metav1.Duration `json:"cycleInterval,omitempty"`

	// TopologyName is the name of the Topology object to use. Default: the
	// only Topology in the cluster; with none, the cluster is flat (only the
	// cluster and host levels).
	TopologyName string `json:"topologyName,omitempty"`

	// GPUResourceName is the extended resource of whole GPUs.
	// Default: "nvidia.com/gpu".
	GPUResourceName string `json:"gpuResourceName,omitempty"`

	// DRADriver is the DRA driver whose devices (ResourceSlices) are GPUs.
	// Default: "gpu.nvidia.com".
	DRADriver string `json:"draDriver,omitempty"`

	// ManagedNodeSelector is a label selector (kubectl's syntax, e.g.
	// "corral.dev/pool=training,!cordoned") choosing the nodes corral may
	// place pods on. Default: "" (every node).
	ManagedNodeSelector string `json:"managedNodeSelector,omitempty"`

	// CordonFailedNodes cordons a node when corral remediates a GPU or node
	// failure on it (docs/health.md). Default: false (a health agent or the
	// operator owns cordons).
	CordonFailedNodes bool `json:"cordonFailedNodes,omitempty"`

	// Spares are whole GPUs held back from ordinary placement for replacing
	// failed ranks (docs/health.md#spares). Default: none.
	Spares []SpareConfig `json:"spares,omitempty"`

	// Backfill tunes reservations, starvation and runtime limits
	// (docs/backfill.md). Default: the engine's defaults.
	Backfill BackfillSettings `json:"backfill,omitempty"`

	// Preemption tunes how long preemption waits for victims' checkpoints
	// and what reclaim throws away (docs/preemption.md). Default: the
	// engine's defaults.
	Preemption PreemptionSettings `json:"preemption,omitempty"`

	// Pools hold capacity for classes of jobs, e.g. prefill servers on
	// NVLink nodes (docs/backfill.md#held-capacity-pools). Default: none.
	Pools []PoolConfig `json:"pools,omitempty"`

	// RuntimeHistory is the ConfigMap that keeps the runtimes corral has
	// learned from completed jobs across restarts and leader changes:
	// "name" (in the leader-election namespace) or "namespace/name"; "0"
	// keeps them in memory only (docs/backfill.md#runtime-estimates).
	// Default: "corral-runtime-history".
	RuntimeHistory string `json:"runtimeHistory,omitempty"`
}

// BackfillSettings tunes reservations and runtime limits.
type BackfillSettings struct {
	// MaxReservations caps the blocked head jobs that get a reservation per
	// cycle, over all queues. 0: 1; negative: none (only jobs waiting past
	// starveAfter are reserved).
	MaxReservations int `json:"maxReservations,omitempty"`
	// MaxReservationsPerQueue caps them per queue. 0: 1.
	MaxReservationsPerQueue int `json:"maxReservationsPerQueue,omitempty"`
	// StarveAfter is the wait after which a job is reserved for before
	// anything else is placed. Default: 24h. "0s" keeps the default; a
	// negative duration turns starvation reservations off.
	StarveAfter metav1.Duration `json:"starveAfter,omitempty"`
	// OnMaxRuntime is what happens to a job past its max runtime:
	// Terminate (default) or Requeue.
	OnMaxRuntime string `json:"onMaxRuntime,omitempty"`
}

// PreemptionSettings tunes preemption and reclaim; "0s" keeps a default.
type PreemptionSettings struct {
	// CheckpointWait is the longest a preemption waits for its victims'
	// next checkpoint. Default: 20m; negative: never wait.
	CheckpointWait metav1.Duration `json:"checkpointWait,omitempty"`
	// ReclaimMaxLost: a guarantee reclaim spares a borrower that would
	// lose more progress than this (since its last checkpoint, plus its
	// restart overhead), for reclaimGrace after the reclaiming job was
	// submitted. Default: 6h; negative: spare none.
	ReclaimMaxLost metav1.Duration `json:"reclaimMaxLost,omitempty"`
	// ReclaimGrace bounds that: past it the borrower is taken. Default: 24h.
	ReclaimGrace metav1.Duration `json:"reclaimGrace,omitempty"`
	// MaxLostPerWork bounds what a priority preemption may throw away: at
	// most this many times the work the preemptor is expected to do (its
	// GPUs × expected runtime), e.g. 2 or "2.5". Default: 2 (unset or 0);
	// negative: no bound, only the wait the eviction saves decides.
	MaxLostPerWork Decimal `json:"maxLostPerWork,omitempty"`
}

// Decimal is a decimal number kept as its text, e.g. "2.5". Configuration
// types hold no floats (Kubernetes API conventions: a float does not
// round-trip exactly through JSON and YAML), and a factor reads better as
// 2.5 than as an integer percentage (250) beside a flag that takes 2.5.
// The file may quote it or not: YAML's bare 2.5, which Helm renders from
// a values file, decodes like "2.5". Float parses and checks it.
type Decimal string

// PoolConfig is capacity held for one class of jobs (corral.dev/class).
type PoolConfig struct {
	// Name names the pool in events and status.
	Name string `json:"name"`
	// Class is the corral.dev/class of the jobs the pool is for.
	Class string `json:"class"`
	// NodeLabels selects the pool's nodes: every node carrying all of them.
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	// GPUs (with Model, optional) selects by count instead, when NodeLabels
	// is empty: whole nodes of the model, in topology order, until they
	// hold this many GPUs.
	GPUs  int    `json:"gpus,omitempty"`
	Model string `json:"model,omitempty"`
	// Others is Closed (default: nobody else uses the pool) or Preemptible
	// (preemptible jobs of other classes may backfill it and are evicted
	// when the class needs the room).
	Others string `json:"others,omitempty"`
}

// SpareConfig holds GPUs in every domain of a topology level, or in one
// domain of it, for replacements of any job or of one queue's jobs.
type SpareConfig struct {
	// Level is a level of the Topology, e.g. "rack", or "cluster".
	Level string `json:"level"`
	// Domain is one domain of the level (its label value, e.g. "r07");
	// empty: every domain of the level.
	Domain string `json:"domain,omitempty"`
	// GPUs is the number of whole GPUs held in each such domain.
	GPUs int `json:"gpus"`
	// Queue keeps the spares for that queue's jobs; empty: any job's.
	Queue string `json:"queue,omitempty"`
}

// LeaderElectionConfiguration configures the Lease that elects the active
// scheduler.
type LeaderElectionConfiguration struct {
	// Enabled turns leader election on. Default: true. Run one replica only
	// when it is off.
	Enabled *bool `json:"enabled,omitempty"`

	// Namespace of the Lease. Default: "corral-system".
	Namespace string `json:"namespace,omitempty"`

	// LeaseName is the Lease's name. Default: "corral-scheduler".
	LeaseName string `json:"leaseName,omitempty"`

	// LeaseDuration is how long standbys wait after the last renewal before
	// taking over. Default: 15s.
	LeaseDuration metav1.Duration `json:"leaseDuration,omitempty"`

	// RenewDeadline is how long the leader keeps retrying to renew before it
	// gives up leading. Default: 10s.
	RenewDeadline metav1.Duration `json:"renewDeadline,omitempty"`

	// RetryPeriod is the wait between two attempts to acquire or renew.
	// Default: 2s.
	RetryPeriod metav1.Duration `json:"retryPeriod,omitempty"`
}
