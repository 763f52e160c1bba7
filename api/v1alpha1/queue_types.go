package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Accepted condition of a Queue: whether the scheduler took it into its
// queue tree. Rules that span several Queues (the parent exists, no parent
// cycles, children's guarantees fit the parent's) cannot be checked by the
// API server on one object: the scheduler reports them here and keeps the
// rest of the tree working.
const (
	// QueueConditionAccepted is True on a Queue in the tree.
	QueueConditionAccepted = "Accepted"

	// QueueReasonActive (status True): the queue is in the tree.
	QueueReasonActive = "Active"
	// QueueReasonInvalid (status False): the queue, or an ancestor, breaks a
	// rule of the tree; the message says which. Its pods are refused.
	QueueReasonInvalid = "Invalid"
)

// ReclaimPolicy says what a queue does when capacity it lent is in use by
// borrowers and its own jobs come back.
//
// +kubebuilder:validation:Enum=Never;Preempt;Strict
type ReclaimPolicy string

const (
	// ReclaimNever waits for the borrowers' jobs to end.
	ReclaimNever ReclaimPolicy = "Never"
	// ReclaimPreempt evicts borrowers' jobs, those that lose the least work
	// first, until the queue is back at its fair share, but never takes a
	// borrower's queue below its own guarantee: a borrowing job holding part
	// of its own queue's guarantee in one gang is waited for.
	ReclaimPreempt ReclaimPolicy = "Preempt"
	// ReclaimStrict is Preempt that, when nothing else gives the guarantee
	// back, also evicts such a job (Kueue's reclaim does): no borrower holds
	// a guarantee until it ends, at the cost of more work lost
	// (docs/preemption.md).
	ReclaimStrict ReclaimPolicy = "Strict"
)

// The resource is corralqueues (short name cqu), not queues: Volcano's
// Queue is also "queues", Kueue's LocalQueue takes "queue" and "queues" as
// short names and its ClusterQueue takes "cq", and users often run them
// beside corral (docs/api.md#names-beside-kueue-and-volcano).
//
// The GPU columns read the scheduler's GPU resource under its default name
// (nvidia.com/gpu), what queues that count GPUs of any model hold; -o wide
// adds the borrowed GPUs, CPU, the reclaim policy and the Accepted reason.

// Queue is one queue of the cluster's queue tree. Leaf queues take jobs
// (pods name theirs with the corral.dev/queue label); inner queues group
// them. Every cycle the cluster's capacity is divided down the tree:
// guarantees first, then what is left by weight (see docs/queues.md).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=corralqueues,singular=corralqueue,scope=Cluster,shortName=cqu,categories=corral
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'root'",message="the name root is reserved for the implicit root of the tree"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.parent) || self.spec.parent != self.metadata.name",message="a queue cannot be its own parent"
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parent`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="GPUs",type=string,JSONPath=`.status.allocated.nvidia\.com/gpu`,description="GPUs the queue's running pods hold"
// +kubebuilder:printcolumn:name="Fair Share",type=string,JSONPath=`.status.fairShare.nvidia\.com/gpu`,description="GPUs the queue is entitled to now"
// +kubebuilder:printcolumn:name="Pending",type=string,JSONPath=`.status.pending.nvidia\.com/gpu`,description="GPUs the queue's waiting pods ask for"
// +kubebuilder:printcolumn:name="Borrowed",type=string,JSONPath=`.status.borrowed.nvidia\.com/gpu`,priority=1,description="GPUs held above the guarantee"
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.status.allocated.cpu`,priority=1,description="CPU the queue's running pods hold"
// +kubebuilder:printcolumn:name="Reclaim",type=string,JSONPath=`.spec.reclaimPolicy`,priority=1,description="Never, Preempt or Strict"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec QueueSpec `json:"spec,omitempty"`
	// +optional
	Status QueueStatus `json:"status,omitempty"`
}

