package sim

import (
	"fmt"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// evict carries out one eviction. A job left below its gang minimum stops:
// it keeps the progress its checkpoints saved, loses the rest, and waits
// again in the queue. Pods taken from a job that keeps running (an elastic
// job shrunk to no less than its minimum) lose nothing.
func (r *replay) evict(ev engine.Eviction, now time.Time) error {
	i, ok := r.byID[ev.Job]
	if !ok {
		return fmt.Errorf("plan evicts unknown job %s", ev.Job)
	}
	jr := r.jobs[i]
	// A hung job's GPUs already left the useful count.
	useful := jr.started && jr.hungAt.IsZero()
	for _, ref := range ev.Pods {
		if _, ok := jr.bound[ref]; !ok {
			return fmt.Errorf("plan evicts pod %s that is not bound", ref)
		}
		r.unbind(jr, ref, useful)
	}
	r.res.Summary.Evictions++
	if ev.Terminal {
		// Stopped for good (max runtime): what it ran is spent, nothing
		// runs again.
		for _, ref := range sortedRefs(jr.bound) {
			r.unbind(jr, ref, useful)
		}
		r.unhang(jr, now)
		r.stopRunning(jr)
		jr.epoch++
		jr.terminated, jr.finished, jr.end = true, true, now
		jr.started = true // it does not wait any more
		r.res.Summary.JobsTerminated++
		return nil
	}
	failure := ev.Cause == engine.CauseFailure
	if failure && jr.failedAt.IsZero() && jr.started {
		jr.failedAt = now
		if !jr.hungAt.IsZero() {
			jr.failedAt = jr.hungAt // recovery counts from the failure
		}
	}
	if failure && !jr.started && len(jr.bound) == 0 {
		jr.paused, jr.pin = false, engine.Pin{} // the whole gang starts over
	}
	if !jr.started && len(jr.bound) == 0 {
		jr.partialSince = time.Time{} // nothing left waiting at the rendezvous
	}
	if !jr.started {
		return nil
	}
	if len(jr.bound) >= jr.job.GangMin() {
		if failure && !r.isPending(i) {
			r.pending = append(r.pending, i) // its lost replicas wait to be replaced
		}
		// Fewer pods, still running: slower from now on.
		r.resize(jr, now)
		return nil
	}
	if failure && len(jr.bound) > 0 {
		// ReplaceRanks: the gang stops and rolls back to its checkpoint, but
		// its healthy ranks keep their place until the new ones join.
		milli := jr.job.GPUMilli()
		saved, lost := r.progress(jr, now)
		jr.workDone += saved
		r.res.Summary.GPUHoursLost += float64(milli) / workload.MilliPerGPU * lost.Hours()
		r.fail.lostWork += r.failureLoss(jr, lost-r.unhang(jr, now))
		if useful {
			for _, b := range jr.bound {
				r.useful -= b.Alloc.GPUMilli()
			}
		}
		r.res.Summary.JobsRestarted++
		jr.restarts++
		jr.epoch++
		jr.started, jr.paused = false, true
		r.stopRunning(jr)
		r.pending = append(r.pending, i)
		return nil
	}
	// The gang broke: everything still bound goes too, and the job restarts.
	for _, ref := range sortedRefs(jr.bound) {
		r.unbind(jr, ref, useful)
	}
	milli := jr.job.GPUMilli()
	saved, lost := r.progress(jr, now)
	hung := r.unhang(jr, now)
	jr.workDone += saved
	lostHours := float64(milli) / workload.MilliPerGPU * lost.Hours()
	r.res.Summary.GPUHoursLost += lostHours
	switch ev.Cause {
	case engine.CausePreempt, engine.CauseReclaim:
		r.res.Summary.GPUHoursLostPreemption += lostHours
	case engine.CauseConsolidate:
		r.res.Summary.GPUHoursLostConsolidation += lostHours
	}
	if failure {
		r.fail.lostWork += r.failureLoss(jr, lost-hung)
	}
	r.res.Summary.JobsRestarted++
	if ev.Cause == engine.CauseMaxRuntime {
		r.requeued++
	}
	jr.restarts++
	jr.epoch++
	jr.started, jr.paused = false, false
	jr.pin = engine.Pin{}
	r.stopRunning(jr)
	r.pending = append(r.pending, i)
	return nil
}

// unbind gives a bound pod's capacity back; useful says whether it still
// counted as useful work (a started job that is not hung).
func (r *replay) unbind(jr *jobRun, ref workload.PodRef, useful bool) {
	b := jr.bound[ref]
	r.state.Release(b.NodeIndex, b.Alloc)
	r.allocated -= b.Alloc.GPUMilli()
	if useful {
		r.useful -= b.Alloc.GPUMilli()
	}
	delete(jr.bound, ref)
}

// progress splits the time the job has run this time into the work its
// checkpoints saved (in runtime units) and the wall time thrown away.
func (r *replay) progress(jr *jobRun, now time.Time) (saved, lost time.Duration) {
	ran := now.Sub(jr.start)
	slow, frac := jr.speed()
	work := jr.workAt(now)
	if work <= 0 {
		return 0, ran
	}
	if taken := jr.checkpointsTaken(0, work); len(taken) > 0 {
		saved = taken[len(taken)-1]
	}
	if left := jr.job.Runtime - jr.workDone; jr.job.Runtime > 0 && saved > left {
		saved = left
	}
	return saved, max(0, ran-time.Duration(float64(saved)*slow/frac))
}

// speed is the current run's slowdown and pod share, 1 when unset.
func (jr *jobRun) speed() (slow, frac float64) {
	slow, frac = jr.slow, jr.frac
	if slow <= 0 {
		slow = 1
	}
	if frac <= 0 {
		frac = 1
	}
	return slow, frac
}

// workAt is the work done in the current run by now, in runtime units: a
// hung gang made no progress since it hung.
func (jr *jobRun) workAt(now time.Time) time.Duration {
	if !jr.hungAt.IsZero() && jr.hungAt.Before(now) {
		now = jr.hungAt
	}
	slow, frac := jr.speed()
	work := jr.segDone
	if now.After(jr.segStart) {
		work += time.Duration(float64(now.Sub(jr.segStart)) / slow * frac)
	}
	return work
}

// checkpointsTaken is the work, in runtime units of the current run, at
// which the job's true checkpoints fall in (after, upTo]: its own jittered
// schedule (Job.Checkpoints), else every declared interval (the oracle of
// traces that model no schedule).
func (jr *jobRun) checkpointsTaken(after, upTo time.Duration) []time.Duration {
	switch ci := jr.job.CheckpointInterval; {
	case jr.job.Checkpoints.Every > 0:
		if jr.ckpt == nil {
			jr.ckpt = newCkptSchedule(jr.job)
		}
		return jr.ckpt.between(after, upTo)
	case ci > 0:
		var out []time.Duration
		for w := (after/ci + 1) * ci; w <= upTo; w += ci {
			out = append(out, w)
		}
		return out
	}
	return nil
}

// sortedRefs lists a job's bound pods in pod order.
func sortedRefs(bound map[workload.PodRef]engine.PodBind) []workload.PodRef {
	refs := make([]workload.PodRef, 0, len(bound))
	for ref := range bound {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(a, b int) bool {
		if refs[a].PodSet != refs[b].PodSet {
			return refs[a].PodSet < refs[b].PodSet
		}
		return refs[a].Index < refs[b].Index
	})
	return refs
}
