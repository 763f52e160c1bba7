package baseline

import (
	"fmt"
	"sort"
	"strings"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/queue"
)

// kueueQuota is Kueue v0.17.0's quota accounting for the queue tree of
// --queues, written the way a Kueue admin would write the same tree:
//
//   - each leaf queue is a ClusterQueue whose nominalQuota is the queue's
//     guarantee and whose borrowingLimit is its limit minus the guarantee
//     (no limit: unlimited borrowing);
//   - each inner queue is a Cohort (the Cohort API of hierarchical cohorts)
//     whose own resourceGroups hold the part of its guarantee its children
//     do not, with the same borrowingLimit rule;
//   - the root Cohort holds what no queue is guaranteed, so that the whole
//     cluster can be admitted, shared by every ClusterQueue.
//
// No queue sets a lendingLimit, so every node's unused quota is lent to its
// Cohort. available and addUsage follow pkg/cache/scheduler/resource_node.go
// (available, addUsage, removeUsage) with localQuota zero: a ClusterQueue
// may use, per resource, the least over its path to the root of what each
// node may still take (subtree quota plus borrowing limit, minus usage),
// and the root's subtree quota minus its usage. Quota is charged per GPU
// model (a ResourceFlavor per model), CPU and memory, as queue.DemandOf
// charges it, for the resources some queue names in a guarantee or limit;
// the others are left out of quota as Kueue's
// resources.excludeResourcePrefixes leaves them (else every ClusterQueue
// would borrow CPU it was never given a quota of).
type kueueQuota struct {
	nodes []quotaNode
	index map[string]int
	tree  *queue.Tree
	// managed are the resources under quota.
	managed map[cycle.Resource]bool
	// usedBy is each running job's charge and ClusterQueue, so preemption
	// can give it back.
	usedBy map[string]jobCharge
}

type quotaNode struct {
	name    string
	parent  int // -1 for the root Cohort
	nominal cycle.Amounts
	subtree cycle.Amounts // SubtreeQuota: own nominal plus the children's
	// borrow caps what the node may use beyond its subtree quota, per
	// resource it names; an absent resource borrows without limit.
	borrow  cycle.Amounts
	usage   cycle.Amounts
	reclaim bool
}

type jobCharge struct {
	cq     int
	charge cycle.Amounts
}

const rootCohort = 0

// newKueueQuota builds the tree with the usage of the running jobs, or nil
// when there are no queues (then one ClusterQueue holds the whole cluster
// and quota never binds before capacity does).
func newKueueQuota(s *engine.Snapshot, run *running) *kueueQuota {
	if len(s.Queues) == 0 {
		return nil
	}
	tree, _ := queue.Build(s.Queues)
	q := &kueueQuota{index: map[string]int{}, tree: tree, usedBy: map[string]jobCharge{}, managed: map[cycle.Resource]bool{}}
	q.nodes = append(q.nodes, quotaNode{name: cycle.RootQueue, parent: -1, nominal: cycle.Amounts{}, usage: cycle.Amounts{}})
	specs := map[string]cycle.QueueSpec{}
	var names []string
	for _, sp := range s.Queues {
		if sp.Name == "" || sp.Name == cycle.RootQueue {
			continue
		}
		if _, dup := specs[sp.Name]; dup {
			continue // queue.Build reports it; the first one counts
		}
		specs[sp.Name] = sp
		names = append(names, sp.Name)
		for _, a := range []cycle.Amounts{sp.Guarantee, sp.Limit} {
			for r := range a {
				q.managed[r] = true
			}
		}
		q.index[sp.Name] = len(q.nodes)
		q.nodes = append(q.nodes, quotaNode{name: sp.Name, nominal: sp.Guarantee.Clone(), usage: cycle.Amounts{}, reclaim: sp.Reclaim})
	}
	if q.nodes[0].nominal == nil {
		q.nodes[0].nominal = cycle.Amounts{}
	}
	children := make([][]int, len(q.nodes))
	for _, name := range names {
		i := q.index[name]
		p, ok := q.index[specs[name].Parent]
		if !ok || q.ancestorOf(i, p, specs) {
			p = rootCohort // an unknown parent or a cycle: queue.Build reports it
		}
		q.nodes[i].parent = p
		children[p] = append(children[p], i)
	}
	// A Cohort's own quota is what its guarantee adds to its children's.
	for i := 1; i < len(q.nodes); i++ {
		if len(children[i]) == 0 {
			continue
		}
		own := cycle.Amounts{}
		for r, v := range q.nodes[i].nominal {
			sum := int64(0)
			for _, c := range children[i] {
				sum += specs[q.nodes[c].name].Guarantee[r]
			}
			if v > sum {
				own[r] = v - sum
			}
		}
		q.nodes[i].nominal = own
	}
	var subtree func(i int) cycle.Amounts
	subtree = func(i int) cycle.Amounts {
		t := q.nodes[i].nominal.Clone()
		for _, c := range children[i] {
			for r, v := range subtree(c) {
				t[r] += v
			}
		}
		q.nodes[i].subtree = t
		return t
	}
	top := subtree(rootCohort)
	// The root Cohort holds the cluster's capacity beyond every guarantee.
	for r, v := range queue.CapacityOf(s.State) {
		if spare := v - top[r]; spare > 0 && q.managed[r] {
			q.nodes[rootCohort].nominal[r] += spare
			q.nodes[rootCohort].subtree[r] += spare
		}
	}
	for i := 1; i < len(q.nodes); i++ {
		limit := specs[q.nodes[i].name].Limit
		if len(limit) == 0 {
			continue
		}
		q.nodes[i].borrow = cycle.Amounts{}
		for r, v := range limit {
			q.nodes[i].borrow[r] = max(0, v-q.nodes[i].subtree[r])
		}
	}
	for _, j := range run.jobs {
		if j.gone {
			continue
		}
		if cq, ok := q.clusterQueue(j.queue, j.namespace); ok {
			c := q.quotaOf(queue.ChargeOfPods(s.State, j.pods))
			q.usedBy[string(j.id)] = jobCharge{cq: cq, charge: c}
			q.add(cq, c, 1)
		}
	}
	return q
}

