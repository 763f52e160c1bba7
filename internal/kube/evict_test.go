package kube

import (
	"testing"

	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
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

func TestPendingCondition(t *testing.T) {
	cases := map[string]struct {
		r               engine.Reason
		reason, message string
	}{
		"waits":       {engine.Reason{Verdict: placement.WaitFree, Message: "no room"}, ReasonUnschedulable, "no room"},
		"never fits":  {engine.Reason{Verdict: placement.NeverFits, Message: "9 GPUs"}, ReasonUnschedulable, "never fits: 9 GPUs"},
		"queue limit": {engine.Reason{Verdict: placement.WaitQuota, Message: "limit"}, ReasonQueueLimit, "limit"},
		// An admin can raise the limit: the job waits, as for any limit.
		"above the queue limit": {engine.Reason{Verdict: placement.WaitQuota, AboveLimit: true, Message: "above"}, ReasonQueueLimit, "above"},
		"refused":               {engine.Reason{Verdict: placement.Refused, Message: "no queue"}, ReasonQueueRefused, "no queue"},
		"unknown one":           {engine.Reason{Verdict: placement.Verdict(200), Message: "?"}, ReasonUnschedulable, "?"},
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
