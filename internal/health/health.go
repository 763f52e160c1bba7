// Package health makes device and node health part of the engine's model:
// which running pods sit on failed devices or nodes, what each job's
// remediation policy does about it, spare capacity held back for fast
// replacement, and suspect nodes that ordinary placement avoids. Cycle is
// the health step of one scheduling cycle, run against the cycle's ledger
// (the CycleLedger interface declared here). It is engine code: no
// Kubernetes, no I/O, no clock (time comes in the input).
package health

import (
	"fmt"
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
)

// Failure, Spare and Suspect are the health inputs of a snapshot; they live
// in internal/cycle, below every policy, so the Snapshot can carry them.
type (
	Failure = cycle.Failure
	Spare   = cycle.Spare
	Suspect = cycle.Suspect
)

// DefaultSuspectLimit is the number of admission rejections after which a
// suspect node gets nothing more until its suspicion lapses.
const DefaultSuspectLimit = 3

// Index finds the failure records of nodes and devices.
type Index struct {
	node map[int]Failure
	dev  map[[2]int]Failure
}

// NewIndex indexes failures against the cluster; records naming unknown
// nodes or devices are returned as problems (the cluster changed under the
// driver), never a panic.
func NewIndex(s *cluster.State, failures []Failure) (*Index, []string) {
	ix := &Index{node: map[int]Failure{}, dev: map[[2]int]Failure{}}
	var problems []string
	for _, f := range failures {
		n, ok := s.NodeIndex(f.Node)
		if !ok {
			problems = append(problems, "unknown node "+f.Node)
			continue
		}
		if f.Device == "" {
			if old, seen := ix.node[n]; !seen || f.Since.Before(old.Since) {
				ix.node[n] = f
			}
			continue
		}
		k := deviceIndex(s.Node(n), f.Device)
		if k < 0 {
			problems = append(problems, fmt.Sprintf("unknown device %s on node %s", f.Device, f.Node))
			continue
		}
		if old, seen := ix.dev[[2]int{n, k}]; !seen || f.Since.Before(old.Since) {
			ix.dev[[2]int{n, k}] = f
		}
	}
	sort.Strings(problems)
	return ix, problems
}

func deviceIndex(n *cluster.Node, id string) int {
	for k := range n.Devices {
		if n.Devices[k].ID == id {
			return k
		}
	}
	return -1
}

// podFailures lists what failed under a pod on node n holding devices:
// the node itself, or any of its devices the state marks unhealthy (with
// the record's detail when the driver gave one).
func (ix *Index) podFailures(s *cluster.State, n int, a cluster.Alloc) []Failure {
	if f, ok := ix.node[n]; ok {
		return []Failure{f}
	}
	var out []Failure
	for _, d := range a.Devices {
		if s.DeviceHealthy(n, d.Device) {
			continue
		}
		f, ok := ix.dev[[2]int{n, d.Device}]
		if !ok {
			f = Failure{Node: s.Node(n).Name, Device: s.Node(n).Devices[d.Device].ID}
		}
		out = append(out, f)
	}
	return out
}
