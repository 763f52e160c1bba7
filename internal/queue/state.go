package queue

import (
	"fmt"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// DefaultAging is the aging period inside a queue when none is configured:
// a job gains one priority step per hour it waits.
const DefaultAging = time.Hour

// State is one cycle's view of the queue tree: which leaf each job
// belongs to, what each queue holds and asks for, and its fair share. It is
// built once per cycle and updated as the cycle binds and evicts, so the DRF
// order and the limits see the cycle's own decisions.
type State struct {
	tree     *Tree
	problems []Problem
	specs    map[string]Spec // every queue of the tree, by name
	capacity Amounts
	// usage is what running (and this cycle's bound) jobs hold, for every
	// queue of the tree: a leaf's own, an inner queue's its leaves' sum.
	usage  map[string]Amounts
	demand map[string]Amounts // leaves: running + pending
	fair   map[string]Amounts
	// leafOf is each pending job's leaf ("" when refused); runningLeaf the
	// same for running jobs (jobs whose queue is refused are charged nowhere).
	leafOf      []string
	runningLeaf map[workload.JobID]string
	refused     map[int]cycle.Reason
	// jobs lists each leaf's pending jobs in their in-queue order; cursor is
	// how many the cycle has taken.
	jobs   map[string][]int
	cursor map[string]int
}

// NewState resolves the leaf queue of every pending job of s and of the
// running jobs (the snapshot's, less what the cycle evicted before queues
// are looked at) and computes usage, demand and fair shares against the
// cycle's running view, and the
// in-queue order of each leaf's jobs (priority with aging; aging zero means
// DefaultAging, negative turns aging off).
func NewState(tree *Tree, problems []Problem, s *cycle.Snapshot, running []cycle.RunningJob, view *cluster.State, aging time.Duration) *State {
	q := &State{specs: map[string]Spec{}, usage: map[string]Amounts{},
		demand: map[string]Amounts{}, runningLeaf: map[workload.JobID]string{},
		refused: map[int]cycle.Reason{}, jobs: map[string][]int{}, cursor: map[string]int{}}
	q.tree, q.problems = tree, problems
	for _, name := range q.tree.Queues() {
		spec, _ := q.tree.Spec(name)
		q.specs[name] = spec
		q.usage[name] = Amounts{}
	}
	q.capacity = CapacityOf(view)
	for _, rj := range running {
		leaf, err := q.Leaf(rj.Job)
		if err != nil {
			continue // counted nowhere: its queue vanished while it ran
		}
		q.runningLeaf[rj.Job.ID] = leaf
		c := ChargeOfPods(view, rj.Pods)
		q.Charge(leaf, c, +1)
		addTo(q.DemandOf(leaf), c)
	}
	q.leafOf = make([]string, len(s.Pending))
	for i, pj := range s.Pending {
		leaf, err := q.Leaf(pj.Job)
		if err != nil {
			r := cycle.Reason{Verdict: placement.Refused, Level: "queue", Message: err.Error()}
			if ae, ok := err.(*AdmitError); ok {
				r.Refusal = ae.Refusal.String()
			}
			q.refused[i] = r
			continue
		}
		q.leafOf[i] = leaf
		addTo(q.DemandOf(leaf), DemandOf(view, pj))
		q.jobs[leaf] = append(q.jobs[leaf], i)
	}
	q.fair = q.tree.FairShare(q.capacity, q.demand)
	if aging == 0 {
		aging = DefaultAging
	}
	for leaf, idx := range q.jobs {
		jobs := make([]*workload.Job, len(idx))
		for k, i := range idx {
			jobs[k] = s.Pending[i].Job
		}
		ordered := make([]int, len(idx))
		for k, o := range OrderJobs(jobs, s.Now, aging) {
			ordered[k] = idx[o]
		}
		q.jobs[leaf] = ordered
	}
	return q
}

// leaf resolves a job's queue: the one it names, else its namespace's
// default, and checks that the queue admits it.
func (q *State) Leaf(j *workload.Job) (string, error) {
	if j.Queue == "" {
		return q.tree.DefaultQueue(j.Namespace)
	}
	if err := q.tree.Admit(j.Queue, j.Namespace); err != nil {
		return "", err
	}
	return j.Queue, nil
}

func (q *State) DemandOf(leaf string) Amounts {
	d := q.demand[leaf]
	if d == nil {
		d = Amounts{}
		q.demand[leaf] = d
	}
	return d
}

// charge adds (sign +1) or takes back (-1) amounts from a leaf and every
// queue above it.
func (q *State) Charge(leaf string, c Amounts, sign int64) {
	for name := leaf; name != "" && name != RootName; name = q.specs[name].Parent {
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
func (q *State) Next() (int, bool) {
	for _, leaf := range q.tree.Order(q.leafUsage(), q.fair) {
		if c := q.cursor[leaf]; c < len(q.jobs[leaf]) {
			q.cursor[leaf] = c + 1
			return q.jobs[leaf][c], true
		}
	}
	return 0, false
}

func (q *State) leafUsage() map[string]Amounts {
	out := make(map[string]Amounts, len(q.jobs))
	for _, leaf := range q.tree.Leaves() {
		out[leaf] = q.usage[leaf]
	}
	return out
}

// overLimit says which queue on the leaf's path would pass its limit if it
// took c more: a WaitQuota reason, or the zero Reason when none would. A
// limit c alone exceeds anywhere on the path is reported before one the
// queues' running jobs fill: that one is permanent (AboveLimit), the other
// passes as they end.
func (q *State) overLimit(leaf string, c Amounts) cycle.Reason {
	for _, above := range []bool{true, false} {
		for name := leaf; name != "" && name != RootName; name = q.specs[name].Parent {
			spec := q.specs[name]
			for _, r := range c.Resources() {
				lim, ok := spec.Limit[r]
				if !ok || c[r] <= 0 {
					continue
				}
				if above && c[r] > lim {
					return cycle.Reason{Verdict: placement.WaitQuota, Level: "queue", AboveLimit: true,
						Message: fmt.Sprintf("queue %q's limit of %s is %s and the job asks %s: it cannot start in this queue unless the limit is raised",
							name, r, amountText(r, lim), amountText(r, c[r]))}
				}
				if used := q.usage[name][r]; !above && used+c[r] > lim {
					return cycle.Reason{Verdict: placement.WaitQuota, Level: "queue",
						Message: fmt.Sprintf("queue %q would pass its limit of %s: %s held + %s asked > %s",
							name, r, amountText(r, used), amountText(r, c[r]), amountText(r, lim))}
				}
			}
		}
	}
	return cycle.Reason{}
}

// Statuses reports every queue after the cycle, in tree order, then the
// queues left out of the tree with their problem.
func (q *State) Statuses(s *cycle.Snapshot, view *cluster.State, pendingLeft []cycle.Pending) []cycle.QueueStatus {
	waiting := map[workload.JobID]bool{}
	for _, p := range pendingLeft {
		waiting[p.Job] = true
	}
	pending := map[string]Amounts{}
	for i, pj := range s.Pending {
		if leaf := q.leafOf[i]; leaf != "" && waiting[pj.Job.ID] {
			for name := leaf; name != "" && name != RootName; name = q.specs[name].Parent {
				if pending[name] == nil {
					pending[name] = Amounts{}
				}
				addTo(pending[name], DemandOf(view, pj))
			}
		}
	}
	var out []cycle.QueueStatus
	for _, st := range q.tree.Status(q.leafUsage(), q.fair) {
		p := pending[st.Queue]
		if p == nil {
			p = Amounts{}
		}
		out = append(out, cycle.QueueStatus{Name: st.Queue, Allocated: st.Allocated, FairShare: st.FairShare,
			Pending: p, Borrowed: st.Borrowed, Leaf: q.tree.IsLeaf(st.Queue)})
	}
	// Problems come sorted by queue: one status per left-out queue, with
	// every reason.
	for i := 0; i < len(q.problems); {
		j, reasons := i, []string{}
		for ; j < len(q.problems) && q.problems[j].Queue == q.problems[i].Queue; j++ {
			reasons = append(reasons, q.problems[j].Reason)
		}
		out = append(out, cycle.QueueStatus{Name: q.problems[i].Queue, Allocated: Amounts{}, FairShare: Amounts{},
			Pending: Amounts{}, Borrowed: Amounts{}, Problem: strings.Join(reasons, "; ")})
		i = j
	}
	return out
}

// CapacityOf is what fair share divides: healthy GPUs per model, CPU and
// memory of schedulable nodes.
func CapacityOf(s *cluster.State) Amounts {
	c := Amounts{}
	for n := 0; n < s.NumNodes(); n++ {
		if !s.Schedulable(n) {
			continue
		}
		node := s.Node(n)
		c[CPU] += node.CPUMilli
		c[Memory] += node.MemMiB
		for k, d := range node.Devices {
			if s.DeviceHealthy(n, k) {
				c[GPU(d.Model)] += workload.MilliPerGPU
			}
		}
	}
	return c
}

// ChargeOfPods is what bound pods hold, with GPUs charged to their model.
func ChargeOfPods(s *cluster.State, pods []cycle.PodBind) Amounts {
	c := Amounts{}
	for _, p := range pods {
		AddAlloc(c, s, p.NodeIndex, p.Alloc)
	}
	return c
}

func ChargeOfAssignments(s *cluster.State, as []placement.Assignment) Amounts {
	c := Amounts{}
	for _, a := range as {
		AddAlloc(c, s, a.Node, a.Alloc)
	}
	return c
}

func AddAlloc(c Amounts, s *cluster.State, n int, a cluster.Alloc) {
	c[CPU] += a.CPUMilli
	c[Memory] += a.MemMiB
	if n < 0 || n >= s.NumNodes() {
		return
	}
	node := s.Node(n)
	for _, d := range a.Devices {
		if d.Device >= 0 && d.Device < len(node.Devices) {
			c[GPU(node.Devices[d.Device].Model)] += int64(d.Milli)
		}
	}
}

// DemandOf is what a pending job's waiting pods ask for. A pod that accepts
// several GPU models is charged to the accepted model with the most GPUs in
// the cluster: demand only steers fair share, and the model a pod lands on
// is known once it is placed (limits are checked then).
func DemandOf(s *cluster.State, pj cycle.PendingJob) Amounts {
	c := Amounts{}
	waiting := map[workload.PodRef]bool{}
	for _, r := range pj.Waiting {
		waiting[r] = true
	}
	pj.Job.EachPod(func(ref workload.PodRef, r workload.Request) {
		if pj.Waiting != nil && !waiting[ref] {
			return
		}
		c[CPU] += max(0, r.CPUMilli)
		c[Memory] += max(0, r.MemMiB)
		if g := r.GPUMilliTotal(); g > 0 {
			if m := demandModel(s, r); m != "" {
				c[GPU(m)] += g
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

func addTo(dst, src Amounts) {
	for r, v := range src {
		dst[r] += v
	}
}

// amountText renders an amount in the unit users think in. "gpu" is GPUs
// of any model: the Kubernetes driver's name for a Queue's GPU resource
// while the cluster has no GPU model yet.
func amountText(r Resource, v int64) string {
	switch {
	case r == CPU:
		return workload.CPUText(v)
	case r == Memory:
		return workload.MemText(v)
	case r == "gpu":
		return workload.GPUText(v)
	case strings.HasPrefix(string(r), "gpu/"):
		return fmt.Sprintf("%s %s GPUs", workload.GPUNumber(v), r[4:])
	}
	return fmt.Sprintf("%d", v)
}

// The methods below are the cycle's hooks; each is a no-op without queues
// (a nil *State), so Cycle calls them unconditionally.

// LeafOfJob is pending job i's leaf queue ("" without queues).
func (q *State) LeafOfJob(i int) string {
	if q == nil {
		return ""
	}
	return q.leafOf[i]
}

// RefusedPending lists the jobs whose queue refuses them, in snapshot order.
func (q *State) RefusedPending(s *cycle.Snapshot) []cycle.Pending {
	var out []cycle.Pending
	for i := range s.Pending {
		if r, ok := q.refused[i]; ok {
			out = append(out, cycle.Pending{Job: s.Pending[i].Job.ID, Reason: r})
		}
	}
	return out
}

// LimitBefore checks what the job asks for (GPUs charged as DemandOf does)
// against its queue's limits, before any placement is tried: a WaitQuota
// reason (Pods not set), or the zero Reason within every limit.
func (q *State) LimitBefore(leaf string, view *cluster.State, pj cycle.PendingJob) cycle.Reason {
	if q == nil || leaf == "" {
		return cycle.Reason{}
	}
	return q.overLimit(leaf, DemandOf(view, pj))
}

// LimitAfter checks what the placement really takes, GPU models included.
func (q *State) LimitAfter(leaf string, view *cluster.State, as []placement.Assignment) cycle.Reason {
	if q == nil || leaf == "" {
		return cycle.Reason{}
	}
	return q.overLimit(leaf, ChargeOfAssignments(view, as))
}

// bound charges a placement to the job's
func (q *State) Bound(leaf string, view *cluster.State, as []placement.Assignment) {
	if q == nil || leaf == "" {
		return
	}
	q.Charge(leaf, ChargeOfAssignments(view, as), +1)
}

// Unbound takes pods evicted from a running job off its queue's usage
// (nothing when the job is charged nowhere).
func (q *State) Unbound(job workload.JobID, view *cluster.State, pods []cluster.Placed) {
	if q == nil {
		return
	}
	if leaf, ok := q.runningLeaf[job]; ok {
		q.Charge(leaf, q.Held(view, pods), -1)
	}
}

// BoundBinds charges the pod-by-pod baselines' binds.
func (q *State) BoundBinds(leaf string, view *cluster.State, binds []cycle.GangBind) {
	if q == nil || leaf == "" {
		return
	}
	for _, b := range binds {
		q.Charge(leaf, ChargeOfPods(view, b.Pods), +1)
	}
}

// Accessors for the preemption rules, which weigh a queue's standing.

// RunningLeaf is a running job's leaf queue; false when it is charged
// nowhere (its queue vanished or refuses it).
func (q *State) RunningLeaf(job workload.JobID) (string, bool) {
	l, ok := q.runningLeaf[job]
	return l, ok
}

// Usage is what a queue holds now, the cycle's binds and evictions included.
func (q *State) Usage(name string) Amounts { return q.usage[name] }

// Guarantee is a queue's guaranteed quota.
func (q *State) Guarantee(name string) Amounts { return q.specs[name].Guarantee }

// Fair is a queue's fair share this cycle.
func (q *State) Fair(name string) Amounts { return q.fair[name] }

// Reclaims says whether a queue may preempt borrowers to get its guarantee back.
func (q *State) Reclaims(name string) bool { return q.tree.Reclaims(name) }

// StrictReclaim says whether that reclaim may leave a borrower's queue
// below its own guarantee.
func (q *State) StrictReclaim(name string) bool { return q.tree.StrictReclaim(name) }

// Refused says whether pending job i's queue refuses it.
func (q *State) Refused(i int) bool { _, ok := q.refused[i]; return ok }

// NumRefused is how many pending jobs their queue refuses.
func (q *State) NumRefused() int { return len(q.refused) }

// Demand is what a pending job's waiting pods would charge a queue
// (DemandOf), for preemption's rules.
func (q *State) Demand(view *cluster.State, pj cycle.PendingJob) Amounts { return DemandOf(view, pj) }

// Held is what pods hold, GPUs charged to their model.
func (q *State) Held(view *cluster.State, pods []cluster.Placed) Amounts {
	c := Amounts{}
	for _, p := range pods {
		AddAlloc(c, view, p.NodeIndex, p.Alloc)
	}
	return c
}
