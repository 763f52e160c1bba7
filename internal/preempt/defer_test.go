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
			Pods: []cycle.PodBind{{Placed: cluster.Placed{Pod: workload.PodRef{Job: j.ID}, Alloc: a}}}}
	}
	cases := map[string]struct {
		running []cycle.RunningJob
		now     time.Duration // since t0
		wait    time.Duration
		want    Deferral
		wantOK  bool
	}{
		// Checkpoints are only known once reported (issue 17): a victim is
		// waited for when its reported intervals predict its next.
		"checkpoint in 5 min: wait for it, save 25 min on 2 GPUs": {
			running: []cycle.RunningJob{running("a", mins(30), t0.Add(mins(60)))}, now: mins(85),
			want: Deferral{Retry: t0.Add(mins(90) + time.Second), Saved: 2 * mins(25).Seconds()}, wantOK: true,
		},
		// a saves 25 min now but checkpoints at 90 and has lost 10 again
		// by b's checkpoint at 100.
		"the latest victim's checkpoint decides": {
			running: []cycle.RunningJob{running("a", mins(30), t0.Add(mins(60))), running("b", mins(20), t0.Add(mins(80)))}, now: mins(85),
			want: Deferral{Retry: t0.Add(mins(100) + time.Second), Saved: 2*mins(15).Seconds() + 2*mins(5).Seconds()}, wantOK: true,
		},
		// Waiting for the checkpoint in 10 min would, 1 s after it, wait
		// for the next one again: the preemption would never come.
		"checkpoints every 10 min, reported 1 s ago: evicted now": {
			running: []cycle.RunningJob{running("a", mins(10), t0.Add(mins(60)))}, now: mins(60) + time.Second,
		},
		"early in its interval (1 of 10 min lost): evicted now": {
			running: []cycle.RunningJob{running("a", mins(10), t0.Add(mins(60)))}, now: mins(61),
		},
		// a and b checkpoint in turn: by b's checkpoint a has lost again
		// what it would save now.
		"interleaved checkpoints save nothing: evicted now": {
			running: []cycle.RunningJob{running("a", mins(10), t0.Add(mins(60))), running("b", mins(10), t0.Add(mins(55)))}, now: mins(60) + time.Second,
		},
		"its own intervals, not the declared one": {
			running: []cycle.RunningJob{running("a", mins(35), t0.Add(mins(80)))}, now: mins(100),
			want: Deferral{Retry: t0.Add(mins(120) + time.Second), Saved: 2 * mins(20).Seconds()}, wantOK: true,
		},
		"one report predicts from the span since start": {
			running: []cycle.RunningJob{running("a", mins(30), t0.Add(mins(40)))}, now: mins(65),
			want: Deferral{Retry: t0.Add(mins(80) + time.Second), Saved: 2 * mins(25).Seconds()}, wantOK: true,
		},
		"nothing reported: evicted now": {
			running: []cycle.RunningJob{running("a", mins(30), time.Time{})}, now: mins(25),
		},
		"a victim that never checkpoints is evicted now": {
			running: []cycle.RunningJob{running("a", mins(30), t0.Add(mins(60))), running("b", 0, time.Time{})}, now: mins(85),
		},
		"checkpoint further away than the wait": {
			running: []cycle.RunningJob{running("a", mins(60), t0.Add(mins(120)))}, now: mins(125),
		},
		"a negative wait never defers": {
			running: []cycle.RunningJob{running("a", mins(30), t0.Add(mins(60)))}, now: mins(85), wait: -1,
		},
		"a late checkpoint within the grace: look again soon": {
			running: []cycle.RunningJob{running("a", mins(30), t0.Add(mins(60)))}, now: mins(93),
			want: Deferral{Retry: t0.Add(mins(93) + mins(2.5)), Saved: 2 * mins(33).Seconds()}, wantOK: true,
		},
		"a checkpoint overdue past the grace is not waited for": {
			running: []cycle.RunningJob{running("a", mins(30), t0.Add(mins(60)))}, now: mins(100),
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