// QueueSpec is what an admin writes.
//
// +kubebuilder:validation:XValidation:rule="!has(self.defaultForNamespaces) || !has(self.namespaces) || self.defaultForNamespaces.all(n, n in self.namespaces)",message="every namespace in defaultForNamespaces must be in namespaces"
type QueueSpec struct {
	// Parent names the parent Queue; empty (or "root") hangs the queue from
	// the implicit root, the whole cluster.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Parent string `json:"parent,omitempty"`

	// Resources lists, per resource, the guaranteed quota, the limit and the
	// weight for spare capacity. A resource is "cpu", "memory", "gpu/<model>"
	// (GPUs of one model, e.g. gpu/H100), the scheduler's GPU resource
	// ("nvidia.com/gpu": GPUs of any model), or any extended resource or DRA
	// DeviceClass name, counted in devices.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Resources []QueueResource `json:"resources,omitempty"`

	// Weight is the queue's part of spare capacity among its siblings for
	// every resource that Resources gives no weight. Default 1.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="weight must be positive"
	Weight *resource.Quantity `json:"weight,omitempty"`

	// Priority orders leaf queues whose dominant shares are equal (higher
	// first). Leaf queues only.
	//
	// +optional
	Priority int32 `json:"priority,omitempty"`

	// Namespaces may submit pods to this queue; empty admits every
	// namespace. Leaf queues only.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// DefaultForNamespaces makes this queue the default of these
	// namespaces: their pods without a corral.dev/queue label go here. A
	// namespace that two queues claim has no default (its unlabelled pods
	// are refused, saying so). Leaf queues only.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	DefaultForNamespaces []string `json:"defaultForNamespaces,omitempty"`

	// ReclaimPolicy: Preempt lets this queue (and every queue below it)
	// evict borrowers' jobs to take back lent guarantee; Strict also evicts
	// a borrowing job whose eviction leaves its own queue below its
	// guarantee; Never (the default) waits for them to end. Lending happens
	// either way.
	//
	// +optional
	// +kubebuilder:default=Never
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// QueueResource is a queue's quota of one resource.
//
// +kubebuilder:validation:XValidation:rule="!has(self.limit) || !has(self.guaranteed) || quantity(string(self.limit)).compareTo(quantity(string(self.guaranteed))) >= 0",message="limit must be at least guaranteed"
type QueueResource struct {
	// Name of the resource: cpu, memory, gpu/<model>, nvidia.com/gpu, or an
	// extended resource or DRA DeviceClass name.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="name must be a resource name ([prefix/]name, e.g. cpu, gpu/H100, nvidia.com/gpu)"
	Name string `json:"name"`

	// Guaranteed is what the queue gets whenever its jobs ask for it; unused,
	// it is lent to other queues. Default 0.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="guaranteed must not be negative"
	Guaranteed *resource.Quantity `json:"guaranteed,omitempty"`

	// Limit caps what the queue (with every queue below it) may hold,
	// borrowing included. Absent: unlimited.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="limit must not be negative"
	Limit *resource.Quantity `json:"limit,omitempty"`

	// Weight is the queue's part of this resource's spare capacity among its
	// siblings. Default: spec.weight, else 1.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="weight must be positive"
	Weight *resource.Quantity `json:"weight,omitempty"`
}

// QueueStatus is written by the scheduler each cycle the figures change.
// Amounts use the resource names and units of spec.resources.
type QueueStatus struct {
	// Allocated is what the queue's running pods hold (an inner queue: the
	// sum of its leaves).
	//
	// +optional
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
	// FairShare is what the queue is entitled to now: its guarantee as far
	// as it has demand, plus its weighted part of the spare capacity.
	//
	// +optional
	FairShare corev1.ResourceList `json:"fairShare,omitempty"`
	// Pending is what the queue's waiting pods ask for.
	//
	// +optional
	Pending corev1.ResourceList `json:"pending,omitempty"`
	// Borrowed is what the queue holds above its guarantee.
	//
	// +optional
	Borrowed corev1.ResourceList `json:"borrowed,omitempty"`

	// Conditions: Accepted is True (reason Active) on a queue in the tree,
	// False (reason Invalid) with the precise problem otherwise.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// QueueList is a list of Queue objects.
//
// +kubebuilder:object:root=true
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}
