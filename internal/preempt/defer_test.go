package preempt

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

func TestDeferToCheckpoint(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	mins := func(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }
	// running is a one-pod, 2-GPU job started at t0.
	running := func(id string, ckpt time.Duration, reported time.Time) cycle.RunningJob {
		j := &workload.Job{ID: workload.JobID(id), CheckpointInterval: ckpt}
		a := cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 0, Milli: workload.MilliPerGPU}, {Device: 1, Milli: workload.MilliPerGPU}}}
		return cycle.RunningJob{Job: j, Start: t0, LastCheckpoint: reported,
			Pods: []cycle.PodBind{{Pod: workload.PodRef{Job: j.ID}, Alloc: a}}}
	}
	cases := map[string]struct {
		running []cycle.RunningJob
		now     time.Duration // since t0
		wait    time.Duration
		want    Deferral
		wantOK  bool
	}{
		"checkpoint in 5 min: wait for it, save 25 min on 2 GPUs": {
			running: []cycle.RunningJob{running("a", mins(30), time.Time{})}, now: mins(25),
			want: Deferral{Retry: t0.Add(mins(30) + time.Second), Saved: 2 * mins(25).Seconds()}, wantOK: true,
		},
		"the latest victim's checkpoint decides": {
			running: []cycle.RunningJob{running("a", mins(30), time.Time{}), running("b", mins(40), time.Time{})}, now: mins(25),
			want: Deferral{Retry: t0.Add(mins(40) + time.Second), Saved: 2*mins(25).Seconds() + 2*mins(25).Seconds()}, wantOK: true,
		},
		"a victim that never checkpoints is evicted now": {
			running: []cycle.RunningJob{running("a", mins(30), time.Time{}), running("b", 0, time.Time{})}, now: mins(25),
		},
		"checkpoint further away than the wait": {
			running: []cycle.RunningJob{running("a", mins(60), time.Time{})}, now: mins(25),
		},
		"a negative wait never defers": {
			running: []cycle.RunningJob{running("a", mins(30), time.Time{})}, now: mins(25), wait: -1,
		},
		"a late checkpoint within the grace: look again soon": {
			running: []cycle.RunningJob{running("a", mins(30), t0.Add(mins(10)))}, now: mins(43),
			want: Deferral{Retry: t0.Add(mins(43) + mins(2.5)), Saved: 2 * mins(33).Seconds()}, wantOK: true,
		},
		"a checkpoint overdue past the grace is not waited for": {
			running: []cycle.RunningJob{running("a", mins(30), t0.Add(mins(10)))}, now: mins(50),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			victims := map[workload.JobID]bool{}
			for _, rj := range tc.running {
				victims[rj.Job.ID] = true
			}
			got, ok := DeferToCheckpoint(tc.running, victims, t0.Add(tc.now), tc.wait)
			if ok != tc.wantOK {
				t.Fatalf("DeferToCheckpoint ok = %v, want %v (%+v)", ok, tc.wantOK, got)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DeferToCheckpoint (-want +got):\n%s", diff)
			}
		})
	}
}
