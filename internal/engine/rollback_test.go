package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

// TestGangBelowItsMinimumIsRolledBack: a gang running below its minimum
// (its binding cut off part-way) whose rest finds no room is evicted whole,
// with its cause, once CutOffGrace has passed since its last pod started;
// at once when the rest can never fit. The rest placed, a replacement of a
// remediated job, or a policy without gangs: nothing is rolled back.
func TestGangBelowItsMinimumIsRolledBack(t *testing.T) {
	cases := map[string]struct {
		nodes   int           // 8-GPU nodes
		blocked bool          // a job nobody may preempt holds the last node
		below   time.Duration // since the gang's last pod started
		within  bool          // the waiting pods replace failed ranks
		refused bool          // its queue refuses the gang
		policy  Policy
		want    string // part of the rollback's message; "" none
	}{
		"within the grace":            {nodes: 5, blocked: true, below: CutOffGrace / 2},
		"past the grace, no room":     {nodes: 5, blocked: true, below: CutOffGrace, want: "found no room for 10s"},
		"past the grace, rest fits":   {nodes: 5, below: time.Minute},
		"the rest can never fit":      {nodes: 3, below: time.Second, want: "can never fit"},
		"replacement ranks":           {nodes: 5, blocked: true, below: time.Minute, within: true},
		"a policy without gangs":      {nodes: 5, blocked: true, below: time.Minute, policy: Binpack},
		"queue refuses it: untouched": {nodes: 5, blocked: true, below: time.Minute, refused: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, build.State(build.Topo(), build.Node().Name("n").Times(tc.nodes)), Config{Policy: tc.policy})
			g := build.Job("g").Pods(4).GPUs(8).Obj()
			w.run(g, "n-0", "n-1") // two of four bound
			snap := &Snapshot{State: w.s, Now: w.now.Add(tc.below), Running: []RunningJob{*w.running["g"]}}
			if tc.blocked {
				blocker := build.Job("blocker").Pods(tc.nodes - 3).GPUs(8).Priority(100).Obj()
				var nodes []string
				for i := 3; i < tc.nodes; i++ {
					nodes = append(nodes, "n-"+string(rune('0'+i)))
				}
				w.run(blocker, nodes...)
				snap.Running = append(snap.Running, *w.running["blocker"])
			}
			pj := PendingJob{Job: g, Waiting: []workload.PodRef{{Job: "g", Index: 2}, {Job: "g", Index: 3}}}
			if tc.within {
				pj.Within = Pin{Level: "cluster", Domain: "cluster"}
			}
			if tc.refused {
				g.Queue = "nope"
				snap.Queues = []queue.Spec{{Name: "team"}}
			}
			snap.Pending = []PendingJob{pj}
			plan := New(Config{Policy: tc.policy}).Cycle(snap)
			var got []Eviction
			for _, ev := range plan.Evictions {
				if ev.Cause == CauseRollback {
					got = append(got, ev)
				}
			}
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("rolled back: %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Job != "g" || len(got[0].Pods) != 2 || !strings.Contains(got[0].Message, tc.want) {
				t.Fatalf("rollbacks %+v, want g's two pods with %q", got, tc.want)
			}
			if len(plan.Binds) != 0 {
				t.Errorf("binds beside the rollback: %+v", plan.Binds)
			}
		})
	}
}
