package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
)

// deadlineGroups adds Jobs' activeDeadlineSeconds to fakeGroups.
type deadlineGroups struct {
	fakeGroups
	deadlines map[string]time.Duration
}

func (d deadlineGroups) jobActiveDeadline(_, name string) (time.Duration, bool) {
	v, ok := d.deadlines[name]
	return v, ok
}

func TestRuntimeLimits(t *testing.T) {
	groups := deadlineGroups{fakeGroups: fakeGroups{parallelism: map[string]int{"train": 1, "free": 1}},
		deadlines: map[string]time.Duration{"train": 2 * time.Hour}}
	withClass := func(p *corev1.Pod, c string) *corev1.Pod { p.Labels[v1alpha1.LabelClass] = c; return p }
	cases := map[string]struct {
		pod         *corev1.Pod
		wantMax     time.Duration
		wantExp     time.Duration
		wantClass   string
		wantInvalid bool
	}{
		"annotations": {pod: pod("a").gpus(1).ann(v1alpha1.AnnotationMaxRuntime, "12h").
			ann(v1alpha1.AnnotationExpectedRuntime, "90m").obj(), wantMax: 12 * time.Hour, wantExp: 90 * time.Minute},
		"a Job's activeDeadlineSeconds":  {pod: pod("t-0").gpus(1).ownedByJob("train").obj(), wantMax: 2 * time.Hour},
		"the annotation wins over it":    {pod: pod("t-0").gpus(1).ownedByJob("train").ann(v1alpha1.AnnotationMaxRuntime, "1h").obj(), wantMax: time.Hour},
		"a Job without a deadline":       {pod: pod("f-0").gpus(1).ownedByJob("free").obj()},
		"not a duration: the job is bad": {pod: pod("a").gpus(1).ann(v1alpha1.AnnotationMaxRuntime, "soon").obj(), wantInvalid: true},
		"zero is no limit, so refused":   {pod: pod("a").gpus(1).ann(v1alpha1.AnnotationMaxRuntime, "0s").obj(), wantInvalid: true},
		"the class label":                {pod: withClass(pod("a").gpus(1).obj(), "prefill"), wantClass: "prefill"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			jobs := buildJobs([]*corev1.Pod{tc.pod}, nil, groups, nil, testCfg)
			if len(jobs) != 1 {
				t.Fatalf("%d jobs", len(jobs))
			}
			kj := jobs[0]
			if got := kj.invalid != ""; got != tc.wantInvalid {
				t.Fatalf("invalid = %q, want invalid: %v", kj.invalid, tc.wantInvalid)
			}
			if tc.wantInvalid {
				return
			}
			j := kj.job
			if j.MaxRuntime != tc.wantMax || j.ExpectedRuntime != tc.wantExp || j.Class != tc.wantClass {
				t.Errorf("max %v expected %v class %q; want %v %v %q", j.MaxRuntime, j.ExpectedRuntime, j.Class,
					tc.wantMax, tc.wantExp, tc.wantClass)
			}
		})
	}
}
