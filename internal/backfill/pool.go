package backfill

import (
	"fmt"
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
)

// Pool and PoolAccess are snapshot inputs; they live in internal/cycle,
// below every policy, so the Snapshot can carry them.
type (
	Pool       = cycle.Pool
	PoolAccess = cycle.PoolAccess
	History    = cycle.History
)

const (
	PoolClosed      = cycle.PoolClosed
	PoolPreemptible = cycle.PoolPreemptible
)

// ResolvedPool is a valid pool with its nodes.
type ResolvedPool struct {
	Pool
	Nodes  []int
	member map[int]bool
}

// Has reports whether node n is in the pool.
func (r *ResolvedPool) Has(n int) bool { return r.member[n] }

// Resolve validates pools and finds their nodes. Invalid pools are left out
// with a problem line each (sorted), so one bad pool does not stop a cycle.
func Resolve(s *cluster.State, pools []Pool) ([]*ResolvedPool, []string) {
	var out []*ResolvedPool
	var problems []string
	for _, p := range pools {
		if err := p.Validate(); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if p.Others == "" {
			p.Others = PoolClosed
		}
		r := &ResolvedPool{Pool: p, Nodes: p.Nodes(s), member: map[int]bool{}}
		if len(r.Nodes) == 0 {
			problems = append(problems, fmt.Sprintf("pool %s: no node matches it", p.Name))
			continue
		}
		held := 0
		for _, n := range r.Nodes {
			r.member[n] = true
			for _, d := range s.Node(n).Devices {
				if p.Model == "" || d.Model == p.Model {
					held++
				}
			}
		}
		if len(p.NodeLabels) == 0 && held < p.GPUs {
			// Still held: what the cluster has of it is better than nothing.
			problems = append(problems, fmt.Sprintf("pool %s: holds %d of its %d GPUs (the cluster has no more of the model)", p.Name, held, p.GPUs))
		}
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	sort.Strings(problems)
	return out, problems
}
