package engine

import (
	"sort"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

var bfEpoch = time.Unix(0, 0).UTC()

// world is a tiny driver: it runs cycles, applies plans and ends jobs when
// their expected runtime is over (the estimates are exact here).
type world struct {
	t       *testing.T
	s       *cluster.State
	eng     *Engine
	now     time.Time
	running map[workload.JobID]*RunningJob
	ends    map[workload.JobID]time.Time
	pending []PendingJob
	started map[workload.JobID]time.Time
	pools   []backfill.Pool
	hist    *backfill.History
	queues  []queue.Spec
	// failures are passed in every snapshot (the script harness sets them).
	failures []health.Failure
}

func newWorld(t *testing.T, s *cluster.State, cfg Config) *world {
	return &world{t: t, s: s, eng: New(cfg), now: bfEpoch, running: map[workload.JobID]*RunningJob{},
		ends: map[workload.JobID]time.Time{}, started: map[workload.JobID]time.Time{}}
}

// run starts j now with pod i taking whole GPUs on nodes[i].
func (w *world) run(j *workload.Job, nodes ...string) {
	w.t.Helper()
	rj := &RunningJob{Job: j, Start: w.now}
	i := 0
	j.EachPod(func(ref workload.PodRef, r workload.Request) {
		if i >= len(nodes) {
			return
		}
		n, ok := w.s.NodeIndex(nodes[i])
		if !ok {
			w.t.Fatalf("no node %s", nodes[i])
		}
		a := cluster.Alloc{CPUMilli: r.CPUMilli, MemMiB: r.MemMiB}
		k := 0
		for d, f := range w.s.GPUFree(n) {
			if f == 1000 && k < r.GPUs {
				a.Devices = append(a.Devices, cluster.DeviceShare{Device: d, Milli: 1000})
				k++
			}
		}
		if err := w.s.Allocate(n, a); err != nil {
			w.t.Fatal(err)
		}
		rj.Pods = append(rj.Pods, PodBind{Placed: cluster.Placed{Pod: ref, NodeIndex: n, Alloc: a}, Node: nodes[i]})
		i++
	})
	w.running[j.ID] = rj
	w.ends[j.ID] = w.now.Add(j.ExpectedRuntime)
	w.started[j.ID] = w.now
}

func (w *world) submit(jobs ...*workload.Job) {
	for _, j := range jobs {
		w.pending = append(w.pending, PendingJob{Job: j})
	}
}

func (w *world) runCycle() Plan {
	w.t.Helper()
	snap := &Snapshot{State: w.s, Now: w.now, Pending: w.pending, Pools: w.pools, Runtimes: w.hist, Queues: w.queues,
		Failures: w.failures}
	ids := make([]string, 0, len(w.running))
	for id := range w.running {
		ids = append(ids, string(id))
	}
	sort.Strings(ids)
	for _, id := range ids {
		snap.Running = append(snap.Running, *w.running[workload.JobID(id)])
	}
	plan := w.eng.Cycle(snap)
	for _, ev := range plan.Evictions {
		rj := w.running[ev.Job]
		gone := map[workload.PodRef]bool{}
		for _, p := range ev.Pods {
			gone[p] = true
		}
		var keep []PodBind
		for _, p := range rj.Pods {
			if gone[p.Pod] {
				w.s.Release(p.NodeIndex, p.Alloc)
			} else {
				keep = append(keep, p)
			}
		}
		rj.Pods = keep
		if len(keep) == 0 {
			delete(w.running, ev.Job)
		}
	}
	placed := map[workload.JobID]bool{}
	for _, b := range plan.Binds {
		for _, p := range b.Pods {
			if err := w.s.Allocate(p.NodeIndex, p.Alloc); err != nil {
				w.t.Fatalf("bind of %s does not apply: %v", b.Job, err)
			}
		}
		if rj, ok := w.running[b.Job]; ok {
			rj.Pods = append(rj.Pods, b.Pods...)
			continue
		}
		var j *workload.Job
		for _, pj := range w.pending {
			if pj.Job.ID == b.Job {
				j = pj.Job
			}
		}
		w.running[b.Job] = &RunningJob{Job: j, Pods: b.Pods, Start: w.now}
		w.ends[b.Job] = w.now.Add(j.ExpectedRuntime)
		w.started[b.Job] = w.now
		placed[b.Job] = true
	}
	kept := w.pending[:0]
	for _, pj := range w.pending {
		if !placed[pj.Job.ID] {
			kept = append(kept, pj)
		}
	}
	w.pending = kept
	return plan
}

// advance moves the clock, ending the jobs due by then.
func (w *world) advance(to time.Time) {
	var due []string
	for id, end := range w.ends {
		if !end.After(to) {
			due = append(due, string(id))
		}
	}
	sort.Strings(due)
	for _, id := range due {
		if rj, ok := w.running[workload.JobID(id)]; ok {
			for _, p := range rj.Pods {
				w.s.Release(p.NodeIndex, p.Alloc)
			}
			delete(w.running, workload.JobID(id))
		}
		delete(w.ends, workload.JobID(id))
	}
	w.now = to
}

func min8(id string, minutes int) *workload.Job {
	return build.Job(id).GPUs(8).Expected(time.Duration(minutes) * time.Minute).Obj()
}
