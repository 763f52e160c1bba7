package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
)

// TestGangMinCapped: a minimum above what the owner can still run is
// capped, with the reason; the condition and explain read one minimum.
func TestGangMinCapped(t *testing.T) {
	groups := fakeGroups{parallelism: map[string]int{"idx": 1, "full": 6}}
	member := func(job string, i int) *corev1.Pod {
		return pod(job+"-"+string(rune('0'+i))).gpus(8).ownedByJob(job).ann(v1alpha1.AnnotationMinMembers, "6").obj()
	}
	cases := map[string]struct {
		pods    []*corev1.Pod
		min     int    // the minimum corral uses
		shown   int    // the minimum explain prints (gangMinimum)
		waiting string // the condition's reason while the gang waits
		note    string // part of the cap's reason
	}{
		// The Indexed Job: 5 of 6 completions done, the last pod
		// re-created; min-members 6 used to be waited on forever.
		"five indexes completed: capped at the one that can run": {pods: []*corev1.Pod{member("idx", 5)}, min: 1, shown: 1,
			note: "gang minimum 6 (corral.dev/min-members) capped at 1: Job idx can run at most 1 pods now"},
		"the owner can run six: not capped, waits for them": {pods: []*corev1.Pod{member("full", 0)}, min: 6, shown: 6,
			waiting: "gang waits for its pods: 1 of 6 pods exist"},
		"a bare gang's owner says nothing: not capped": {
			pods: []*corev1.Pod{pod("a").gpus(1).ann(v1alpha1.AnnotationGang, "g").ann(v1alpha1.AnnotationMinMembers, "3").obj()},
			min:  3, shown: 3, waiting: "gang waits for its pods: 1 of 3 pods exist"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			jobs := buildJobs(tc.pods, nil, groups, nil, testCfg)
			if len(jobs) != 1 {
				t.Fatalf("%d jobs", len(jobs))
			}
			kj := jobs[0]
			if kj.job.MinMembers != tc.min || gangMinimum(kj) != tc.shown || kj.waiting != tc.waiting {
				t.Errorf("min %d shown %d waiting %q, want %d %d %q", kj.job.MinMembers, gangMinimum(kj), kj.waiting, tc.min, tc.shown, tc.waiting)
			}
			if (tc.note == "") != (kj.capped == "") || !strings.Contains(kj.capped, tc.note) {
				t.Errorf("cap reason %q, want one containing %q", kj.capped, tc.note)
			}
		})
	}
}
