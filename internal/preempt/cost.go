package preempt

import (
	"time"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// LastCheckpoint is when the running job last saved its state, as it
// reported it; a job that reported none loses everything since its start,
// the overhead it spent starting included. A declared interval is not a
// report (issue 17): real checkpoints drift from it (the simulator's jitter
// them), and a schedule inferred from it made the preemption cost look
// lower than the work really thrown away.
func LastCheckpoint(rj cycle.RunningJob, now time.Time) time.Time {
	if !rj.LastCheckpoint.IsZero() && !rj.LastCheckpoint.After(now) && rj.LastCheckpoint.After(rj.Start) {
		return rj.LastCheckpoint
	}
	return rj.Start
}

// observedInterval is the job's own mean checkpoint interval, from its
// last reported checkpoint: the span since its start divided by how many
// declared intervals fit in it. ok is false before the first report.
// Requiring two intervals was tried (issue 17) and lost more work on the
// issue-5 queues workload (162 against 144 GPU-hours, seeds 42-43): waiting
// on one observed interval is right more often than evicting at once.
func observedInterval(rj cycle.RunningJob, now time.Time) (time.Duration, bool) {
	ci := rj.Job.CheckpointInterval
	last := LastCheckpoint(rj, now)
	if ci <= 0 || last.Equal(rj.Start) {
		return 0, false
	}
	span := last.Sub(rj.Start)
	n := (span + ci/2) / ci
	if n < 1 {
		return 0, false
	}
	return span / n, true
}

// RestartCost is the GPU-seconds of work a restart of these pods throws
// away now: their GPUs × the time since the job's last checkpoint, plus the
// GPUs × the restart overhead the job pays before it makes progress again.
// pods nil means the whole job.
func RestartCost(rj cycle.RunningJob, pods []workload.PodRef, now time.Time) float64 {
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
func RunFor(rj cycle.RunningJob, now time.Time) time.Duration {
	if now.Before(rj.Start) {
		return 0
	}
	return now.Sub(rj.Start)
}

// DefaultCheckpointWait bounds how long a preemption may wait for its
// victims' next checkpoint when the engine's configuration names no wait.
const DefaultCheckpointWait = 20 * time.Minute

// Deferral is a preemption held back for its victims' next checkpoint.
type Deferral struct {
	// Retry is when to look again: just after the last victim's checkpoint,
	// or soon when that checkpoint is already late.
	Retry time.Time
	// Saved is the work the wait saves, in GPU-seconds.
	Saved float64
}

// DeferToCheckpoint says whether a preemption of the running jobs named in
// victims should wait: evicting right after a checkpoint throws away only
// the restart overhead, and the victims keep working meanwhile, so waiting
// costs no GPU time, only the waiting job's latency, bounded by wait (zero:
// DefaultCheckpointWait; negative: never wait). A victim that does not
// checkpoint, has reported none yet (observedInterval), or whose predicted
// checkpoint is overdue by more than a quarter of the wait, is evicted now
// (ok false). running is walked in its order.
//
// The wait must save enough: the work the victims would lose now, less
// what they would have lost again by the last victim's checkpoint (a
// victim whose next checkpoint comes earlier goes on working past it), is
// at least deferWorth × their GPUs × the wait. Without that a victim that
// checkpoints more often than the wait was waited for at every checkpoint,
// just after each one, and the preemption never came (issue 17); with it a
// wait starts only once a victim has lost a fifth of its interval, and
// right after the awaited checkpoint the eviction goes ahead.
func DeferToCheckpoint(running []cycle.RunningJob, victims map[workload.JobID]bool, now time.Time, wait time.Duration) (Deferral, bool) {
	if wait == 0 {
		wait = DefaultCheckpointWait
	}
	if wait < 0 {
		return Deferral{}, false
	}
	grace := wait / 4
	type victim struct {
		rj   cycle.RunningJob
		ci   time.Duration
		last time.Time
	}
	var vs []victim
	var latest time.Time
	for _, rj := range running {
		if !victims[rj.Job.ID] {
			continue
		}
		ci, ok := observedInterval(rj, now)
		if !ok {
			return Deferral{}, false
		}
		last := LastCheckpoint(rj, now)
		next := last.Add(ci)
		if next.Sub(now) > wait || now.Sub(next) > grace {
			return Deferral{}, false
		}
		if next.After(latest) {
			latest = next
		}
		vs = append(vs, victim{rj, ci, last})
	}
	var saved, gpus float64
	for _, v := range vs {
		var milli int64
		for _, p := range v.rj.Pods {
			milli += p.Alloc.GPUMilli()
		}
		g := float64(milli) / workload.MilliPerGPU
		gpus += g
		lostNow := g * now.Sub(v.last).Seconds()
		if latest.After(v.last) {
			// Its last checkpoint by then, predicted from its own interval.
			before := v.last.Add(latest.Sub(v.last) / v.ci * v.ci)
			lostNow -= g * latest.Sub(before).Seconds()
		}
		saved += lostNow
	}
	if saved <= 0 || saved < deferWorth*gpus*max(latest.Sub(now), 0).Seconds() {
		return Deferral{}, false
	}
	retry := latest.Add(time.Second)
	if !retry.After(now) {
		retry = now.Add(grace / 2) // the checkpoint is late: look again soon
	}
	return Deferral{Retry: retry, Saved: saved}, true
}

// deferWorth is the least work a checkpoint wait must save per GPU and
// second the preemptor waits.
const deferWorth = 0.25
