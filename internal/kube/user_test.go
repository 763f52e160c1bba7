package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// TestJobUser: the user comes from the corral.dev/user annotation, else the
// label, else nowhere (not the namespace).
func TestJobUser(t *testing.T) {
	cases := map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"annotation":            {pod("a").gpus(1).ann(v1alpha1.AnnotationUser, "alice@example.com").obj(), "alice@example.com"},
		"label":                 {pod("a").gpus(1).label(v1alpha1.LabelUser, "bob").obj(), "bob"},
		"annotation over label": {pod("a").gpus(1).label(v1alpha1.LabelUser, "bob").ann(v1alpha1.AnnotationUser, "alice").obj(), "alice"},
		"blank annotation":      {pod("a").gpus(1).label(v1alpha1.LabelUser, "bob").ann(v1alpha1.AnnotationUser, " ").obj(), "bob"},
		"none: no user":         {pod("a").gpus(1).obj(), ""},
		"a JobSet's pods":       {pod("a").gpus(1).jobSet("js", "workers").label(v1alpha1.LabelUser, "carol").obj(), "carol"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			jobs := buildJobs([]*corev1.Pod{tc.pod}, nil, fakeGroups{}, nil, testCfg)
			if len(jobs) != 1 {
				t.Fatalf("%d jobs, want 1", len(jobs))
			}
			if got := jobs[0].job.User; got != tc.want {
				t.Errorf("user %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRuntimeHistoryLearnsPerUser: completions the adapter sees teach the
// user's own keys, so the user's next job is estimated from that user's
// runs, not from the queue's.
func TestRuntimeHistoryLearnsPerUser(t *testing.T) {
	var r runtimeHistory
	run := func(user string, d time.Duration) {
		running := historyPod("p-"+user, corev1.PodRunning, 0, 0)
		running.Annotations = map[string]string{v1alpha1.AnnotationUser: user, v1alpha1.AnnotationGang: "g-" + user}
		running.Spec.SchedulerName = v1alpha1.SchedulerName
		w := &world{}
		w.jobs = buildJobs([]*corev1.Pod{running}, nil, fakeGroups{}, nil, testCfg)
		if len(w.jobs) != 1 {
			t.Fatalf("%d jobs, want 1", len(w.jobs))
		}
		kj := w.jobs[0]
		for _, ref := range kj.refs {
			kj.bound[ref] = "n"
		}
		w.byID = map[workload.JobID]*kjob{kj.job.ID: kj}
		r.track(w, []*corev1.Pod{running})
		ended := historyPod("p-"+user, corev1.PodSucceeded, 0, d)
		r.track(&world{byID: map[workload.JobID]*kjob{}}, []*corev1.Pod{ended})
	}
	for i := 0; i < cycle.MinUserSamples; i++ {
		run("alice", 10*time.Minute)
		run("bob", 10*time.Hour)
		run("bob", 10*time.Hour)
	}
	probe := buildJobs([]*corev1.Pod{pod("next").ann(v1alpha1.AnnotationUser, "alice").obj()}, nil, fakeGroups{}, nil, testCfg)[0].job
	got, src, ok := cycle.Runtime(&r.hist, probe)
	if !ok || got != 10*time.Minute || src != cycle.SourceUserShape {
		t.Errorf("alice's next job: %v from %q (%v), want 10m0s from user+shape", got, src, ok)
	}
}
