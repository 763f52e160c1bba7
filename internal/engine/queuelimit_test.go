package engine

import (
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/queue"
)

// TestQueueLimitReasonSaysWhetherTheJobIsAboveIt: a job a limit holds back
// waits with WaitQuota either way; AboveLimit is set only when the job alone
// asks more than the limit of its leaf or of an ancestor (it can start
// there only once the limit is raised), not when the queues' running jobs
// fill it, and that cause is named first when both hold.
func TestQueueLimitReasonSaysWhetherTheJobIsAboveIt(t *testing.T) {
	cases := map[string]struct {
		queues    []queue.Spec
		running   bool // an 8-GPU job of queue a runs on r0-n-0
		wantAbove bool
		wantWhy   string
	}{
		"the running jobs fill the limit for now": {
			queues: []queue.Spec{{Name: "a", Limit: h100(16)}}, running: true,
			wantWhy: `queue "a" would pass its limit of gpu/H100: 8 H100 GPUs held + 16 H100 GPUs asked > 16 H100 GPUs`,
		},
		"the job asks more than its queue's limit": {
			queues: []queue.Spec{{Name: "a", Limit: h100(8)}}, wantAbove: true,
			wantWhy: `queue "a"'s limit of gpu/H100 is 8 H100 GPUs and the job asks 16 H100 GPUs: it cannot start in this queue unless the limit is raised`,
		},
		"above an ancestor's limit while its own is full for now": {
			queues:  []queue.Spec{{Name: "org", Limit: h100(8)}, {Name: "a", Parent: "org", Limit: h100(16)}},
			running: true, wantAbove: true,
			wantWhy: `queue "org"'s limit of gpu/H100 is 8 H100 GPUs and the job asks 16 H100 GPUs: it cannot start in this queue unless the limit is raised`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(1, 4)) // 32 GPUs: the job fits the cluster
			var running []RunningJob
			if tc.running {
				running = append(running, pin(t, s, build.Job("a-run").Queue("a").GPUs(8).Obj(), t0, "r0-n-0"))
			}
			big := build.Job("big").Queue("a").Pods(2).GPUs(8).Obj()
			for _, p := range []Policy{Corral, Greedy} {
				plan := New(Config{Policy: p}).Cycle(&Snapshot{State: s.Clone(), Pending: pendingOf(big), Running: running, Queues: tc.queues, Now: t0})
				r := reasonOf(plan, big.ID)
				if r.Verdict != placement.WaitQuota || r.AboveLimit != tc.wantAbove || r.Pods != 2 {
					t.Errorf("%s: verdict %v, AboveLimit %v, pods %d; want WaitQuota, %v, 2", p, r.Verdict, r.AboveLimit, r.Pods, tc.wantAbove)
				}
				if !strings.Contains(r.Message, tc.wantWhy) {
					t.Errorf("%s: reason %q, want %q", p, r.Message, tc.wantWhy)
				}
			}
		})
	}
}
