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

// Resource returns the group-qualified resource, e.g. Resource("topologies").
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Topology{}, &TopologyList{}, &Queue{}, &QueueList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
