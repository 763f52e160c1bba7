package engine

import (
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
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

// MixOf is Snapshot.Mix as both drivers fill it, so that it has one
// meaning: the pods present now, each counted once: the waiting pods of
// the pending jobs (every pod when Waiting is nil) and the pods the running
// jobs hold. Not the arrivals so far: a mix read from the snapshot is what
// a restarted scheduler rebuilds from the cluster, and it follows the
// workload as it changes instead of averaging over the whole past. At most
// max shapes, the most frequent (max <= 0: all).
func MixOf(pending []PendingJob, running []RunningJob, max int) placement.Mix {
	var c placement.MixCounter
	observe := func(j *workload.Job, set, pods int) {
		if set >= 0 && set < len(j.PodSets) && pods > 0 {
			c.Observe(j.PodSets[set].Request, pods)
		}
	}
	for _, pj := range pending {
		if pj.Waiting == nil {
			for i, ps := range pj.Job.PodSets {
				observe(pj.Job, i, ps.Count)
			}
			continue
		}
		perSet := map[int]int{}
		for _, ref := range pj.Waiting {
			perSet[ref.PodSet]++
		}
		for i := range pj.Job.PodSets {
			observe(pj.Job, i, perSet[i])
		}
	}
	for _, rj := range running {
		perSet := map[int]int{}
		for _, pb := range rj.Pods {
			perSet[pb.Pod.PodSet]++
		}
		for i := range rj.Job.PodSets {
			observe(rj.Job, i, perSet[i])
		}
	}
	return c.Mix(max)
}
