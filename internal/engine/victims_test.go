package engine

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/workload"
)

// TestJobWaitsForItsTerminatingVictims: a job pods were evicted for waits
// while they terminate, up to VictimWait; pods evicted for another job do
// not hold it.
func TestJobWaitsForItsTerminatingVictims(t *testing.T) {
	now := time.Unix(10_000, 0)
	cases := map[string]struct {
		forJob string
		since  time.Duration // before now
		waits  bool
	}{
		"its victim terminates":   {forJob: "hi", since: time.Second, waits: true},
		"past VictimWait":         {forJob: "hi", since: VictimWait},
		"evicted for another job": {forJob: "other", since: time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo(), build.Node().Name("n").Times(2))
			hi := build.Job("hi").Pods(1).GPUs(8).Obj()
			plan := New(Config{}).Cycle(&Snapshot{State: s, Now: now, Pending: []PendingJob{{Job: hi}},
				Terminating: []TerminatingPod{{Name: "ns/low", For: workload.JobID(tc.forJob), Since: now.Add(-tc.since)}}})
			waited := len(plan.Pending) == 1 && plan.Pending[0].Reason.Level == LevelPreemption &&
				plan.Pending[0].Reason.Message == "waiting for 1 preempted pods to terminate (ns/low)"
			if waited != tc.waits || (tc.waits == (len(plan.Binds) == 1)) {
				t.Errorf("waited %v (pending %+v, %d binds), want waited %v", waited, plan.Pending, len(plan.Binds), tc.waits)
			}
		})
	}
}
