package engine

import (
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/queue"
)

// What drivers ask the engine outside a cycle. Drivers import the engine,
// the contract and the model only (internal/layering): a decision a driver
// needs between cycles is made here, by the policy that makes it inside
// one, so both drivers and the cycle agree.

// QueueLeaves lists the queues of specs that take jobs (the leaves of the
// tree the cycle builds), in tree order; queues the tree leaves out are not
// listed.
func QueueLeaves(specs []cycle.QueueSpec) []string {
	tree, _ := queue.Build(specs)
	return tree.Leaves()
}

// ReplacementPin is where the replacement of a failed rank goes when the
// rank left without the cycle remediating it (another component deleted
// it): the lowest domain above the hosts holding every node of the job's
// healthy ranks, as health's ReplaceRanks pins it. False when they share
// nothing below the cluster, or none is given.
func ReplacementPin(st *cluster.State, nodes []int) (Pin, bool) {
	near := st.HostLevel() - 1
	if len(nodes) == 0 || near <= 0 {
		return Pin{}, false
	}
	d := st.Domain(health.LowestCommon(st, nodes, near))
	if d.Level == 0 {
		return Pin{}, false
	}
	return Pin{Level: st.Levels()[d.Level], Domain: d.Name}, true
}
