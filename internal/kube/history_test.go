package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// historyPod is a pod of a gang, bound, running or ended.
func historyPod(uid string, phase corev1.PodPhase, started, finished time.Duration) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)}}
	p.Spec.NodeName = "n"
	p.Status.Phase = phase
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			StartedAt: metav1.NewTime(reportT0.Add(started)), FinishedAt: metav1.NewTime(reportT0.Add(finished))}}}}
	}
	return p
}

// worldOf is a world in which the given jobs run, each with all its pods
// bound.
func worldOf(jobs map[string][]*corev1.Pod) *world {
	w := &world{byID: map[workload.JobID]*kjob{}}
	for id, pods := range jobs {
		kj := &kjob{job: build.Job(id).Pods(len(pods)).GPUs(8).Obj(), pods: map[workload.PodRef]*corev1.Pod{},
			bound: map[workload.PodRef]string{}}
		for i, p := range pods {
			ref := workload.PodRef{Index: i}
			kj.refs = append(kj.refs, ref)
			kj.pods[ref] = p
			kj.bound[ref] = "n"
		}
		w.jobs = append(w.jobs, kj)
		w.byID[kj.job.ID] = kj
	}
	return w
}

// TestRuntimeHistoryLearnsFromSucceededJobs: a gang whose pods all
// succeeded teaches its runtime (first start to last finish); one that
// failed or was deleted teaches nothing.
func TestRuntimeHistoryLearnsFromSucceededJobs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ended []*corev1.Pod // the job's pods after it stopped running
		want  time.Duration // 0: nothing learned
	}{
		{"all succeeded", []*corev1.Pod{historyPod("a", corev1.PodSucceeded, time.Minute, 3*time.Hour),
			historyPod("b", corev1.PodSucceeded, 2*time.Minute, 3*time.Hour+time.Minute)}, 3 * time.Hour},
		{"one failed", []*corev1.Pod{historyPod("a", corev1.PodSucceeded, 0, time.Hour), historyPod("b", corev1.PodFailed, 0, time.Hour)}, 0},
		{"one deleted", []*corev1.Pod{historyPod("a", corev1.PodSucceeded, 0, time.Hour)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r runtimeHistory
			running := []*corev1.Pod{historyPod("a", corev1.PodRunning, 0, 0), historyPod("b", corev1.PodRunning, 0, 0)}
			w := worldOf(map[string][]*corev1.Pod{"j": running})
			job := w.jobs[0].job
			r.track(w, running)
			// The job is gone from the world: its pods ended.
			r.track(worldOf(nil), tc.ended)
			// Learned estimates need cycle.MinSamples runs of a key: feed
			// the same job until then and read the estimate.
			for i := 1; i < cycle.MinSamples; i++ {
				r.track(w, running)
				r.track(worldOf(nil), tc.ended)
			}
			got, _, ok := cycle.Runtime(&r.hist, job)
			if tc.want == 0 {
				if ok {
					t.Errorf("learned %v from a job that did not succeed", got)
				}
				return
			}
			if !ok || got != tc.want {
				t.Errorf("estimate %v (%v), want %v", got, ok, tc.want)
			}
			if len(r.running) != 0 {
				t.Errorf("%d jobs still tracked", len(r.running))
			}
			// The span of the run (backfill's streak of starved jobs):
			// first container start to last finish, all the job's GPUs,
			// the wait since the job's submission.
			spans := r.hist.Spans(0)
			want := cycle.Span{Start: reportT0.Add(time.Minute), End: reportT0.Add(3*time.Hour + time.Minute),
				GPUMilli: job.GPUMilli(), Waited: reportT0.Add(time.Minute).Sub(job.Submit)}
			if job.Submit.IsZero() {
				want.Waited = 0
			}
			if len(spans) == 0 || spans[len(spans)-1] != want {
				t.Errorf("spans %+v, want the last %+v", spans, want)
			}
		})
	}
}
