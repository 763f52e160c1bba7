package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks the rules the CRD schema and its CEL rules enforce on the
// API server (1 to MaxTopologyLevels levels; names are DNS labels, unique, and
// neither "cluster" nor "host"; node labels are label keys and unique), for
// callers that get a Topology by another path (a file, an older CRD). The
// error lists every problem, each with its field path.
func (t *Topology) Validate() error {
	return validateTopologySpec(&t.Spec, field.NewPath("spec")).ToAggregate()
}

func validateTopologySpec(s *TopologySpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	levels := path.Child("levels")
	switch n := len(s.Levels); {
	case n == 0:
		errs = append(errs, field.Required(levels, "at least one level"))
	case n > MaxTopologyLevels:
		errs = append(errs, field.TooMany(levels, n, MaxTopologyLevels))
	}
	names := make(map[string]bool, len(s.Levels))
	labels := make(map[string]bool, len(s.Levels))
	for i, l := range s.Levels {
		p := levels.Index(i)
		switch {
		case l.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case l.Name == LevelCluster || l.Name == LevelHost:
			errs = append(errs, field.Invalid(p.Child("name"), l.Name, "the level names cluster and host are reserved"))
		default:
			for _, msg := range validation.IsDNS1123Label(l.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), l.Name, msg))
			}
		}
		if l.Name != "" {
			if names[l.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), l.Name))
			}
			names[l.Name] = true
		}
		if l.NodeLabel == "" {
			errs = append(errs, field.Required(p.Child("nodeLabel"), ""))
			continue
		}
		for _, msg := range validation.IsQualifiedName(l.NodeLabel) {
			errs = append(errs, field.Invalid(p.Child("nodeLabel"), l.NodeLabel, msg))
		}
		if labels[l.NodeLabel] {
			errs = append(errs, field.Duplicate(p.Child("nodeLabel"), l.NodeLabel))
		}
		labels[l.NodeLabel] = true
	}
	return errs
}
