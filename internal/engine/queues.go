package engine

import (
	"reflect"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/queue"
)

// DefaultAging is the aging period inside a queue when Config.Aging is zero:
// a job gains one priority step per hour it waits.
const DefaultAging = queue.DefaultAging

// jobOrder yields the pending jobs (indexes into Snapshot.Pending) in the
// order the cycle considers them. It is asked again after every job, so an
// order may depend on what the cycle has placed so far.
type jobOrder interface {
	Next() (int, bool)
}

// fixedOrder is an Orderer's answer, walked once.
type fixedOrder struct {
	idx []int
	at  int
}

func (o *fixedOrder) Next() (int, bool) {
	if o.at >= len(o.idx) {
		return 0, false
	}
	o.at++
	return o.idx[o.at-1], true
}

// treeCache keeps the last tree built, so a cycle whose queues did not
// change does not validate them again. Build is a pure function of the
// specs, so plans do not depend on the cache.
type treeCache struct {
	specs    []queue.Spec
	tree     *queue.Tree
	problems []queue.Problem
}

func (c *treeCache) build(specs []queue.Spec) (*queue.Tree, []queue.Problem) {
	if c.tree == nil || !reflect.DeepEqual(c.specs, specs) {
		c.tree, c.problems = queue.Build(specs)
		c.specs = append([]queue.Spec(nil), specs...)
	}
	return c.tree, c.problems
}

// newQueueState resolves every job's queue and computes usage (of the
// running jobs the cycle's earlier steps left), demand and fair shares
// (queue.State). It returns nil when the snapshot has no queues:
// the cycle then runs exactly as without queue support.
func (e *Engine) newQueueState(s *Snapshot, running []RunningJob, view *cluster.State) *queue.State {
	if len(s.Queues) == 0 {
		return nil
	}
	tree, problems := e.trees.build(s.Queues)
	return queue.NewState(tree, problems, s, running, view, e.cfg.Aging)
}