// quotaOf keeps the resources under quota.
func (q *kueueQuota) quotaOf(c cycle.Amounts) cycle.Amounts {
	out := cycle.Amounts{}
	for r, v := range c {
		if q.managed[r] {
			out[r] = v
		}
	}
	return out
}

func (q *kueueQuota) ancestorOf(i, p int, specs map[string]cycle.QueueSpec) bool {
	for n, steps := p, 0; n > rootCohort && steps <= len(q.nodes); steps++ {
		if n == i {
			return true
		}
		next, ok := q.index[specs[q.nodes[n].name].Parent]
		if !ok {
			return false
		}
		n = next
	}
	return false
}

// clusterQueue resolves a job's queue as the engine does (its own, else the
// namespace's default) to a leaf, i.e. a ClusterQueue.
func (q *kueueQuota) clusterQueue(name, namespace string) (int, bool) {
	leaf, err := q.leaf(name, namespace)
	if err != nil {
		return 0, false
	}
	i, ok := q.index[leaf]
	return i, ok
}

func (q *kueueQuota) leaf(name, namespace string) (string, error) {
	if name == "" {
		return q.tree.DefaultQueue(namespace)
	}
	return name, q.tree.Admit(name, namespace)
}

// available is resource_node.go's available with no lending limits.
func (q *kueueQuota) available(i int, r cycle.Resource) int64 {
	n := &q.nodes[i]
	if n.parent < 0 {
		return n.subtree[r] - n.usage[r]
	}
	a := q.available(n.parent, r)
	if b, ok := n.borrow[r]; ok {
		a = min(a, n.subtree[r]-n.usage[r]+b)
	}
	return a
}

// potential is resource_node.go's potentialAvailable with no lending
// limits: what the node could take with nothing in use anywhere.
func (q *kueueQuota) potential(i int, r cycle.Resource) int64 {
	n := &q.nodes[i]
	if n.parent < 0 {
		return n.subtree[r]
	}
	a := q.potential(n.parent, r)
	if b, ok := n.borrow[r]; ok {
		a = min(a, n.subtree[r]+b)
	}
	return a
}

// aboveCapacity names the first resource (sorted) of which c is more than
// the ClusterQueue could take even with nothing in use (the flavor
// assigner's "> maximum capacity"), or "" when there is none: such a
// workload is never admitted unless the quotas change.
func (q *kueueQuota) aboveCapacity(cq int, c cycle.Amounts) string {
	for _, r := range c.Resources() {
		if m := max(0, q.potential(cq, r)); c[r] > m {
			return fmt.Sprintf("ClusterQueue %s: insufficient quota for %s: request (%d) > maximum capacity (%d)",
				q.nodes[cq].name, r, c[r], m)
		}
	}
	return ""
}

// shortfall names the first resource (sorted) the ClusterQueue cannot take
// c of, or "" when c fits (ClusterQueueSnapshot.Fits); a request above
// the maximum capacity is named first.
func (q *kueueQuota) shortfall(cq int, c cycle.Amounts) string {
	if why := q.aboveCapacity(cq, c); why != "" {
		return why
	}
	for _, r := range c.Resources() {
		if a := max(0, q.available(cq, r)); c[r] > a {
			return fmt.Sprintf("ClusterQueue %s: insufficient unused quota for %s: %d more needed (%d available)",
				q.nodes[cq].name, r, c[r]-a, a)
		}
	}
	return ""
}

// borrows reports whether admitting c would take the ClusterQueue past its
// nominal quota (ClusterQueueSnapshot.BorrowingWith).
func (q *kueueQuota) borrows(cq int, c cycle.Amounts) bool {
	for r, v := range c {
		if q.nodes[cq].usage[r]+v > q.nodes[cq].nominal[r] {
			return true
		}
	}
	return false
}

// add charges (sign 1) or refunds (-1) c to a ClusterQueue and, as nothing
// is kept local, to every Cohort above it.
func (q *kueueQuota) add(cq int, c cycle.Amounts, sign int64) {
	for i := cq; i >= 0; i = q.nodes[i].parent {
		for r, v := range c {
			q.nodes[i].usage[r] += sign * v
		}
	}
}

