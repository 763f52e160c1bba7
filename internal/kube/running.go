package kube

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// admit names the job's queue: its first pod's queue label, "" for none.
// The engine admits it (the namespace's default queue for none, refusals
// as Pending with the Refused verdict); a running job whose queue changed
// or vanished keeps running, charged to no queue. With no Queue object,
// queues are off and every job is in the implicit "default".
func (w *world) admit(kj *kjob) {
	if len(kj.refs) == 0 {
		return // no pod could be read yet: the job waits anyway
	}
	first := kj.pods[kj.refs[0]]
	kj.job.Queue = first.Labels[v1alpha1.LabelQueue]
	if kj.job.Queue == "" && !w.queues.enabled() {
		kj.job.Queue = "default"
	}
}

// runningJob describes a job with bound pods for the engine: what each pod
// holds, when the job started and when it last checkpointed.
//
// The start is the latest time one of its pods was bound: a gang runs from
// when its last member started. The last checkpoint is the oldest
// corral.dev/last-checkpoint among the pods that carry one: a distributed
// checkpoint is whole only once every rank that reports one has written it.
// The annotation holds one time; checkpointHistory adds the earlier ones
// this process saw.
func runningJob(kj *kjob, holds map[string]podHold, assumed map[string]assumedPod, s *cluster.State, now time.Time) (engine.RunningJob, []string) {
	rj := engine.RunningJob{Job: kj.job}
	var warnings []string
	var last time.Time
	for _, ref := range kj.refs {
		node, ok := kj.bound[ref]
		if !ok {
			continue
		}
		p := kj.pods[ref]
		if p.DeletionTimestamp != nil {
			// Already on its way out (evicted, deleted): preempting or
			// remediating it again would only repeat evictions and events.
			// Its capacity stays taken in the state until it is gone.
			continue
		}
		pb := engine.PodBind{Placed: cluster.Placed{Pod: ref, NodeIndex: -1}, Node: node}
		if h, ok := holds[string(p.UID)]; ok {
			pb.NodeIndex, pb.Alloc = h.node, h.alloc
			n := s.Node(h.node)
			for _, d := range h.alloc.Devices {
				pb.Devices = append(pb.Devices, n.Devices[d.Device].ID)
			}
		}
		rj.Pods = append(rj.Pods, pb)

		started := boundAt(p)
		if a, ok := assumed[string(p.UID)]; ok && started.IsZero() {
			started = a.at
		}
		if started.IsZero() {
			started = p.CreationTimestamp.Time
		}
		if started.After(rj.Start) {
			rj.Start = started
		}
		if v := p.Annotations[v1alpha1.AnnotationLastCheckpoint]; v != "" {
			t, err := time.Parse(time.RFC3339, v)
			switch {
			case err != nil:
				warnings = append(warnings, fmt.Sprintf("pod %s/%s: annotation %s=%q is not an RFC 3339 time; ignored",
					p.Namespace, p.Name, v1alpha1.AnnotationLastCheckpoint, v))
			case t.After(now):
				warnings = append(warnings, fmt.Sprintf("pod %s/%s: annotation %s=%q is in the future; ignored",
					p.Namespace, p.Name, v1alpha1.AnnotationLastCheckpoint, v))
			case last.IsZero() || t.Before(last):
				last = t
			}
		}
	}
	if rj.Start.After(now) {
		rj.Start = now
	}
	rj.Checkpoints = rj.Checkpoints.Add(last)
	return rj, warnings
}

// boundAt is when the pod was bound: its PodScheduled=True transition, else
// when the kubelet started it; zero if neither is known.
func boundAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return time.Time{}
}

// checkpointHistory keeps the checkpoints each running job has reported
// while this process watched: the annotation holds only the latest, and
// the engine waits for a victim's next checkpoint only when the intervals
// between its reports predict it (docs/preemption.md). A run is a job and
// its start, so a restarted job starts a new history; runs that no longer
// hold pods are forgotten at the next cycle.
//
// With a runtime history store (historystore.go) the last reports of each
// running job's run are saved with it, at most once a minute, and restored
// at start, so a restarted or newly elected scheduler still waits for a
// victim whose checkpoints were regular. Without one, a job's history starts
// again from the value the annotation holds, and preemption waits for none
// of its checkpoints until it has reported one more interval (half an hour
// at the usual 30-minute interval).
type checkpointHistory struct {
	runs map[checkpointRun]cycle.Checkpoints
	// changed: a report was added, or a run with reports ended, since the
	// last save.
	changed bool
}

type checkpointRun struct {
	job   workload.JobID
	start time.Time
}

// observe merges each running job's reported checkpoint into its run's
// history and hands the whole history to the engine.
func (h *checkpointHistory) observe(running []engine.RunningJob) {
	seen := make(map[checkpointRun]cycle.Checkpoints, len(running))
	for i := range running {
		rj := &running[i]
		key := checkpointRun{job: rj.Job.ID, start: rj.Start}
		c := h.runs[key]
		for _, t := range rj.Checkpoints {
			c = c.Add(t)
		}
		if !c.Last().Equal(h.runs[key].Last()) {
			h.changed = true // Add keeps only later reports: a new last is a new report
		}
		seen[key] = c
		rj.Checkpoints = c
	}
	for key, c := range h.runs {
		if _, ok := seen[key]; !ok && len(c) > 0 {
			h.changed = true // a run with reports ended: its row goes
		}
	}
	h.runs = seen
}

// restore merges stored reports into the runs' histories; a run that is
// not running any more is dropped at the next observe.
func (h *checkpointHistory) restore(stored map[checkpointRun]cycle.Checkpoints) {
	if len(stored) == 0 {
		return
	}
	if h.runs == nil {
		h.runs = map[checkpointRun]cycle.Checkpoints{}
	}
	for key, c := range stored {
		all := append(append([]time.Time(nil), c...), h.runs[key]...)
		sort.Slice(all, func(a, b int) bool { return all[a].Before(all[b]) })
		var merged cycle.Checkpoints
		for _, t := range all {
			merged = merged.Add(t)
		}
		h.runs[key] = merged
	}
}
