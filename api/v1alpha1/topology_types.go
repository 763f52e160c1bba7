package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reserved topology level names: corral adds them itself, around the admin's
// levels. "cluster" is the whole set of managed nodes; "host" is one node.
const (
	LevelCluster = "cluster"
	LevelHost    = "host"
)

// MaxTopologyLevels is the most levels a Topology may define (besides the
// implicit cluster and host levels).
const MaxTopologyLevels = 8

// The Accepted condition of a Topology: whether the scheduler uses it. The
// scheduler sets it; these are its type and reasons.
const (
	// TopologyConditionAccepted is True on the Topology the scheduler uses.
	TopologyConditionAccepted = "Accepted"

	// TopologyReasonInUse (status True): the scheduler builds its topology
	// tree from this object.
	TopologyReasonInUse = "InUse"
	// TopologyReasonInvalid (status False): the spec breaks a rule of
	// Topology.Validate (possible only where the CRD's validation was
	// bypassed, e.g. an older CRD).
	TopologyReasonInvalid = "Invalid"
	// TopologyReasonNotSelected (status False): the configuration's
	// topologyName names another Topology, or several exist and none is named.
	TopologyReasonNotSelected = "NotSelected"
)

// The resource is corraltopologies, not topologies: Kueue's Topology
// (topology-aware scheduling) is "topologies" too.

// Topology defines the levels of the cluster's network topology as node
// labels, from the widest level to the narrowest. Nodes with the same value
// of a level's label form one domain of that level; corral places a gang in
// the narrowest domain that holds it. The levels "cluster" (above the first
// level) and "host" (below the last) are implicit.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=corraltopologies,singular=corraltopology,scope=Cluster,shortName=topo,categories=corral
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].reason`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Topology struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TopologySpec `json:"spec"`
	// +optional
	Status TopologyStatus `json:"status,omitempty"`
}

// TopologySpec lists the topology levels.
type TopologySpec struct {
	// Levels, ordered from the widest (e.g. block) to the narrowest (e.g.
	// nvlink-domain). Names and node labels are unique.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(l, self.exists_one(m, m.name == l.name))",message="level names must be unique"
	// +kubebuilder:validation:XValidation:rule="self.all(l, self.exists_one(m, m.nodeLabel == l.nodeLabel))",message="level node labels must be unique"
	Levels []TopologyLevel `json:"levels"`
}

// TopologyLevel is one level of the topology: a name users write in their
// jobs' topology annotations, and the node label whose values are its domains.
type TopologyLevel struct {
	// Name of the level, a DNS label (e.g. "rack"). "cluster" and "host" are
	// reserved: corral adds those levels itself.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'cluster' && self != 'host'",message="the level names cluster and host are reserved"
	Name string `json:"name"`

	// NodeLabel is the node label key whose value names the node's domain at
	// this level (e.g. "corral.dev/rack", "nvidia.com/gpu.clique").
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="nodeLabel must be a valid label key ([prefix/]name)"
	NodeLabel string `json:"nodeLabel"`
}

// TopologyStatus is written by the scheduler.
type TopologyStatus struct {
	// Conditions of the Topology, set by the scheduler: Accepted is True
	// (reason InUse) on the Topology it uses, and False (reason Invalid or
	// NotSelected) on the others.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Nodes is the number of nodes corral manages that carry the label of
	// every level.
	//
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
}

// TopologyList is a list of Topology objects.
//
// +kubebuilder:object:root=true
type TopologyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Topology `json:"items"`
}
