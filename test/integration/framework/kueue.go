package framework

import (
	"context"
	"fmt"
	"strings"
)

// kueueIntegration is one of Kueue's job integrations the framework
// enables: the framework name in Kueue's Configuration, and the resource
// its webhooks act on.
type kueueIntegration struct {
	framework      string
	group, version string
	resource       string
}

// kueueIntegrations are enabled when their resource is served: batch/v1
// Jobs always, JobSets and RayClusters/RayJobs when their controllers' CRDs
// are installed (start Kueue after them). Kueue's pod-based integrations
// (pod, statefulset, deployment, leaderworkerset) are left off: their
// webhooks act on every pod, Deployment and StatefulSet of the cluster and
// fail those writes whenever Kueue is down.
var kueueIntegrations = []kueueIntegration{
	{"batch/job", "batch", "v1", "jobs"},
	{"jobset.x-k8s.io/jobset", "jobset.x-k8s.io", "v1alpha2", "jobsets"},
	{"ray.io/raycluster", "ray.io", "v1", "rayclusters"},
	{"ray.io/rayjob", "ray.io", "v1", "rayjobs"},
}

// kueueConfig is the part of Kueue's Configuration beyond what every
// controller gets, and which of its webhooks to register: those for its
// own resources and for the integrations enabled. Its visibility server
// (an aggregated API on a fixed port, 8082) is off: nothing here reads it,
// and two clusters on one machine would fight over the port.
func (c *Cluster) kueueConfig(ctx context.Context) (extra string, keep func(rules []any) bool, err error) {
	served := func(group, version, resource string) bool {
		list, err := c.Client.Discovery().ServerResourcesForGroupVersion(group + "/" + version)
		if err != nil {
			return false
		}
		for _, r := range list.APIResources {
			if r.Name == resource {
				return true
			}
		}
		return false
	}
	enabled := map[string]bool{"kueue.x-k8s.io": true} // group/resource or group alone
	var frameworks []string
	for _, in := range kueueIntegrations {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		if !served(in.group, in.version, in.resource) {
			continue
		}
		frameworks = append(frameworks, fmt.Sprintf("  - %q", in.framework))
		enabled[in.group+"/"+in.resource] = true
	}
	extra = "integrations:\n  frameworks:\n" + strings.Join(frameworks, "\n") + "\n" +
		"featureGates:\n  VisibilityOnDemand: false\n"
	keep = func(rules []any) bool {
		for _, r := range rules {
			m, _ := r.(map[string]any)
			groups, _ := m["apiGroups"].([]any)
			resources, _ := m["resources"].([]any)
			for _, g := range groups {
				if enabled[fmt.Sprint(g)] {
					return true
				}
				for _, res := range resources {
					if enabled[fmt.Sprint(g)+"/"+fmt.Sprint(res)] {
						return true
					}
				}
			}
		}
		return false
	}
	return extra, keep, nil
}
