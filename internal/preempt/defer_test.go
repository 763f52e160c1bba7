package preempt

import (
	"math"
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
	// running is a one-pod, 2-GPU job that started at start (minutes after
	// t0), declares a 10-minute checkpoint interval (which must not matter)
	// and reported checkpoints at the given minutes after t0.
	runningOn := func(gpus int, id string, start float64, reports ...float64) cycle.RunningJob {
		j := &workload.Job{ID: workload.JobID(id), CheckpointInterval: 10 * time.Minute}
		var a cluster.Alloc
		for d := range gpus {
			a.Devices = append(a.Devices, cluster.DeviceShare{Device: d, Milli: workload.MilliPerGPU})
		}
		rj := cycle.RunningJob{Job: j, Start: t0.Add(mins(start)),
			Pods: []cycle.PodBind{{Placed: cluster.Placed{Pod: workload.PodRef{Job: j.ID}, Alloc: a}}}}
		for _, m := range reports {
			rj.Checkpoints = rj.Checkpoints.Add(t0.Add(mins(m)))
		}
		return rj
	}
	running := func(id string, start float64, reports ...float64) cycle.RunningJob {
		return runningOn(2, id, start, reports...)
	}
	cases := map[string]struct {
		running []cycle.RunningJob
		now     float64 // minutes after t0
		wait    time.Duration
		want    Deferral
		wantOK  bool
	}{
		// Only reported checkpoints count (issue 17): a victim is waited for
		// when its own intervals predict its next.
		"regular reporter, checkpoint in 5 min: wait for it, save 25 min on 2 GPUs": {
			running: []cycle.RunningJob{running("a", 0, 30, 60, 90)}, now: 115,
			want: Deferral{Retry: t0.Add(mins(120) + time.Second), Saved: 2 * mins(25).Seconds()}, wantOK: true,
		},
		"its own mean interval, not the declared one": {
			running: []cycle.RunningJob{running("a", 0, 35, 70, 105)}, now: 125,
			want: Deferral{Retry: t0.Add(mins(140) + time.Second), Saved: 2 * mins(20).Seconds()}, wantOK: true,
		},
		"a jittered but regular reporter is predicted by its mean": {
			running: []cycle.RunningJob{running("a", 0, 28, 60, 89, 121)}, now: 140,
			want: Deferral{Retry: t0.Add(mins(152) + time.Second), Saved: 2 * mins(19).Seconds()}, wantOK: true,
		},
		// a checkpoints at 120 and has lost 5 min again by b's at 125.
		"the latest victim's checkpoint decides": {
			running: []cycle.RunningJob{running("a", 0, 30, 60, 90), running("b", 0, 45, 65, 85, 105)}, now: 115,
			want: Deferral{Retry: t0.Add(mins(125) + time.Second), Saved: 2*mins(20).Seconds() + 2*mins(10).Seconds()}, wantOK: true,
		},
		"irregular reporter (40, 10, 40 min): evicted now": {
			running: []cycle.RunningJob{running("a", 0, 10, 50, 60, 100)}, now: 125,
		},
		// One interval predicts the next checkpoint but not how late it
		// may come: it is awaited up to a quarter of the wait late, not the
		// allowance a known spread could earn.
		"one interval is enough to wait for the checkpoint it predicts": {
			running: []cycle.RunningJob{running("a", 0, 30, 60)}, now: 85,
			want: Deferral{Retry: t0.Add(mins(90) + time.Second), Saved: 2 * mins(25).Seconds()}, wantOK: true,
		},
		"one interval, the checkpoint less than a quarter of the wait late: look again soon": {
			running: []cycle.RunningJob{running("a", 0, 30, 60)}, now: 94,
			want: Deferral{Retry: t0.Add(mins(94) + mins(2.5)), Saved: 2 * mins(34).Seconds()}, wantOK: true,
		},
		"one interval, the checkpoint more than a quarter of the wait late: evicted now": {
			running: []cycle.RunningJob{running("a", 0, 30, 60)}, now: 96,
		},
		"one report is no interval: evicted now": {
			running: []cycle.RunningJob{running("a", 0, 30)}, now: 55,
		},
		"nothing reported: evicted now": {
			running: []cycle.RunningJob{running("a", 0)}, now: 85,
		},
		"a victim that reported nothing among regular ones: evicted now": {
			running: []cycle.RunningJob{running("a", 0, 30, 60, 90), running("b", 0)}, now: 115,
		},
		// b reported once, so it cannot be predicted, and loses the 5
		// minutes' work it does meanwhile; a saves 20 minutes more than that.
		"a victim with too few reports beside a regular one: waited for the regular one": {
			running: []cycle.RunningJob{running("a", 0, 30, 60, 90), running("b", 0, 100)}, now: 115,
			want: Deferral{Retry: t0.Add(mins(120) + time.Second), Saved: 2*mins(25).Seconds() - 2*mins(5).Seconds()}, wantOK: true,
		},
		"an unpredictable victim much bigger than the regular one: evicted now": {
			running: []cycle.RunningJob{running("a", 0, 30, 60, 90), runningOn(16, "b", 0, 100)}, now: 115,
		},
		// b checkpoints every 50-60 min, next in 51 min: beyond the wait.
		"a victim whose checkpoint is beyond the wait counts against it too": {
			running: []cycle.RunningJob{running("a", 0, 30, 60, 90), runningOn(4, "b", 0, 1, 61, 111)}, now: 115,
			want: Deferral{Retry: t0.Add(mins(120) + time.Second), Saved: 2*mins(25).Seconds() - 4*mins(5).Seconds()}, wantOK: true,
		},
		"reports of an earlier run do not count": {
			running: []cycle.RunningJob{running("a", 100, 30, 60, 90)}, now: 115,
		},
		// Waiting for the checkpoint in 10 min would, 1 s after it, wait
		// for the next one again: the preemption would never come.
		"checkpoints every 10 min, reported 1 s ago: evicted now": {
			running: []cycle.RunningJob{running("a", 0, 40, 50, 60)}, now: 60 + 1.0/60,
		},
		"early in its interval (1 of 10 min lost): evicted now": {
			running: []cycle.RunningJob{running("a", 0, 40, 50, 60)}, now: 61,
		},
		// a and b checkpoint in turn: by b's checkpoint a has lost again
		// what it would save now.
		"interleaved checkpoints save nothing: evicted now": {
			running: []cycle.RunningJob{running("a", 0, 40, 50, 60), running("b", 0, 35, 45, 55)}, now: 60 + 1.0/60,
		},
		"the wait is bounded: a checkpoint further away than the wait is not waited for": {
			running: []cycle.RunningJob{running("a", 0, 60, 120, 180)}, now: 185,
		},
		"a shorter configured wait bounds it too": {
			running: []cycle.RunningJob{running("a", 0, 30, 60, 90)}, now: 110, wait: mins(5),
		},
		"a negative wait never defers": {
			running: []cycle.RunningJob{running("a", 0, 30, 60, 90)}, now: 115, wait: -1,
		},
		"a late checkpoint within the grace: look again soon": {
			running: []cycle.RunningJob{running("a", 0, 30, 60, 90)}, now: 123,
			want: Deferral{Retry: t0.Add(mins(123) + mins(2.5)), Saved: 2 * mins(33).Seconds()}, wantOK: true,
		},
		"a checkpoint overdue past the grace is not waited for": {
			running: []cycle.RunningJob{running("a", 0, 30, 60, 90)}, now: 130,
		},
		// Intervals 24, 36, 24, 36 min: spread 0.23, so a checkpoint up to
		// 10 min (half the wait; twice its spread would be 14) late is
		// still expected.
		"a jittered reporter's late checkpoint within twice its spread: look again soon": {
			running: []cycle.RunningJob{running("a", 0, 30, 54, 90, 114, 150)}, now: 188,
			want: Deferral{Retry: t0.Add(mins(188) + mins(2.5)), Saved: 2 * mins(38).Seconds()}, wantOK: true,
		},
		"a jittered reporter's checkpoint later than half the wait is not waited for": {
			running: []cycle.RunningJob{running("a", 0, 30, 54, 90, 114, 150)}, now: 191,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			victims := map[workload.JobID]bool{}
			for _, rj := range tc.running {
				victims[rj.Job.ID] = true
			}
			got, ok := DeferToCheckpoint(tc.running, victims, t0.Add(mins(tc.now)), tc.wait)
			if ok != tc.wantOK {
				t.Fatalf("DeferToCheckpoint ok = %v, want %v (%+v)", ok, tc.wantOK, got)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DeferToCheckpoint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAwaitedCost(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	mins := func(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }
	// A 4-GPU job with a 5-minute restart overhead that started at t0 and
	// reported the given minutes.
	job := func(reports ...float64) cycle.RunningJob {
		j := &workload.Job{ID: "v", RestartOverhead: 5 * time.Minute}
		var a cluster.Alloc
		for d := range 4 {
			a.Devices = append(a.Devices, cluster.DeviceShare{Device: d, Milli: workload.MilliPerGPU})
		}
		rj := cycle.RunningJob{Job: j, Start: t0, Pods: []cycle.PodBind{{Placed: cluster.Placed{Pod: workload.PodRef{Job: j.ID}, Alloc: a}}}}
		for _, m := range reports {
			rj.Checkpoints = rj.Checkpoints.Add(t0.Add(mins(m)))
		}
		return rj
	}
	inf := math.Inf(1)
	cases := map[string]struct {
		rj   cycle.RunningJob
		now  float64
		wait time.Duration
		want float64
	}{
		"checkpoint in 8 min: overhead plus a quarter of the wait": {job(30, 60, 90), 112, 0, 4 * (mins(5) + mins(8)/4).Seconds()},
		"checkpoint beyond the wait":                               {job(30, 60, 90), 95, 0, inf},
		"one interval predicts it":                                 {job(30, 60), 85, 0, 4 * (mins(5) + mins(5)/4).Seconds()},
		"unpredictable (one report, no interval)":                  {job(30), 55, 0, inf},
		"nothing reported":                                         {job(), 85, 0, inf},
		"waiting turned off":                                       {job(30, 60, 90), 112, -1, inf},
		"a shorter wait":                                           {job(30, 60, 90), 112, mins(5), inf},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := AwaitedCost(tc.rj, t0.Add(mins(tc.now)), tc.wait); got != tc.want {
				t.Errorf("AwaitedCost = %v, want %v", got, tc.want)
			}
		})
	}
}
