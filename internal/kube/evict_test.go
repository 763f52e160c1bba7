package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

func TestEvictionMessage(t *testing.T) {
	cases := map[string]struct {
		ev   engine.Eviction
		want string
	}{
		"reclaim": {engine.Eviction{Cause: engine.CauseReclaim, By: "pod/a/owner", Message: "queue a takes back its guarantee", LostGPUSeconds: 7200},
			"reclaimed for job pod/a/owner: queue a takes back its guarantee; 2.00 GPU-hours of work lost"},
		"preempt, no message": {engine.Eviction{Cause: engine.CausePreempt, By: "job/a/hi", LostGPUSeconds: 36},
			"preempted for job job/a/hi; 0.01 GPU-hours of work lost"},
		"consolidate": {engine.Eviction{Cause: engine.CauseConsolidate, By: "job/a/gang"},
			"moved to consolidate free GPUs for job job/a/gang; 0.00 GPU-hours of work lost"},
		"max runtime": {engine.Eviction{Cause: engine.CauseMaxRuntime, Message: "ran 12h0m3s, past its max runtime 12h0m0s: terminated", Terminal: true},
			"stopped at its max runtime: ran 12h0m3s, past its max runtime 12h0m0s: terminated; 0.00 GPU-hours of work lost"},
		"a cause without wording": {engine.Eviction{Cause: engine.CauseFailure},
			"evicted (DeviceFailed); 0.00 GPU-hours of work lost"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := evictionMessage(tc.ev); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestPreemptionsHold: a preemptor waits while a victim exists, and no
// longer than victimWait.
func TestPreemptionsHold(t *testing.T) {
	t0 := time.Unix(1000, 0)
	victim := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "b", UID: types.UID(name)}}
	}
	var pr preemptions
	pr.record("owner", []*corev1.Pod{victim("v1"), victim("v2")}, t0)
	got := pr.waiting(map[types.UID]bool{"v1": true, "v2": true, "other": true}, t0.Add(time.Second))
	if diff := cmp.Diff(map[workload.JobID][]string{"owner": {"b/v1", "b/v2"}}, got); diff != "" {
		t.Errorf("both victims live (-want +got):\n%s", diff)
	}
	got = pr.waiting(map[types.UID]bool{"v2": true}, t0.Add(2*time.Second))
	if diff := cmp.Diff(map[workload.JobID][]string{"owner": {"b/v2"}}, got); diff != "" {
		t.Errorf("one victim gone (-want +got):\n%s", diff)
	}
	if got := pr.waiting(map[types.UID]bool{"v2": true}, t0.Add(victimWait+time.Second)); len(got) != 0 {
		t.Errorf("held past victimWait: %v", got)
	}
	pr.record("owner", []*corev1.Pod{victim("v3")}, t0)
	if got := pr.waiting(map[types.UID]bool{}, t0); len(got) != 0 || len(pr.waits) != 0 {
		t.Errorf("victims gone but still held: %v", got)
	}
}

func TestPendingCondition(t *testing.T) {
	cases := map[string]struct {
		r               engine.Reason
		reason, message string
	}{
		"waits":       {engine.Reason{Verdict: placement.WaitFree, Message: "no room"}, ReasonUnschedulable, "no room"},
		"never fits":  {engine.Reason{Verdict: placement.NeverFits, Message: "9 GPUs"}, ReasonUnschedulable, "never fits: 9 GPUs"},
		"queue limit": {engine.Reason{Verdict: placement.WaitQuota, Message: "limit"}, ReasonQueueLimit, "limit"},
		"refused":     {engine.Reason{Verdict: placement.Refused, Message: "no queue"}, ReasonQueueRefused, "no queue"},
		"unknown one": {engine.Reason{Verdict: placement.Verdict(200), Message: "?"}, ReasonUnschedulable, "?"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reason, msg := pendingCondition(tc.r)
			if reason != tc.reason || msg != tc.message {
				t.Errorf("got %s %q, want %s %q", reason, msg, tc.reason, tc.message)
			}
		})
	}
}
