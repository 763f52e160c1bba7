package engine

import (
	"fmt"
	"reflect"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

// DefaultAging is the aging period inside a queue when Config.Aging is zero:
// a job gains one priority step per hour it waits.
const DefaultAging = time.Hour

// jobOrder yields the pending jobs (indexes into Snapshot.Pending) in the
// order the cycle considers them. It is asked again after every job, so an
// order may depend on what the cycle has placed so far.
type jobOrder interface {
	next() (int, bool)
}

// fixedOrder is an Orderer's answer, walked once.
type fixedOrder struct {
	idx []int
	at  int
}

func (o *fixedOrder) next() (int, bool) {
	if o.at >= len(o.idx) {
		return 0, false
	}
	o.at++
	return o.idx[o.at-1], true
}

// queueState is the cycle's view of the queue tree: which leaf each job
// belongs to, what each queue holds and asks for, and its fair share. It is
// built once per cycle and updated as the cycle binds and evicts, so the DRF
// order and the limits see the cycle's own decisions.
type queueState struct {
	tree     *queue.Tree
	problems []queue.Problem
	specs    map[string]queue.Spec // every queue of the tree, by name
	capacity queue.Amounts
	// usage is what running (and this cycle's bound) jobs hold, for every
	// queue of the tree: a leaf's own, an inner queue's its leaves' sum.
	usage  map[string]queue.Amounts
	demand map[string]queue.Amounts // leaves: running + pending
	fair   map[string]queue.Amounts
	// leafOf is each pending job's leaf ("" when refused); runningLeaf the
	// same for running jobs (jobs whose queue is refused are charged nowhere).
	leafOf      []string
	runningLeaf map[workload.JobID]string
	refused     map[int]Reason
	// jobs lists each leaf's pending jobs in their in-queue order; cursor is
	// how many the cycle has taken.
	jobs   map[string][]int
	cursor map[string]int
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

// newQueueState resolves every job's queue and computes usage, demand and
// fair shares. It returns nil when the snapshot has no queues: the cycle then
// runs exactly as without queue support.
func (e *Engine) newQueueState(s *Snapshot, view *cluster.State) *queueState {
	if len(s.Queues) == 0 {
		return nil
	}
	q := &queueState{specs: map[string]queue.Spec{}, usage: map[string]queue.Amounts{},
		demand: map[string]queue.Amounts{}, runningLeaf: map[workload.JobID]string{},
		refused: map[int]Reason{}, jobs: map[string][]int{}, cursor: map[string]int{}}
	q.tree, q.problems = e.trees.build(s.Queues)
	for _, name := range q.tree.Queues() {
		spec, _ := q.tree.Spec(name)
		q.specs[name] = spec
		q.usage[name] = queue.Amounts{}
	}
	q.capacity = capacityOf(view)
	for _, rj := range s.Running {
		leaf, err := q.leaf(rj.Job)
		if err != nil {
			continue // counted nowhere: its queue vanished while it ran
		}
		q.runningLeaf[rj.Job.ID] = leaf
		c := chargeOfPods(view, rj.Pods)
		q.charge(leaf, c, +1)
		addTo(q.demandOf(leaf), c)
	}
	q.leafOf = make([]string, len(s.Pending))
	for i, pj := range s.Pending {
		leaf, err := q.leaf(pj.Job)
		if err != nil {
			q.refused[i] = Reason{Verdict: placement.Refused, Level: "queue", Message: err.Error()}
			continue
		}
		q.leafOf[i] = leaf
		addTo(q.demandOf(leaf), demandOf(view, pj))
		q.jobs[leaf] = append(q.jobs[leaf], i)
	}
	q.fair = q.tree.FairShare(q.capacity, q.demand)
	aging := e.cfg.Aging
	if aging == 0 {
		aging = DefaultAging
	}
	for leaf, idx := range q.jobs {
		jobs := make([]*workload.Job, len(idx))
		for k, i := range idx {
			jobs[k] = s.Pending[i].Job
		}
		ordered := make([]int, len(idx))
		for k, o := range queue.OrderJobs(jobs, s.Now, aging) {
			ordered[k] = idx[o]
		}
		q.jobs[leaf] = ordered
	}
	return q
}

// leaf resolves a job's queue: the one it names, else its namespace's
// default, and checks that the queue admits it.
func (q *queueState) leaf(j *workload.Job) (string, error) {
	if j.Queue == "" {
		return q.tree.DefaultQueue(j.Namespace)
	}
	if err := q.tree.Admit(j.Queue, j.Namespace); err != nil {
		return "", err
	}
	return j.Queue, nil
}

func (q *queueState) demandOf(leaf string) queue.Amounts {
	d := q.demand[leaf]
	if d == nil {
		d = queue.Amounts{}
		q.demand[leaf] = d
	}
	return d
}

// charge adds (sign +1) or takes back (-1) amounts from a leaf and every
// queue above it.
func (q *queueState) charge(leaf string, c queue.Amounts, sign int64) {
	for name := leaf; name != "" && name != queue.RootName; name = q.specs[name].Parent {
		u := q.usage[name]
		if u == nil {
			return
		}
		for r, v := range c {
			u[r] += sign * v
			if u[r] == 0 {
				delete(u, r)
			}
		}
	}
}

// next is the DRF order: the leaf furthest below its fair share (owed
// guarantee first) gives its next job; usage moves as the cycle binds, so
// queues take turns. Jobs of refused queues are not yielded at all.
func (q *queueState) next() (int, bool) {
	for _, leaf := range q.tree.Order(q.leafUsage(), q.fair) {
		if c := q.cursor[leaf]; c < len(q.jobs[leaf]) {
			q.cursor[leaf] = c + 1
			return q.jobs[leaf][c], true
		}
	}
	return 0, false
}

func (q *queueState) leafUsage() map[string]queue.Amounts {
	out := make(map[string]queue.Amounts, len(q.jobs))
	for _, leaf := range q.tree.Leaves() {
		out[leaf] = q.usage[leaf]
	}
	return out
}

// overLimit says which queue on the leaf's path would pass its limit if it
// took c more, or "" when none would.
func (q *queueState) overLimit(leaf string, c queue.Amounts) string {
	for name := leaf; name != "" && name != queue.RootName; name = q.specs[name].Parent {
		spec := q.specs[name]
		for _, r := range c.Resources() {
			lim, ok := spec.Limit[r]
			if !ok || c[r] <= 0 {
				continue
			}
			if used := q.usage[name][r]; used+c[r] > lim {
				return fmt.Sprintf("queue %q would pass its limit of %s: %s held + %s asked > %s",
					name, r, amountText(r, used), amountText(r, c[r]), amountText(r, lim))
			}
		}
	}
	return ""
}

// statuses reports every queue after the cycle, in tree order, then the
// queues left out of the tree with their problem.
func (q *queueState) statuses(s *Snapshot, view *cluster.State, pendingLeft []Pending) []QueueStatus {
	waiting := map[workload.JobID]bool{}
	for _, p := range pendingLeft {
		waiting[p.Job] = true
	}
	pending := map[string]queue.Amounts{}
	for i, pj := range s.Pending {
		if leaf := q.leafOf[i]; leaf != "" && waiting[pj.Job.ID] {
			for name := leaf; name != "" && name != queue.RootName; name = q.specs[name].Parent {
				if pending[name] == nil {
					pending[name] = queue.Amounts{}
				}
				addTo(pending[name], demandOf(view, pj))
			}
		}
	}
	var out []QueueStatus
	for _, st := range q.tree.Status(q.leafUsage(), q.fair) {
		p := pending[st.Queue]
		if p == nil {
			p = queue.Amounts{}
		}
		out = append(out, QueueStatus{Name: st.Queue, Allocated: st.Allocated, FairShare: st.FairShare,
			Pending: p, Borrowed: st.Borrowed})
	}
	seen := map[string]bool{}
	for _, p := range q.problems {
		if seen[p.Queue] {
			continue
		}
		seen[p.Queue] = true
		out = append(out, QueueStatus{Name: p.Queue, Allocated: queue.Amounts{}, FairShare: queue.Amounts{},
			Pending: queue.Amounts{}, Borrowed: queue.Amounts{}, Problem: p.Reason})
	}
	return out
}

// capacityOf is what fair share divides: healthy GPUs per model, CPU and
// memory of schedulable nodes.
func capacityOf(s *cluster.State) queue.Amounts {
	c := queue.Amounts{}
	for n := 0; n < s.NumNodes(); n++ {
		if !s.Schedulable(n) {
			continue
		}
		node := s.Node(n)
		c[queue.CPU] += node.CPUMilli
		c[queue.Memory] += node.MemMiB
		for k, d := range node.Devices {
			if s.DeviceHealthy(n, k) {
				c[queue.GPU(d.Model)] += workload.MilliPerGPU
			}
		}
	}
	return c
}

// chargeOfPods is what bound pods hold, with GPUs charged to their model.
func chargeOfPods(s *cluster.State, pods []PodBind) queue.Amounts {
	c := queue.Amounts{}
	for _, p := range pods {
		addAlloc(c, s, p.NodeIndex, p.Alloc)
	}
	return c
}

func chargeOfAssignments(s *cluster.State, as []placement.Assignment) queue.Amounts {
	c := queue.Amounts{}
	for _, a := range as {
		addAlloc(c, s, a.Node, a.Alloc)
	}
	return c
}

func addAlloc(c queue.Amounts, s *cluster.State, n int, a cluster.Alloc) {
	c[queue.CPU] += a.CPUMilli
	c[queue.Memory] += a.MemMiB
	if n < 0 || n >= s.NumNodes() {
		return
	}
	node := s.Node(n)
	for _, d := range a.Devices {
		if d.Device >= 0 && d.Device < len(node.Devices) {
			c[queue.GPU(node.Devices[d.Device].Model)] += int64(d.Milli)
		}
	}
}

// demandOf is what a pending job's waiting pods ask for. A pod that accepts
// several GPU models is charged to the accepted model with the most GPUs in
// the cluster: demand only steers fair share, and the model a pod lands on
// is known once it is placed (limits are checked then).
func demandOf(s *cluster.State, pj PendingJob) queue.Amounts {
	c := queue.Amounts{}
	waiting := map[workload.PodRef]bool{}
	for _, r := range pj.Waiting {
		waiting[r] = true
	}
	pj.Job.EachPod(func(ref workload.PodRef, r workload.Request) {
		if pj.Waiting != nil && !waiting[ref] {
			return
		}
		c[queue.CPU] += max(0, r.CPUMilli)
		c[queue.Memory] += max(0, r.MemMiB)
		if g := r.GPUMilliTotal(); g > 0 {
			if m := demandModel(s, r); m != "" {
				c[queue.GPU(m)] += g
			}
		}
	})
	for r, v := range c {
		if v == 0 {
			delete(c, r)
		}
	}
	return c
}

func demandModel(s *cluster.State, r workload.Request) string {
	best, bestGPUs := "", -1
	for i, m := range s.Models() {
		if !r.AcceptsModel(m) {
			continue
		}
		if g := s.DomainCapacityGPUs(0, cluster.ModelMask(1)<<uint(i)); g > bestGPUs {
			best, bestGPUs = m, g
		}
	}
	return best
}

func addTo(dst, src queue.Amounts) {
	for r, v := range src {
		dst[r] += v
	}
}

// amountText renders an amount in the unit users think in.
func amountText(r queue.Resource, v int64) string {
	switch {
	case r == queue.CPU:
		return fmt.Sprintf("%gcpu", float64(v)/1000)
	case r == queue.Memory:
		return fmt.Sprintf("%dMiB", v)
	case len(r) > 4 && r[:4] == "gpu/":
		return fmt.Sprintf("%g %s GPUs", float64(v)/workload.MilliPerGPU, r[4:])
	}
	return fmt.Sprintf("%d", v)
}

// The methods below are the cycle's hooks; each is a no-op without queues
// (a nil *queueState), so Cycle calls them unconditionally.

// leafOfJob is pending job i's leaf queue ("" without queues).
func (q *queueState) leafOfJob(i int) string {
	if q == nil {
		return ""
	}
	return q.leafOf[i]
}

// refusedPending lists the jobs whose queue refuses them, in snapshot order.
func (q *queueState) refusedPending(s *Snapshot) []Pending {
	var out []Pending
	for i := range s.Pending {
		if r, ok := q.refused[i]; ok {
			out = append(out, Pending{Job: s.Pending[i].Job.ID, Reason: r})
		}
	}
	return out
}

// limitBefore checks what the job asks for (GPUs charged as demandOf does)
// against its queue's limits, before any placement is tried.
func (q *queueState) limitBefore(leaf string, view *cluster.State, pj PendingJob) string {
	if q == nil || leaf == "" {
		return ""
	}
	return q.overLimit(leaf, demandOf(view, pj))
}

// limitAfter checks what the placement really takes, GPU models included.
func (q *queueState) limitAfter(leaf string, view *cluster.State, as []placement.Assignment) string {
	if q == nil || leaf == "" {
		return ""
	}
	return q.overLimit(leaf, chargeOfAssignments(view, as))
}

// bound charges a placement to the job's queue.
func (q *queueState) bound(leaf string, view *cluster.State, as []placement.Assignment) {
	if q == nil || leaf == "" {
		return
	}
	q.charge(leaf, chargeOfAssignments(view, as), +1)
}

// boundBinds charges the pod-by-pod baselines' binds.
func (q *queueState) boundBinds(leaf string, view *cluster.State, binds []GangBind) {
	if q == nil || leaf == "" {
		return
	}
	for _, b := range binds {
		q.charge(leaf, chargeOfPods(view, b.Pods), +1)
	}
}

// quotaReason is a WaitQuota reason.
func quotaReason(why string, pods int) Reason {
	return Reason{Verdict: placement.WaitQuota, Level: "queue", Message: why, Pods: pods}
}
