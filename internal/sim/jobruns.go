package sim

import (
	"time"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
)

func (r *replay) startJob(jr *jobRun, now time.Time) {
	jr.started, jr.start = true, now
	jr.partialSince = time.Time{}
	jr.reported, jr.reportedWork = nil, 0
	jr.runOverhead = jr.job.RestartOverhead
	if jr.paused && r.inj != nil && r.inj.m.ReplaceOverhead >= 0 {
		jr.runOverhead = r.inj.m.ReplaceOverhead
	}
	jr.paused = false
	if !jr.failedAt.IsZero() {
		r.recovered(jr, now)
		r.fail.overhead += jr.job.GPUs() * jr.runOverhead.Seconds()
		jr.overheadCounted = true
	} else {
		jr.overheadCounted = false
	}
	for _, b := range jr.bound {
		r.useful += b.Alloc.GPUMilli()
	}
	jr.running = len(r.running)
	r.running = append(r.running, r.byID[jr.job.ID])
	if jr.job.MaxRuntime > 0 {
		r.push(now.Add(jr.job.MaxRuntime), evWake, r.byID[jr.job.ID])
	}
	if !jr.waited {
		jr.waited = true
		r.res.Summary.JobsStarted++
		jr.wait = now.Sub(jr.job.Submit).Seconds()
		r.res.Series.Waits = append(r.res.Series.Waits, jr.wait)
		jr.slow = r.loc.record(jr, r.cfg.Comm)
	} else {
		jr.slow = r.loc.slowdown(jr, r.cfg.Comm)
	}
	jr.frac, jr.segDone, jr.segStart = podShare(jr), 0, now
	if jr.restarts > 0 {
		jr.segStart = now.Add(jr.runOverhead)
	}
	r.scheduleFinish(jr)
	// After its end is scheduled: the failure process resumes only while
	// something other than failures is ahead.
	r.restartInjector(now)
}

// podShare is the share of its pods a job holds: its speed, for an elastic
// job, relative to its runtime at full size.
func podShare(jr *jobRun) float64 {
	if n := jr.job.Pods(); n > 0 && len(jr.bound) < n {
		return float64(len(jr.bound)) / float64(n)
	}
	return 1
}

// scheduleFinish pushes the end of the current run from its progress.
func (r *replay) scheduleFinish(jr *jobRun) {
	if jr.job.Runtime <= 0 {
		return
	}
	left := jr.job.Runtime - jr.workDone - jr.segDone
	run := time.Duration(float64(left) * jr.slow / jr.frac)
	if run <= 0 {
		run = time.Second
	}
	r.push(jr.segStart.Add(run), evFinish, r.byID[jr.job.ID])
}

// resize reschedules a running elastic job whose pod count changed (grown
// into idle capacity, or shrunk for a waiting job): the work of the old
// share is banked and the rest runs at the new share.
func (r *replay) resize(jr *jobRun, now time.Time) {
	jr.report(now) // at the old share's speed
	if now.After(jr.segStart) {
		jr.segDone += time.Duration(float64(now.Sub(jr.segStart)) / jr.slow * jr.frac)
		jr.segStart = now
	}
	jr.frac = podShare(jr)
	// A new epoch drops the finish (and wake) events of the old share.
	jr.epoch++
	r.scheduleFinish(jr)
	if mr := jr.job.MaxRuntime; mr > 0 && jr.start.Add(mr).After(now) {
		r.push(jr.start.Add(mr), evWake, r.byID[jr.job.ID])
	}
}

// runningJob is the engine's view of a started job. The simulated training
// loop reports each checkpoint once taken, as a cluster sees the
// corral.dev/last-checkpoint annotation change.
func (r *replay) runningJob(jr *jobRun, now time.Time) engine.RunningJob {
	rj := engine.RunningJob{Job: jr.job.Job, Start: jr.start}
	for _, ref := range sortedRefs(jr.bound) {
		rj.Pods = append(rj.Pods, jr.bound[ref])
	}
	jr.report(now)
	rj.Checkpoints = jr.reported
	return rj
}

// report adds the checkpoints the current run has taken by now to what it
// reported: each at the wall time its work was reached in the current
// share (resize reports before the share changes, so none is converted at
// the wrong speed).
func (jr *jobRun) report(now time.Time) {
	if !jr.started {
		return
	}
	work := jr.workAt(now)
	if work <= jr.reportedWork {
		return
	}
	slow, frac := jr.speed()
	for _, w := range jr.checkpointsTaken(jr.reportedWork, work) {
		at := jr.segStart.Add(time.Duration(float64(w-jr.segDone) * slow / frac))
		jr.reported = jr.reported.Add(at)
	}
	jr.reportedWork = work
}

// stopRunning takes the job out of the running list.
func (r *replay) stopRunning(jr *jobRun) {
	if jr.running < 0 {
		return
	}
	i := jr.running
	copy(r.running[i:], r.running[i+1:])
	r.running = r.running[:len(r.running)-1]
	for k := i; k < len(r.running); k++ {
		r.jobs[r.running[k]].running = k
	}
	jr.running = -1
}

func (r *replay) finish(i int, now time.Time) {
	jr := r.jobs[i]
	r.stopRunning(jr)
	for _, ref := range sortedRefs(jr.bound) {
		b := jr.bound[ref]
		r.state.Release(b.NodeIndex, b.Alloc)
		r.allocated -= b.Alloc.GPUMilli()
		r.useful -= b.Alloc.GPUMilli()
	}
	jr.finished, jr.end = true, now
	r.res.Summary.JobsCompleted++
	run := cycle.RunOf(jr.job.Job, jr.job.Runtime)
	run.Span = cycle.SpanOf(jr.job.Job, jr.start, now)
	r.hist.ObserveRun(run)
}

// mayGrow reports whether a running elastic job has pods still to place:
// then a cycle is worth running even with nobody waiting.
func (r *replay) mayGrow() bool {
	for _, i := range r.running {
		jr := r.jobs[i]
		if jr.job.GangMin() < jr.job.Pods() && len(jr.bound) < jr.job.Pods() {
			return true
		}
	}
	return false
}
