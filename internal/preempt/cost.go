package preempt

import (
	"math"
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
	if last := rj.Checkpoints.Within(rj.Start, now).Last(); !last.IsZero() {
		return last
	}
	return rj.Start
}

// Predictability of a victim's next checkpoint, from its own reports only
// (issue 17). A preemption waits for a victim only when at least
// minIntervals intervals were observed in its current run and, from two
// on, their spread (sample standard deviation over mean) is at most
// maxSpread. One interval tells nothing of the spread: such a prediction
// gets the least lateness allowance (lateAllowance). docs/preemption.md
// gives the measurements behind both.
const (
	minIntervals = 1
	maxSpread    = 0.5
)

// predictable is the victim's predicted next checkpoint when its own
// reported intervals make it predictable.
func predictable(rj cycle.RunningJob, now time.Time) (cycle.Prediction, bool) {
	p, ok := rj.Checkpoints.Within(rj.Start, now).Predict()
	if !ok || p.Intervals < minIntervals || p.Mean <= 0 {
		return cycle.Prediction{}, false
	}
	if p.Intervals >= 2 && !(p.Spread <= maxSpread) {
		return cycle.Prediction{}, false
	}
	return p, true
}

// RestartCost is the GPU-seconds of work a restart of these pods throws
// away now: their GPUs × the time since the job's last checkpoint, plus the
// GPUs × the restart overhead the job pays before it makes progress again.
// pods nil means the whole job.
func RestartCost(rj cycle.RunningJob, pods []workload.PodRef, now time.Time) float64 {
	gpus := jobGPUs(rj)
	if pods != nil {
		want := make(map[workload.PodRef]bool, len(pods))
		for _, p := range pods {
			want[p] = true
		}
		var milli int64
		for _, p := range rj.Pods {
			if want[p.Pod] {
				milli += p.Alloc.GPUMilli()
			}
		}
		gpus = float64(milli) / workload.MilliPerGPU
	}
	lost := now.Sub(LastCheckpoint(rj, now))
	if lost < 0 {
		lost = 0
	}
	return gpus * (lost + rj.Job.RestartOverhead).Seconds()
}

