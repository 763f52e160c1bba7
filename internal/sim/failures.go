package sim

import (
	"container/heap"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// injector draws failures as one Poisson process over every GPU and node.
type injector struct {
	m       FailureModel
	rng     *rand.Rand
	devices [][2]int // (node, device) of every GPU
	nodes   int
	rate    float64 // total failures per hour
	active  bool    // a next failure is scheduled
	failed  map[[2]int]cycle.Failure
	// seenAt is when the scheduler learns of each failure (node failures
	// go unnoticed for NodeDetect + EvictAfter).
	seenAt  map[[2]int]time.Time
	repairs int // repairs outstanding
}

func newInjector(s *cluster.State, m FailureModel, seed int64) *injector {
	in := &injector{m: m, rng: rand.New(rand.NewPCG(uint64(seed), 0x6661696c)), // "fail"
		nodes: s.NumNodes(), failed: map[[2]int]cycle.Failure{}, seenAt: map[[2]int]time.Time{}}
	for n := 0; n < s.NumNodes(); n++ {
		for k := range s.Node(n).Devices {
			in.devices = append(in.devices, [2]int{n, k})
		}
	}
	in.rate = m.Scale * (m.DevicePerHour*float64(len(in.devices)) + m.NodePerHour*float64(in.nodes))
	return in
}

// next is the time to the next failure.
func (in *injector) next() time.Duration {
	return time.Duration(in.rng.ExpFloat64() / in.rate * float64(time.Hour))
}

// draw picks what fails: a device (dev >= 0) or a whole node (dev -1).
func (in *injector) draw() (node, dev int) {
	devRate := in.m.DevicePerHour * float64(len(in.devices))
	if in.rng.Float64()*(devRate+in.m.NodePerHour*float64(in.nodes)) < devRate {
		d := in.devices[in.rng.IntN(len(in.devices))]
		return d[0], d[1]
	}
	return in.rng.IntN(in.nodes), -1
}

// records lists what is failed and known to the scheduler at now, in node
// and device order.
func (in *injector) records(now time.Time) []cycle.Failure {
	keys := make([][2]int, 0, len(in.failed))
	for k := range in.failed {
		if !in.seenAt[k].After(now) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	out := make([]cycle.Failure, len(keys))
	for i, k := range keys {
		out[i] = in.failed[k]
	}
	return out
}

// withFailurePolicy copies the jobs that the model changes: the restart
// overhead for jobs declaring none, and the remediation override.
func withFailurePolicy(jobs []Job, m FailureModel) []Job {
	if m.RestartOverhead == 0 && m.Remediation == "" {
		return jobs
	}
	out := make([]Job, len(jobs))
	for i, j := range jobs {
		c := *j.Job
		if c.RestartOverhead == 0 {
			c.RestartOverhead = m.RestartOverhead
		}
		if m.Remediation != "" {
			c.Remediation = m.Remediation
		}
		out[i] = j
		out[i].Job = &c
	}
	return out
}

func (r *replay) pushFailure(at time.Time) {
	heap.Push(&r.events, event{at: at, kind: evFail, seq: r.seq, dev: -1})
	r.seq++
}

// injectFailure fails one device or node, schedules its repair and draws
// the next failure while any work remains that a failure could hit.
func (r *replay) injectFailure(now time.Time) {
	in := r.inj
	n, k := in.draw()
	key := [2]int{n, k}
	_, nodeDown := in.failed[[2]int{n, -1}]
	if _, down := in.failed[key]; !down && !nodeDown {
		f := cycle.Failure{Node: r.state.Node(n).Name, Since: now}
		seen, repairAt := now, now.Add(in.m.DeviceRepair)
		if k >= 0 {
			f.Device, f.Reason = r.state.Node(n).Devices[k].ID, "injected device failure"
			r.state.SetDeviceHealth(n, k, false)
		} else {
			f.Reason = "injected node failure"
			// Nothing new lands on it from now (a simplification: a real
			// scheduler keeps placing there until NotReady).
			r.state.SetSchedulable(n, false)
			seen = now.Add(in.m.NodeDetect + in.m.EvictAfter)
			repairAt = seen.Add(in.m.NodeRepair)
		}
		in.failed[key] = f
		in.seenAt[key] = seen
		in.repairs++
		r.res.Summary.Failures++
		r.hang(n, k, now)
		if seen.After(now) {
			heap.Push(&r.events, event{at: seen, kind: evDetect, seq: r.seq, dev: -1})
			r.seq++
		}
		heap.Push(&r.events, event{at: repairAt, kind: evRepair, seq: r.seq, node: n, dev: k})
		r.seq++
	}
	in.active = false
	// Failures stop while nothing runs (pending repairs still happen), and
	// when nothing but failures and repairs is ahead: jobs with no runtime
	// run forever, and failing them forever would never end the run. The
	// next start resumes them, so a run always ends.
	if len(r.running) > 0 && r.workAhead() {
		in.active = true
		r.pushFailure(now.Add(in.next()))
	}
}

// repair brings a device or node back. A pod still holding a repaired
// device (a job waiting for repair) takes its share again.
func (r *replay) repair(n, k int, now time.Time) {
	in := r.inj
	delete(in.failed, [2]int{n, k})
	delete(in.seenAt, [2]int{n, k})
	in.repairs--
	r.resumeRepaired(n, k, now)
	if k < 0 {
		r.state.SetSchedulable(n, true)
		return
	}
	r.state.SetDeviceHealth(n, k, true)
	for _, jr := range r.jobs {
		if jr.finished {
			continue // a finished job's pods gave everything back
		}
		for _, b := range jr.bound {
			if b.NodeIndex != n {
				continue
			}
			for _, d := range b.Alloc.Devices {
				if d.Device == k {
					_ = r.state.Allocate(n, cluster.Alloc{Devices: []cluster.DeviceShare{d}})
				}
			}
		}
	}
}

// hang stops the progress of every running gang that the failure of node
// n (k < 0) or of its device k leaves below its gang minimum: its ranks
// there crashed or hang, and the rest wait in a collective. It holds its
// GPUs until the scheduler acts (remediation) or the failure is repaired.
func (r *replay) hang(n, k int, now time.Time) {
	for _, i := range r.running {
		jr := r.jobs[i]
		if !jr.hungAt.IsZero() {
			continue
		}
		broken := 0
		for _, b := range jr.bound {
			if b.NodeIndex == n && (k < 0 || holdsDevice(b.Alloc, k)) {
				broken++
			}
		}
		if broken == 0 || len(jr.bound)-broken >= jr.job.GangMin() {
			continue
		}
		jr.hungAt = now
		for _, b := range jr.bound {
			r.useful -= b.Alloc.GPUMilli()
		}
		jr.epoch++ // the run's end and max-runtime wake no longer hold
	}
}

func holdsDevice(a cluster.Alloc, k int) bool {
	for _, d := range a.Devices {
		if d.Device == k {
			return true
		}
	}
	return false
}

// unhang ends a job's hang when it is evicted: the GPU time it held hung is
// a failure's cost of its own, returned so that the caller does not count
// it as rolled-back work as well.
func (r *replay) unhang(jr *jobRun, now time.Time) time.Duration {
	if jr.hungAt.IsZero() {
		return 0
	}
	hung := max(0, now.Sub(jr.hungAt))
	r.fail.hung += jr.job.GPUs() * hung.Seconds()
	jr.hungAt = time.Time{}
	return hung
}

// resumeRepaired restarts in place the hung gangs that waited for what was
// just repaired (WaitForRepair, or a repair quicker than the scheduler): if
// nothing else they hold is still failed, their processes reload the last
// checkpoint on the same pods.
func (r *replay) resumeRepaired(n, k int, now time.Time) {
	for _, i := range r.running {
		jr := r.jobs[i]
		if jr.hungAt.IsZero() || !r.holdsOnly(jr, n, k) {
			continue
		}
		saved, lost := r.progress(jr, now)
		failedAt := jr.hungAt
		hung := r.unhang(jr, now)
		jr.workDone += saved
		r.res.Summary.GPUHoursLost += jr.job.GPUs() * lost.Hours()
		r.fail.lostWork += r.failureLoss(jr, lost-hung)
		r.res.Summary.JobsRestarted++
		jr.restarts++
		jr.epoch++
		jr.start, jr.failedAt = now, failedAt
		r.recovered(jr, now)
		jr.runOverhead = jr.job.RestartOverhead
		r.fail.overhead += jr.job.GPUs() * jr.runOverhead.Seconds()
		jr.overheadCounted = true
		for _, b := range jr.bound {
			r.useful += b.Alloc.GPUMilli()
		}
		jr.frac, jr.segDone, jr.segStart = podShare(jr), 0, now.Add(jr.runOverhead)
		r.scheduleFinish(jr)
		if mr := jr.job.MaxRuntime; mr > 0 {
			r.push(now.Add(mr), evWake, i)
		}
		r.restartInjector(now)
	}
}

// holdsOnly reports whether the job has pods on node n's device k (or on
// node n, k < 0) and on no other failed node or device.
func (r *replay) holdsOnly(jr *jobRun, n, k int) bool {
	hit := false
	for _, b := range jr.bound {
		if _, down := r.inj.failed[[2]int{b.NodeIndex, -1}]; down {
			return false
		}
		for _, d := range b.Alloc.Devices {
			if _, down := r.inj.failed[[2]int{b.NodeIndex, d.Device}]; down {
				return false
			}
		}
		if b.NodeIndex == n && (k < 0 || holdsDevice(b.Alloc, k)) {
			hit = true
		}
	}
	return hit
}

// restartInjector resumes the failure process when work arrives after it
// stopped for lack of anything to hit.
func (r *replay) restartInjector(now time.Time) {
	if r.inj != nil && !r.inj.active && r.inj.rate > 0 && r.workAhead() {
		r.inj.active = true
		r.pushFailure(now.Add(r.inj.next()))
	}
}

// workAhead reports whether an event other than the failure process's own
// is still to come: an arrival, the end or max-runtime wake of a current
// run, a retry. Without one, the run is over but for jobs that never end.
func (r *replay) workAhead() bool {
	for _, e := range r.events {
		switch e.kind {
		case evFail, evRepair, evDetect:
		case evFinish, evWake:
			if jr := r.jobs[e.job]; e.epoch == jr.epoch && !jr.finished {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// recovered records the time from a failure to the job running whole again.
func (r *replay) recovered(jr *jobRun, now time.Time) {
	if jr.failedAt.IsZero() || (jr.started && len(jr.bound) < jr.job.Pods()) {
		return
	}
	r.fail.recoveries = append(r.fail.recoveries, now.Sub(jr.failedAt).Seconds())
	jr.failedAt = time.Time{}
}

// failureLoss is the GPU-seconds a failure rolled back, less restart
// overhead already counted when the run began.
func (r *replay) failureLoss(jr *jobRun, lost time.Duration) float64 {
	if jr.overheadCounted {
		lost -= min(lost, jr.runOverhead)
	}
	return jr.job.GPUs() * lost.Seconds()
}

func (r *replay) isPending(i int) bool {
	for _, p := range r.pending {
		if p == i {
			return true
		}
	}
	return false
}

// summariseFailures fills the failure figures: goodput is the work of the
// jobs that completed (GPUs × runtime) over the GPU time allocated.
func (r *replay) summariseFailures() {
	s := &r.res.Summary
	if r.fail.allocArea > 0 {
		var work float64
		for _, jr := range r.jobs {
			if jr.finished {
				work += jr.job.GPUs() * jr.job.Runtime.Seconds()
			}
		}
		s.GoodputPct = 100 * work / (r.fail.allocArea / workload.MilliPerGPU)
		s.WorkGPUHours = work / 3600
	}
	if r.inj == nil {
		return
	}
	s.FailureLostGPUHours = (r.fail.lostWork + r.fail.overhead + r.fail.idleHeld + r.fail.hung) / 3600
	s.FailureHungGPUHours = r.fail.hung / 3600
	s.FailureRollbackGPUHours = r.fail.lostWork / 3600
	s.FailureIdleGPUHours = r.fail.idleHeld / 3600
	s.FailureOverheadGPUHours = r.fail.overhead / 3600
	rec := append([]float64(nil), r.fail.recoveries...)
	s.Recoveries = len(rec)
	_, s.RecoveryP95S, _, s.RecoveryMeanS = quantiles(rec)
}
