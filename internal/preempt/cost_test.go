package preempt

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

func TestRestartCost(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	gpuPod := func(i int, gpus int) cycle.PodBind {
		a := cluster.Alloc{}
		for d := 0; d < gpus; d++ {
			a.Devices = append(a.Devices, cluster.DeviceShare{Device: d, Milli: workload.MilliPerGPU})
		}
		return cycle.PodBind{Placed: cluster.Placed{Pod: workload.PodRef{Job: "j", Index: i}, Alloc: a}}
	}
	running := func(ckpt, overhead time.Duration, reported time.Time) cycle.RunningJob {
		return cycle.RunningJob{
			Job:         &workload.Job{ID: "j", CheckpointInterval: ckpt, RestartOverhead: overhead},
			Pods:        []cycle.PodBind{gpuPod(0, 8), gpuPod(1, 8)},
			Start:       t0,
			Checkpoints: cycle.Checkpoints{}.Add(reported),
		}
	}
	cases := []struct {
		name string
		rj   cycle.RunningJob
		pods []workload.PodRef
		now  time.Time
		want float64 // GPU-seconds
	}{
		{"never checkpoints: all work since start", running(0, 0, time.Time{}), nil, t0.Add(time.Hour), 16 * 3600},
		// Issue 17: only reported checkpoints count.
		{"a declared interval is no report: all since start", running(40*time.Minute, 0, time.Time{}), nil, t0.Add(time.Hour), 16 * 3600},
		{"no report: all since start plus the overhead", running(30*time.Minute, 10*time.Minute, time.Time{}), nil,
			t0.Add(time.Hour), 16 * (3600 + 10*60)},
		{"reported checkpoint wins", running(40*time.Minute, 0, t0.Add(55*time.Minute)), nil, t0.Add(time.Hour), 16 * 5 * 60},
		{"reported checkpoint in the future is ignored", running(0, 0, t0.Add(2*time.Hour)), nil, t0.Add(time.Hour), 16 * 3600},
		{"only the named pods", running(0, 0, time.Time{}), []workload.PodRef{{Job: "j", Index: 1}}, t0.Add(time.Hour), 8 * 3600},
		{"before the first checkpoint: all since start, overhead included", running(30*time.Minute, 10*time.Minute, time.Time{}), nil,
			t0.Add(20 * time.Minute), 16 * (20*60 + 10*60)},
		{"a report from before this run's start is no checkpoint of it", running(30*time.Minute, 0, t0.Add(-time.Minute)), nil,
			t0.Add(time.Hour), 16 * 3600},
		{"before start: only the overhead", running(0, 5*time.Minute, time.Time{}), nil, t0.Add(-time.Minute), 16 * 5 * 60},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RestartCost(c.rj, c.pods, c.now); got != c.want {
				t.Errorf("RestartCost = %v GPU-s, want %v", got, c.want)
			}
		})
	}
}