// jobGPUs is the GPUs the running job holds.
func jobGPUs(rj cycle.RunningJob) float64 {
	var milli int64
	for _, p := range rj.Pods {
		milli += p.Alloc.GPUMilli()
	}
	return float64(milli) / workload.MilliPerGPU
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
// DefaultCheckpointWait; negative: never wait). The next checkpoint is
// predicted from the victim's own reports (predictable). A victim is
// awaited when its prediction lies within the wait and is not overdue by
// more than its lateness allowance (lateAllowance). The other victims that
// reported a checkpoint in their run (too few or too irregular reports, a
// checkpoint further than the wait or long overdue) do not stop the wait
// but count against it: they would lose the work they do while it lasts. A
// victim that reported none in its run stops it: it may never checkpoint,
// and waiting beside such jobs lost more than it saved (docs/
// preemption.md). With no victim awaited the eviction goes ahead now (ok
// false). running is walked in its order.
//
// The wait must save enough: the work the awaited victims would lose now,
// less what they would have lost again by the last one's checkpoint (a
// victim whose next checkpoint comes earlier goes on working past it), less
// what the others lose meanwhile, is at least deferWorth × all the
// victims' GPUs × the wait. Without that a victim that checkpoints more
// often than the wait was waited for at every checkpoint, just after each
// one, and the preemption never came (issue 17); with it a wait starts only
// once a victim has lost a fifth of its interval, and right after the
// awaited checkpoint the eviction goes ahead.
func DeferToCheckpoint(running []cycle.RunningJob, victims map[workload.JobID]bool, now time.Time, wait time.Duration) (Deferral, bool) {
	if wait = checkpointWait(wait); wait < 0 {
		return Deferral{}, false
	}
	grace := wait / 4
	type victim struct {
		gpus float64
		ci   time.Duration
		last time.Time
	}
	var awaited []victim
	var others, gpus float64 // GPUs of the victims not awaited; of all
	var latest time.Time
	for _, rj := range running {
		if !victims[rj.Job.ID] {
			continue
		}
		g := jobGPUs(rj)
		gpus += g
		if !reportedInRun(rj, now) {
			return Deferral{}, false // may never checkpoint: nothing bounds its loss
		}
		p, ok := awaitedCheckpoint(rj, now, wait)
		if !ok {
			others += g
			continue
		}
		latest = later(latest, p.Next)
		awaited = append(awaited, victim{g, p.Mean, LastCheckpoint(rj, now)})
	}
	if len(awaited) == 0 {
		return Deferral{}, false
	}
	waitFor := max(latest.Sub(now), 0)
	saved := -others * waitFor.Seconds()
	for _, v := range awaited {
		lostNow := v.gpus * now.Sub(v.last).Seconds()
		if latest.After(v.last) {
			// Its last checkpoint by then, predicted from its own interval.
			before := v.last.Add(latest.Sub(v.last) / v.ci * v.ci)
			lostNow -= v.gpus * latest.Sub(before).Seconds()
		}
		saved += lostNow
	}
	if saved <= 0 || saved < deferWorth*gpus*waitFor.Seconds() {
		return Deferral{}, false
	}
	retry := latest.Add(time.Second)
	if !retry.After(now) {
		retry = now.Add(grace / 2) // the checkpoint is late: look again soon
	}
	return Deferral{Retry: retry, Saved: saved}, true
}

// AwaitedCost is what evicting the job costs when the preemption waits for
// its next checkpoint: its GPUs × its restart overhead, plus deferWorth ×
// its GPUs × the time until that checkpoint (what DeferToCheckpoint asks a
// wait to be worth). +Inf when its checkpoint would not be awaited
// (unpredictable, beyond the wait, long overdue; wait as in
// DeferToCheckpoint). The search prices a victim at the lower of this and
// its RestartCost, so that of two victims the one about to checkpoint is
// chosen, and then waited for.
func AwaitedCost(rj cycle.RunningJob, now time.Time, wait time.Duration) float64 {
	if wait = checkpointWait(wait); wait < 0 {
		return math.Inf(1)
	}
	p, ok := awaitedCheckpoint(rj, now, wait)
	if !ok {
		return math.Inf(1)
	}
	return jobGPUs(rj) * (rj.Job.RestartOverhead.Seconds() + deferWorth*max(p.Next.Sub(now), 0).Seconds())
}

// checkpointWait is the configured wait with zero read as
// DefaultCheckpointWait (negative: never wait).
func checkpointWait(wait time.Duration) time.Duration {
	if wait == 0 {
		return DefaultCheckpointWait
	}
	return wait
}

// awaitedCheckpoint is the victim's next checkpoint when a preemption would
// wait for it (wait positive): predictable from its reports, within the
// wait, and overdue by no more than its lateness allowance.
func awaitedCheckpoint(rj cycle.RunningJob, now time.Time, wait time.Duration) (cycle.Prediction, bool) {
	p, ok := predictable(rj, now)
	if !ok || p.Next.Sub(now) > wait || now.Sub(p.Next) > lateAllowance(p, wait) {
		return cycle.Prediction{}, false
	}
	return p, true
}

// reportedInRun says whether the job reported a checkpoint in its current
// run.
func reportedInRun(rj cycle.RunningJob, now time.Time) bool {
	return !rj.Checkpoints.Within(rj.Start, now).Last().IsZero()
}

// lateAllowance is how late a victim's predicted checkpoint may be and
// still be waited for: twice its own spread of intervals (a jittered job's
// checkpoint is often that late), at least a quarter of the wait and at
// most half of it; a quarter when one interval leaves the spread unknown.
func lateAllowance(p cycle.Prediction, wait time.Duration) time.Duration {
	if math.IsNaN(p.Spread) {
		return wait / 4
	}
	return max(wait/4, min(wait/2, time.Duration(2*p.Spread*float64(p.Mean))))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// deferWorth is the least work a checkpoint wait must save per GPU and
// second the preemptor waits.
const deferWorth = 0.25
