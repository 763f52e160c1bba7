package baseline

import (
	"fmt"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// runJob is a running job as the baselines see it: what it holds, its
// priority and when it started, for preemption.
type runJob struct {
	id       workload.JobID
	priority int32
	// queue and namespace place the job in a ClusterQueue (kueue-tas).
	queue, namespace string
	start            time.Time
	pods             []engine.PodBind
	gone             bool // evicted earlier in this cycle
	// evicted marks single pods taken by pod-level preemption this cycle.
	evicted map[int]bool
}

// running indexes the snapshot's running jobs: by job (in a fixed order) and
// by node, for kube-scheduler's per-node victim search.
type running struct {
	jobs   []*runJob
	onNode map[int][]podOf
}

// podOf is one running pod: its job and its place in the job's pod list.
type podOf struct {
	job *runJob
	pod int
}

func newRunning(s *engine.Snapshot) *running {
	r := &running{onNode: map[int][]podOf{}}
	for _, rj := range s.Running {
		j := &runJob{id: rj.Job.ID, priority: rj.Job.Priority, start: rj.Start, pods: rj.Pods,
			queue: rj.Job.Queue, namespace: rj.Job.Namespace}
		r.jobs = append(r.jobs, j)
	}
	sort.Slice(r.jobs, func(a, b int) bool { return r.jobs[a].id < r.jobs[b].id })
	for _, j := range r.jobs {
		for i, p := range j.pods {
			r.onNode[p.NodeIndex] = append(r.onNode[p.NodeIndex], podOf{job: j, pod: i})
		}
	}
	return r
}

// lowerThan lists the running jobs below priority p not yet evicted.
func (r *running) lowerThan(p int32) []*runJob {
	var out []*runJob
	for _, j := range r.jobs {
		if !j.gone && j.priority < p {
			out = append(out, j)
		}
	}
	return out
}

// release gives a job's pods back to the view; hold takes them again.
func release(view *cluster.State, j *runJob) {
	for _, p := range j.pods {
		view.Release(p.NodeIndex, p.Alloc)
	}
}

func hold(view *cluster.State, j *runJob) {
	for _, p := range j.pods {
		// The pods held this capacity a moment ago in the same view: it fits.
		_ = view.Allocate(p.NodeIndex, p.Alloc)
	}
}

// evictWhole is the eviction of every pod of j, made room for by.
func evictWhole(j *runJob, by workload.JobID, why string) engine.Eviction {
	ev := engine.Eviction{Job: j.id, Cause: engine.CausePreempt, By: by, Message: why}
	for _, p := range j.pods {
		ev.Pods = append(ev.Pods, p.Pod)
	}
	return ev
}

// remediate is what Kubernetes does when a GPU or node under a running job
// fails, once the failure is known (the snapshot lists only those): the
// process on a failed GPU dies, the pods of a failed node are evicted, and
// the distributed job, having lost a rank, fails as a whole and is
// restarted by its controller (RestartGang). Failed capacity is already out
// of the snapshot's state, so nothing new lands on it.
func remediate(s *engine.Snapshot, view *cluster.State, r *running, plan *engine.Plan) {
	if len(s.Failures) == 0 {
		return
	}
	type key struct{ node, dev string }
	failed := map[key]bool{}
	for _, f := range s.Failures {
		failed[key{f.Node, f.Device}] = true
	}
	for _, j := range r.jobs {
		hit := false
		for _, p := range j.pods {
			if failed[key{p.Node, ""}] {
				hit = true
			}
			for _, d := range p.Devices {
				if failed[key{p.Node, d}] {
					hit = true
				}
			}
		}
		if !hit {
			continue
		}
		ev := evictWhole(j, "", "a GPU or node under the job failed; its controller restarts it")
		ev.Cause = engine.CauseFailure
		plan.Evictions = append(plan.Evictions, ev)
		plan.Remediations = append(plan.Remediations, engine.Remediation{Job: j.id, Action: workload.RestartGang,
			Pods: ev.Pods, Message: fmt.Sprintf("restart all %d pods", len(ev.Pods))})
		release(view, j)
		j.gone = true
	}
}
