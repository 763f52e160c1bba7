package kube

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/corral-dev/corral/api/v1alpha1"
)

func int32p(v int32) *int32 { return &v }

// TestExplainAgreesWithTheCondition: `corral explain` and the condition a
// cycle writes on the pod tell the same gang state, with the same numbers.
func TestExplainAgreesWithTheCondition(t *testing.T) {
	job := func(name string, par, succeeded int32) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec:   batchv1.JobSpec{Parallelism: int32p(par), Completions: int32p(6)},
			Status: batchv1.JobStatus{Succeeded: succeeded}}
	}
	member := func(name, owner string) *corev1.Pod {
		return pod(name).gpus(8).ownedByJob(owner).ann(v1alpha1.AnnotationMinMembers, "6").obj()
	}
	cases := map[string]struct {
		objs      []runtime.Object
		pod       string
		state     string
		gangMin   int
		note      string // part of GangNote
		condition string // the PodScheduled message the cycle writes; "" none (bound)
	}{
		// The issue: explain said "gang minimum 1" while the condition said
		// "1 of 6 pods exist".
		"waiting for its pods": {objs: []runtime.Object{job("full", 6, 0), member("full-0", "full")}, pod: "full-0",
			state: "waiting-for-pods", gangMin: 6, condition: "gang waits for its pods: 1 of 6 pods exist"},
		"five of six indexes completed: capped, it runs": {objs: []runtime.Object{job("idx", 6, 5), member("idx-5", "idx")}, pod: "idx-5",
			state: "would-bind", gangMin: 1, note: "capped at 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(append(tc.objs, rackNode("n1", "a", 8))...)
			s, err := New(client, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e, err := s.Explain(ctx, "ns", tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if e.State != tc.state || e.GangMin != tc.gangMin || !strings.Contains(e.GangNote, tc.note) || (tc.note == "") != (e.GangNote == "") {
				t.Fatalf("explain: state %s, gang minimum %d, note %q; want %s, %d, %q", e.State, e.GangMin, e.GangNote, tc.state, tc.gangMin, tc.note)
			}
			if _, err := s.Cycle(ctx); err != nil {
				t.Fatal(err)
			}
			p, err := client.CoreV1().Pods("ns").Get(ctx, tc.pod, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, msg := scheduledCondition(p)
			if msg != tc.condition {
				t.Errorf("condition %q, want %q", msg, tc.condition)
			}
			if tc.condition != "" && e.Reason != msg {
				t.Errorf("explain says %q, the condition %q", e.Reason, msg)
			}
		})
	}
}

func scheduledCondition(p *corev1.Pod) (reason, message string) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Reason, c.Message
		}
	}
	return "", ""
}
