// The markers below are package-level markers for controller-gen (see
// `make generate`): deepcopy for every type of the package, and the API group.

// +kubebuilder:object:generate=true
// +groupName=corral.dev

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of corral's CRDs.
const GroupName = "corral.dev"

// GroupVersion is the group and version of this package's types.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

var (
	// SchemeBuilder registers the CRD types (Topology, Queue and their lists). The
	// SchedulerConfiguration is a file, not an API object, and is not
	// registered: read it with LoadConfig.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this group-version's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// The resources (URL path segments) of the CRDs. They carry the project's
// name because Kueue and Volcano, often installed beside corral, have
// "queues" and "topologies" of their own: kubectl would resolve the bare
// words to whichever group it finds first (see docs/api.md).
const (
	QueuePlural    = "corralqueues"
	TopologyPlural = "corraltopologies"
)

// Resource returns the group-qualified resource, e.g. Resource(TopologyPlural).
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Topology{}, &TopologyList{}, &Queue{}, &QueueList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
