package workload

import (
	"fmt"
	"strings"
)

// NodeFilter limits the nodes a pod may use to a set the driver computed:
// the Kubernetes adapter matches taints against tolerations, node affinity
// (nodeSelector included) and pod affinity to running pods with
// kube-scheduler's own helpers, which the engine cannot, and hands over the
// result as plain data. Pods with equal constraints share one filter, so
// the work is done once per distinct constraint, not once per pod.
type NodeFilter struct {
	// Key identifies the filter within one snapshot: filters with equal
	// keys have equal Nodes.
	Key string
	// Nodes names the nodes the pod may use, in name order.
	Nodes []string
	// Excluded says why the other nodes may not be used: one entry per
	// cause, most nodes first (the first failed check of a node counts).
	Excluded []Exclusion
}

// NodePreference is a pod's soft node preferences as a score per node,
// computed by the driver (the Kubernetes adapter uses kube-scheduler's own
// helpers), handed over as plain data like NodeFilter.
type NodePreference struct {
	// Key identifies the preference within one snapshot: equal keys, equal
	// scores.
	Key string
	// Scores gives the nodes that score above the least preferred ones;
	// a node it does not name scores 0.
	Scores map[string]int64
}

// Exclusion is one reason nodes are not eligible, with how many.
type Exclusion struct {
	Nodes int
	// Cause completes "N nodes ...", e.g. "have taint
	// nvidia.com/gpu=present:NoSchedule that the pod does not tolerate".
	Cause string
}

// Why renders the exclusions as one clause: "4 nodes have taint ... that
// the pod does not tolerate; 2 nodes do not match its node affinity".
func (f *NodeFilter) Why() string {
	parts := make([]string, 0, len(f.Excluded))
	for _, e := range f.Excluded {
		noun, cause := "nodes", e.Cause
		if e.Nodes == 1 {
			// Causes are written for the plural: "have", "do not", "lack".
			noun = "node"
			for _, v := range [][2]string{{"have ", "has "}, {"do not ", "does not "}, {"lack ", "lacks "}, {"are ", "is "}} {
				if strings.HasPrefix(cause, v[0]) {
					cause = v[1] + cause[len(v[0]):]
					break
				}
			}
		}
		parts = append(parts, fmt.Sprintf("%d %s %s", e.Nodes, noun, cause))
	}
	return strings.Join(parts, "; ")
}
