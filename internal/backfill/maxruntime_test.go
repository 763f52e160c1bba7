package backfill

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

func TestPastMaxRuntime(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	running := func(id string, maxRun, ran time.Duration, pods int) cycle.RunningJob {
		rj := cycle.RunningJob{Job: build.Job(id).MaxRuntime(maxRun).Obj(), Start: t0.Add(-ran)}
		for i := range pods {
			rj.Pods = append(rj.Pods, cycle.PodBind{Placed: cluster.Placed{Pod: workload.PodRef{Job: rj.Job.ID, Index: i}}})
		}
		return rj
	}
	jobs := []cycle.RunningJob{
		running("z-over", time.Hour, 90*time.Minute, 2),
		running("a-exact", time.Hour, time.Hour, 1),
		running("under", time.Hour, 59*time.Minute, 1),
		running("no-limit", 0, 100*time.Hour, 1),
		running("no-pods", time.Hour, 2*time.Hour, 0),
	}
	type got struct {
		Job      workload.JobID
		Pods     int
		Terminal bool
		Message  string
	}
	cases := map[string]struct {
		action MaxRuntimeAction
		want   []got
	}{
		"terminate (the default)": {action: "", want: []got{
			{Job: "a-exact", Pods: 1, Terminal: true, Message: "ran 1h0m0s, past its max runtime 1h0m0s: terminated"},
			{Job: "z-over", Pods: 2, Terminal: true, Message: "ran 1h30m0s, past its max runtime 1h0m0s: terminated"},
		}},
		"requeue": {action: Requeue, want: []got{
			{Job: "a-exact", Pods: 1, Message: "ran 1h0m0s, past its max runtime 1h0m0s: requeued from its last checkpoint"},
			{Job: "z-over", Pods: 2, Message: "ran 1h30m0s, past its max runtime 1h0m0s: requeued from its last checkpoint"},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out []got
			for _, o := range PastMaxRuntime(jobs, t0, tc.action) {
				ev := o.Eviction
				if ev.Cause != cycle.CauseMaxRuntime || ev.Job != o.Running.Job.ID || ev.LostGPUSeconds != 0 {
					t.Errorf("%s: eviction %+v: want cause %s, its own job, and no price", ev.Job, ev, cycle.CauseMaxRuntime)
				}
				out = append(out, got{Job: ev.Job, Pods: len(ev.Pods), Terminal: ev.Terminal, Message: ev.Message})
			}
			if diff := cmp.Diff(tc.want, out); diff != "" {
				t.Errorf("PastMaxRuntime (-want +got):\n%s", diff)
			}
		})
	}
}
