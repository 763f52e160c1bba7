package kube

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// runtimeHistory learns how long jobs run from the ones that complete
// while corral watches, for jobs that declare no expected runtime
// (docs/backfill.md#runtime-estimates). It is kept in memory: after a
// restart it starts empty, and declared runtimes and max runtimes still
// apply.
type runtimeHistory struct {
	hist cycle.History
	// running is every job seen with all its pods bound: the job as the
	// engine knew it (its queue resolved) and its pods.
	running map[workload.JobID]trackedJob
}

type trackedJob struct {
	job  *workload.Job
	pods []types.UID
}

// track records the jobs running in this world and learns the runtimes of
// those that stopped running since: a job whose pods all succeeded ran from
// its first container start to its last container finish. A job with a
// failed or deleted pod (preempted, evicted, failed) teaches nothing.
func (r *runtimeHistory) track(w *world, pods []*corev1.Pod) {
	if r.running == nil {
		r.running = map[workload.JobID]trackedJob{}
	}
	byUID := make(map[types.UID]*corev1.Pod, len(pods))
	for _, p := range pods {
		byUID[p.UID] = p
	}
	ids := make([]workload.JobID, 0, len(r.running))
	for id := range r.running {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if kj, ok := w.byID[id]; ok && len(kj.bound) > 0 {
			continue // still running (or partly bound again)
		}
		t := r.running[id]
		delete(r.running, id)
		if d, ok := succeededRuntime(t.pods, byUID); ok {
			r.hist.Observe(t.job, d)
		}
	}
	for _, kj := range w.jobs {
		if len(kj.refs) == 0 || len(kj.bound) < len(kj.refs) {
			continue
		}
		t := trackedJob{job: kj.job}
		for _, ref := range kj.refs {
			t.pods = append(t.pods, kj.pods[ref].UID)
		}
		r.running[kj.job.ID] = t
	}
}

// succeededRuntime is the span from the first container start to the last
// container finish of pods that all succeeded.
func succeededRuntime(uids []types.UID, byUID map[types.UID]*corev1.Pod) (time.Duration, bool) {
	var first, last time.Time
	for _, uid := range uids {
		p, ok := byUID[uid]
		if !ok || p.Status.Phase != corev1.PodSucceeded {
			return 0, false
		}
		for _, cs := range p.Status.ContainerStatuses {
			term := cs.State.Terminated
			if term == nil {
				continue
			}
			if s := term.StartedAt.Time; !s.IsZero() && (first.IsZero() || s.Before(first)) {
				first = s
			}
			if f := term.FinishedAt.Time; f.After(last) {
				last = f
			}
		}
	}
	if first.IsZero() || !last.After(first) {
		return 0, false
	}
	return last.Sub(first), true
}