// admitted charges a job that was just bound.
func (q *kueueQuota) admitted(id string, cq int, c cycle.Amounts) {
	c = q.quotaOf(c)
	q.usedBy[id] = jobCharge{cq: cq, charge: c}
	q.add(cq, c, 1)
}

// release and hold move a running job's charge with its capacity.
func (q *kueueQuota) release(view *cluster.State, j *runJob) {
	release(view, j)
	if u, ok := q.usedBy[string(j.id)]; ok {
		q.add(u.cq, u.charge, -1)
	}
}

func (q *kueueQuota) hold(view *cluster.State, j *runJob) {
	hold(view, j)
	if u, ok := q.usedBy[string(j.id)]; ok {
		q.add(u.cq, u.charge, 1)
	}
}

// preemptAttempt is one try of Kueue's classicalPreemptions: the
// candidates, and whether the job may borrow once they are gone.
type preemptAttempt struct {
	cands  []*runJob
	borrow bool
}

// attempts are Kueue's preemption tries for a job of ClusterQueue cq at
// priority prio (pkg/scheduler/preemption: classicalPreemptions,
// findCandidates; borrowWithinCohort is Never, Kueue's default):
// withinClusterQueue: LowerPriority takes the ClusterQueue's own workloads
// of lower priority, and the job may then borrow; a queue that may reclaim
// (reclaimWithinCohort: Any) and is under its nominal quota first tries
// workloads of other ClusterQueues that are borrowing as well, and then
// must fit within its own nominal quota (no borrowing), so two queues never
// take the same capacity back and forth.
func (q *kueueQuota) attempts(run *running, cq int, prio int32, demand cycle.Amounts) []preemptAttempt {
	var own, others []*runJob
	for _, j := range run.jobs {
		u, ok := q.usedBy[string(j.id)]
		if j.gone || !ok {
			continue
		}
		switch {
		case u.cq == cq && j.priority < prio:
			own = append(own, j)
		case u.cq != cq && q.borrowing(u.cq):
			others = append(others, j)
		}
	}
	withinCQ := preemptAttempt{cands: own, borrow: true}
	if !q.nodes[cq].reclaim || len(others) == 0 || !q.underNominal(cq, demand) {
		return []preemptAttempt{withinCQ}
	}
	return []preemptAttempt{{cands: append(others, own...)}, withinCQ}
}

// underNominal is queueUnderNominalInResourcesNeedingPreemption: the
// ClusterQueue uses less than its nominal quota of every resource the job
// asks for.
func (q *kueueQuota) underNominal(cq int, demand cycle.Amounts) bool {
	for r := range demand {
		if q.nodes[cq].usage[r] >= q.nodes[cq].nominal[r] {
			return false
		}
	}
	return true
}

// otherQueueFirst is CandidatesOrdering's first key: workloads of other
// ClusterQueues before the preemptor's own.
func (q *kueueQuota) otherQueueFirst(cq int) func(*runJob) int {
	return func(j *runJob) int {
		if u, ok := q.usedBy[string(j.id)]; ok && u.cq != cq {
			return 0
		}
		return 1
	}
}

// borrowing reports whether a ClusterQueue uses more than its nominal quota
// of some resource.
func (q *kueueQuota) borrowing(cq int) bool {
	for r, v := range q.nodes[cq].usage {
		if v > q.nodes[cq].nominal[r] {
			return true
		}
	}
	return false
}

// orderKueue sorts the pending jobs as Kueue's classical iterator sorts the
// heads of its queues (pkg/scheduler/scheduler.go, makeClassicalIterator):
// jobs within their ClusterQueue's nominal quota before jobs that would
// borrow, then by priority, then FIFO. order is byPriority's, which already
// holds the last two.
func (q *kueueQuota) orderKueue(s *engine.Snapshot, order []int) []int {
	if q == nil {
		return order
	}
	borrows := map[int]bool{}
	for _, i := range order {
		pj := s.Pending[i]
		if cq, ok := q.clusterQueue(pj.Job.Queue, pj.Job.Namespace); ok {
			borrows[i] = q.borrows(cq, q.quotaOf(queue.DemandOf(s.State, pj)))
		}
	}
	out := append([]int(nil), order...)
	sort.SliceStable(out, func(a, b int) bool { return !borrows[out[a]] && borrows[out[b]] })
	return out
}

// quotaReason is the pending reason of a job its ClusterQueue cannot admit.
func quotaReason(msg string, pods int) engine.Reason {
	return engine.Reason{Verdict: placement.WaitQuota, Level: cluster.LevelCluster, Message: msg, Pods: pods}
}

// inadmissible is the reason of a job whose queue is no ClusterQueue.
func inadmissible(err error) engine.Reason {
	return engine.Reason{Verdict: placement.Refused, Level: cluster.LevelCluster,
		Message: "no ClusterQueue admits the job: " + strings.TrimPrefix(err.Error(), "queue: ")}
}
