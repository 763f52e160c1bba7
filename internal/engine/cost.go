package engine

import (
	"time"

	"github.com/corral-dev/corral/internal/workload"
)

// LastCheckpoint is when the running job last saved its state: the time it
// reported, else the last multiple of its checkpoint interval since its
// work began (after the restart overhead), else its start: before its first
// checkpoint, everything since the start is lost, the overhead it spent
// starting included.
func LastCheckpoint(rj RunningJob, now time.Time) time.Time {
	if !rj.LastCheckpoint.IsZero() && !rj.LastCheckpoint.After(now) && rj.LastCheckpoint.After(rj.Start) {
		return rj.LastCheckpoint
	}
	if ci := rj.Job.CheckpointInterval; ci > 0 && now.After(rj.Start) {
		begin := rj.Start.Add(rj.Job.RestartOverhead)
		if done := now.Sub(begin) / ci; done > 0 {
			return begin.Add(done * ci)
		}
	}
	return rj.Start
}

// RestartCost is the GPU-seconds of work a restart of these pods throws
// away now: their GPUs × the time since the job's last checkpoint, plus the
// GPUs × the restart overhead the job pays before it makes progress again.
// pods nil means the whole job.
func RestartCost(rj RunningJob, pods []workload.PodRef, now time.Time) float64 {
	var milli int64
	if pods == nil {
		for _, p := range rj.Pods {
			milli += p.Alloc.GPUMilli()
		}
	} else {
		want := make(map[workload.PodRef]bool, len(pods))
		for _, p := range pods {
			want[p] = true
		}
		for _, p := range rj.Pods {
			if want[p.Pod] {
				milli += p.Alloc.GPUMilli()
			}
		}
	}
	gpus := float64(milli) / workload.MilliPerGPU
	lost := now.Sub(LastCheckpoint(rj, now))
	if lost < 0 {
		lost = 0
	}
	return gpus * (lost + rj.Job.RestartOverhead).Seconds()
}

// RunFor is how long the job has been running now.
func RunFor(rj RunningJob, now time.Time) time.Duration {
	if now.Before(rj.Start) {
		return 0
	}
	return now.Sub(rj.Start)
}
