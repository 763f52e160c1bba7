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
// (docs/backfill.md#runtime-estimates). With a store (historystore.go) the
// latest runs are saved and replayed after a restart; without one it starts
// empty, and declared runtimes and max runtimes still apply.
type runtimeHistory struct {
	hist cycle.History
	// stored is the latest runs in the order they completed (at most
	// maxStoredRuns), what the store saves; unsaved counts those since the
	// last save.
	stored  []storedRun
	unsaved int
	store   historyStore
	savedAt time.Time
	// loaded: the store was read (or there is none to read); loadFailed
	// keeps the warning to one.
	loaded, loadFailed bool
	// saveFailing keeps the save warning to one per episode.
	saveFailing bool
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
		if d, finished, ok := succeededRun(t.pods, byUID); ok {
			run := cycle.RunOf(t.job, d)
			// The span tells the engine which jobs held the cluster in a
			// row (backfill's streak of starved jobs). It is not stored:
			// after a restart the engine sees only the running jobs and
			// the runs completed since.
			run.Span = cycle.SpanOf(t.job, finished.Add(-d), finished)
			r.observe(storedRun{Run: run, Finished: finished})
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

// observe learns a completed run and keeps it for the store.
func (r *runtimeHistory) observe(run storedRun) {
	r.hist.ObserveRun(run.Run)
	r.stored = append(r.stored, run)
	if len(r.stored) > maxStoredRuns {
		r.stored = append(r.stored[:0:0], r.stored[len(r.stored)-maxStoredRuns:]...)
	}
	r.unsaved++
}

// restore rebuilds the history from stored runs followed by the runs
// learned since this process started, in the order they completed.
func (r *runtimeHistory) restore(stored []storedRun) {
	since := r.stored
	all := append(append([]storedRun(nil), stored...), since...)
	sort.SliceStable(all, func(a, b int) bool { return all[a].Finished.Before(all[b].Finished) })
	if len(all) > maxStoredRuns {
		all = all[len(all)-maxStoredRuns:]
	}
	r.hist, r.stored = cycle.History{}, nil
	unsaved := r.unsaved
	for _, run := range all {
		r.observe(run)
	}
	r.unsaved, r.loaded = unsaved, true
}

// succeededRun is the span from the first container start to the last
// container finish of pods that all succeeded, and that last finish.
func succeededRun(uids []types.UID, byUID map[types.UID]*corev1.Pod) (time.Duration, time.Time, bool) {
	d, ok := succeededRuntime(uids, byUID)
	if !ok {
		return 0, time.Time{}, false
	}
	var last time.Time
	for _, uid := range uids {
		for _, cs := range byUID[uid].Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil && term.FinishedAt.Time.After(last) {
				last = term.FinishedAt.Time
			}
		}
	}
	return d, last, true
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
