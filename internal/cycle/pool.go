package cycle

import (
	"fmt"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// PoolAccess says what jobs outside a pool's class may do with it.
type PoolAccess string

const (
	// PoolClosed: only the class may use the pool; it stays idle otherwise.
	PoolClosed PoolAccess = "Closed"
	// PoolPreemptible: preemptible jobs of other classes may backfill the
	// pool; they are evicted as soon as a job of the class needs the room.
	PoolPreemptible PoolAccess = "Preemptible"
)

// Pool is capacity held for a class of jobs, kept even when idle.
type Pool struct {
	Name string
	// Class is the workload.Job.Class the pool is held for.
	Class string
	// NodeLabels selects the pool's nodes: every node carrying all of them.
	NodeLabels map[string]string
	// GPUs and Model select by count instead: whole nodes with GPUs of Model
	// (any model if empty), in topology order, until they hold GPUs GPUs.
	// Topology order keeps the pool in as few racks as possible and stable
	// from one cycle to the next. Used when NodeLabels is empty.
	GPUs  int
	Model string
	// Others is PoolClosed (the default) or PoolPreemptible.
	Others PoolAccess
}

// Validate reports a pool the engine cannot honour.
func (p Pool) Validate() error {
	switch {
	case p.Name == "":
		return fmt.Errorf("pool without a name")
	case p.Class == "":
		return fmt.Errorf("pool %s: no class", p.Name)
	case len(p.NodeLabels) == 0 && p.GPUs <= 0:
		return fmt.Errorf("pool %s: give node labels or a GPU count", p.Name)
	case p.Others != "" && p.Others != PoolClosed && p.Others != PoolPreemptible:
		return fmt.Errorf("pool %s: others %q is neither Closed nor Preemptible", p.Name, p.Others)
	}
	return nil
}

// Admits reports whether j may be placed on the pool's nodes.
func (p Pool) Admits(j *workload.Job) bool {
	if j.Class == p.Class {
		return true
	}
	return p.Others == PoolPreemptible && j.Preemptible
}

// Nodes resolves the pool to node indexes of s, ascending.
func (p Pool) Nodes(s *cluster.State) []int {
	var out []int
	if len(p.NodeLabels) > 0 {
		for n := 0; n < s.NumNodes(); n++ {
			if (workload.Request{NodeLabels: p.NodeLabels}).NodeMatches(s.Node(n).Labels) {
				out = append(out, n)
			}
		}
		return out
	}
	got := 0
	for n := 0; n < s.NumNodes() && got < p.GPUs; n++ {
		k := 0
		for _, d := range s.Node(n).Devices {
			if p.Model == "" || d.Model == p.Model {
				k++
			}
		}
		if k > 0 {
			out = append(out, n)
			got += k
		}
	}
	return out
}
