package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/baseline"
	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// TestJobsOverTheirQueueLimitAreCountedApart: queue a may hold 16 GPUs of a
// 48-GPU cluster. A 24-GPU job of a can never start there (a simulation
// never raises the limit): it is counted in JobsOverQueueLimit and listed
// with the scheduler's reason, not as still pending. Two 16-GPU jobs of a
// submitted together are only held back in turn by the limit (the
// cluster has room for both): both complete. A policy without queue limits
// (kube-gang) runs the big job.
func TestJobsOverTheirQueueLimitAreCountedApart(t *testing.T) {
	h100 := func(n int64) cycle.Amounts { return cycle.Amounts{cycle.GPU("H100"): n * workload.MilliPerGPU} }
	in := Input{ClusterName: "test", Topology: build.Topo("rack"), Nodes: build.Racks(1, 6), TraceName: "test",
		Queues: []cycle.QueueSpec{{Name: "a", Limit: h100(16)}, {Name: "b"}}}
	huge := build.Job("a-huge").Queue("a").Pods(3).GPUs(8).Obj()
	huge.Source = "trace.csv:2"
	in.Jobs = []Job{
		job(huge, time.Hour),
		job(build.Job("a-first").Queue("a").Pods(2).GPUs(8).Submit(1).Obj(), time.Hour),
		job(build.Job("a-second").Queue("a").Pods(2).GPUs(8).Submit(2).Obj(), time.Hour),
		job(build.Job("b-small").Queue("b").GPUs(8).Submit(3).Obj(), time.Hour),
	}
	cases := map[string]struct {
		policy    engine.Policy
		wantOver  int
		wantDone  int
		wantWhy   string // the rejection listed for a-huge; "" for none
		wantLimit bool   // a-second waited for a-first: the limit, not the room, held it back
	}{
		"corral": {policy: engine.Corral, wantOver: 1, wantDone: 3, wantLimit: true,
			wantWhy: `queue "a"'s limit of gpu/H100 is 16 H100 GPUs and the job asks 24 H100 GPUs: it cannot start in this queue unless the limit is raised`},
		"kueue-tas": {policy: baseline.KueueTASName, wantOver: 1, wantDone: 3, wantLimit: true,
			wantWhy: "ClusterQueue a: insufficient quota for gpu/H100: request (24000) > maximum capacity (16000)"},
		"kube-gang has no limits": {policy: baseline.KubeGangName, wantOver: 0, wantDone: 4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, rej, err := Run(in, Config{Policy: tc.policy, Protocol: Replay, Clock: fakeClock()})
			if err != nil {
				t.Fatal(err)
			}
			s := res.Summary
			if s.JobsOverQueueLimit != tc.wantOver || s.JobsStillPending != 0 || s.JobsCompleted != tc.wantDone || s.JobsNeverFit != 0 {
				t.Errorf("over limit %d, still pending %d, completed %d, never fit %d; want %d, 0, %d, 0",
					s.JobsOverQueueLimit, s.JobsStillPending, s.JobsCompleted, s.JobsNeverFit, tc.wantOver, tc.wantDone)
			}
			if tc.wantLimit && s.WaitMaxS < time.Hour.Seconds()-10 {
				t.Errorf("longest wait %.0f s, want a-second's, about an hour", s.WaitMaxS)
			}
			var got []Rejection
			for _, r := range rej {
				if r.Job == huge.ID {
					got = append(got, r)
				}
			}
			switch {
			case tc.wantWhy == "" && len(got) > 0:
				t.Errorf("a-huge listed as never starting: %+v", got)
			case tc.wantWhy != "" && (len(got) != 1 || got[0].Source != huge.Source || !strings.Contains(got[0].Reason, tc.wantWhy)):
				t.Errorf("a-huge's rejections %+v, want one from %s saying %q", got, huge.Source, tc.wantWhy)
			}
		})
	}
}
