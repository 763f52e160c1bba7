package sim

import (
	"container/heap"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/metrics"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

type eventKind uint8

const (
	evFinish eventKind = iota // finishes first at equal times: capacity before demand
	evArrive
	// evWake runs a cycle when a job reaches its max runtime, so that the
	// engine can stop it then and not at the next arrival.
	evWake
	evRetry // the engine asked to look again (Plan.Retry)
	// evRecycle runs one more cycle at the same time.
	evRecycle
	evRepair // a failed device or node comes back
	evFail   // the failure process: something fails, the next failure is drawn
	// evDetect runs a cycle when the scheduler learns of a node failure.
	evDetect
	// evRendezvous fails a job whose pods have not all started within the
	// rendezvous timeout.
	evRendezvous
	// evMIGReady brings a re-partitioned MIG GPU back into service.
	evMIGReady
)

type event struct {
	at   time.Time
	kind eventKind
	job  int // index into the run's jobs
	seq  int // insertion order: the final tie-break
	// epoch is the job's run the event belongs to: a finish scheduled
	// before an eviction is stale once the job has been evicted.
	epoch int
	// node and dev name what a repair brings back (dev -1: the node).
	node, dev int
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	if q[i].kind != q[j].kind {
		return q[i].kind < q[j].kind
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// jobRun is the simulator's record of one job.
type jobRun struct {
	job Job
	// rendezvousFails counts the job's failed rendezvous; past
	// rendezvousBackoffLimit its controller gives up (rejected).
	rendezvousFails int
	bound           map[workload.PodRef]engine.PodBind
	started         bool
	start           time.Time
	finished        bool
	end             time.Time
	rejected        bool
	partial         bool // ever held pods without reaching its gang minimum

	// Runs: a job evicted before it ends goes back to pending and restarts.
	epoch    int           // current run, bumped at every eviction
	slow     float64       // communication slowdown of the current run
	workDone time.Duration // progress saved by checkpoints, in runtime units
	restarts int
	waited   bool // its first wait has been recorded
	running  int  // index in replay.running, -1 when not running
	// wait is the first wait in seconds, once recorded; terminated says
	// the engine stopped the job for good (max runtime).
	wait       float64
	terminated bool
	// An elastic job runs at the share of its pods it holds (Runtime is its
	// runtime at full size): frac is that share, segStart when the current
	// share began (after any restart overhead), segDone the work of this
	// run's earlier shares, in runtime units.
	frac     float64
	segStart time.Time
	segDone  time.Duration

	// Failures: a gang whose failed ranks are being replaced is paused: its
	// other pods stay bound, idle, until the new ranks are placed in pin.
	paused   bool
	pin      engine.Pin
	failedAt time.Time // when a failure last stopped it; zero once running again
	// hungAt is when a failure broke the running gang while the scheduler
	// did not know yet (or chose to wait for repair): from then on it holds
	// its GPUs without progress. Zero when not hung.
	hungAt time.Time
	// overheadCounted: this run's restart overhead is already in the
	// failure figures, so a later rollback must not count it again.
	overheadCounted bool
	// runOverhead is the restart overhead of the current run: a whole
	// restart pays the job's, a paused gang resumed with replaced ranks
	// the failure model's ReplaceOverhead.
	runOverhead time.Duration
	// partialSince is when the job's first pod started while the rest had
	// not (its rendezvous began); zero when it holds no pod or runs.
	partialSince time.Time
	// ckpt is the job's true checkpoint schedule (Job.Checkpoints).
	ckpt *ckptSchedule
}

type replay struct {
	state      *cluster.State
	eng        Scheduler
	cfg        Config
	res        *metrics.Result
	jobs       []*jobRun
	byID       map[workload.JobID]int
	pending    []int // job indexes waiting, in arrival order
	events     eventQueue
	seq        int
	mix        placement.MixCounter
	allocated  int64 // GPU-milli bound, including partial gangs
	useful     int64 // GPU-milli held by started jobs
	capacity   int64
	lastT      time.Time
	first      time.Time
	lastArr    time.Time // the last submit: utilisation is measured up to here
	area       float64   // allocated-milli × seconds
	usefulArea float64   // useful-milli × seconds
	// usefulAll is usefulArea over the whole run, drain included.
	usefulAll float64
	engineSec float64
	loc       *locality
	rej       []Rejection
	running   []int // job indexes holding a started gang, in start order
	recycles  int   // nested cycles run at one instant after re-partitions
	fair      *fairness
	// hist is the completed runtimes the engine estimates from, kept here
	// as a real driver keeps it.
	hist   cycle.History
	wakeAt time.Time // the pending Plan.Retry event, if any
	// requeued counts jobs requeued at their max runtime.
	requeued int
	inj      *injector
	fail     failureStats
}

// failureStats accumulates what failures cost a run.
type failureStats struct {
	allocArea  float64 // allocated milli × seconds over the whole run
	lostWork   float64 // GPU-seconds rolled back to checkpoints by failures
	overhead   float64 // GPU-seconds of restart overhead after failures
	idleHeld   float64 // GPU-seconds paused gangs held idle
	hung       float64 // GPU-seconds gangs held hung on a failure
	recoveries []float64
}

// maxRecycles bounds the cycles run at one instant because re-partitions
// were applied; each one re-partitions an idle GPU, so a handful suffice.
const maxRecycles = 8

func runReplay(state *cluster.State, eng Scheduler, jobs []Job, queues []cycle.QueueSpec, cfg Config, res *metrics.Result) ([]Rejection, error) {
	r := &replay{state: state, eng: eng, cfg: cfg, res: res, byID: map[workload.JobID]int{},
		capacity: state.CapacityMilli(), loc: newLocality(state), fair: newFairness(queues, jobs)}
	for i, j := range jobs {
		r.jobs = append(r.jobs, &jobRun{job: j, bound: map[workload.PodRef]engine.PodBind{}, running: -1})
		r.byID[j.ID] = i
		r.push(j.Submit, evArrive, i)
		if i == 0 || j.Submit.Before(r.first) {
			r.first = j.Submit
		}
		if j.Submit.After(r.lastArr) {
			r.lastArr = j.Submit
		}
	}
	r.lastT = r.first
	if cfg.Failures != nil && cfg.Failures.Scale > 0 {
		r.inj = newInjector(state, *cfg.Failures, cfg.Seed)
		if r.inj.rate > 0 {
			r.inj.active = true
			r.pushFailure(r.first.Add(r.inj.next()))
		}
	}
	processed, total := 0, len(jobs)
	var retried time.Time
	for r.events.Len() > 0 {
		if e := r.events[0]; (e.kind == evFinish || e.kind == evWake) &&
			(e.epoch != r.jobs[e.job].epoch || r.jobs[e.job].finished) {
			// The run it belongs to ended, was evicted or was resized: it
			// must not move the clock (the makespan) either.
			heap.Pop(&r.events)
			continue
		}
		now := r.events[0].at
		r.advance(now)
		changed, wake, health := false, false, false
		for r.events.Len() > 0 && r.events[0].at.Equal(now) {
			e := heap.Pop(&r.events).(event)
			switch e.kind {
			case evArrive:
				r.pending = append(r.pending, e.job)
				r.jobs[e.job].job.EachPod(func(_ workload.PodRef, rq workload.Request) { r.mix.Observe(rq, 1) })
				processed++
			case evFinish:
				if e.epoch != r.jobs[e.job].epoch {
					continue // the run it ended was evicted
				}
				r.finish(e.job, now)
			case evWake:
				wake = e.epoch == r.jobs[e.job].epoch && r.jobs[e.job].started
			case evRetry:
				if !r.wakeAt.Equal(now) {
					continue // superseded by an earlier retry
				}
				r.wakeAt = time.Time{}
			case evRecycle:
				wake = true
			case evFail:
				r.injectFailure(now)
				health = true
			case evDetect:
				health = true
			case evRepair:
				r.repair(e.node, e.dev, now)
			case evRendezvous:
				wake = r.rendezvousTimeout(e.job, now) || wake
			case evMIGReady:
				// Nothing can have used the pending layout: it is idle.
				if err := r.state.SetMIGLayout(e.node, e.dev, r.state.MIGLayout(e.node, e.dev), false); err != nil {
					return r.rej, err
				}
				wake = true
			}
			changed = true
		}
		if changed && (len(r.pending) > 0 || wake || health || r.mayGrow()) {
			requeued := r.requeued
			// A cycle's evictions send pods back to pending: the next cycle
			// places them (replacement ranks, restarted gangs) at once.
			for i := 0; i < 3; i++ {
				evicted, err := r.cycle(now)
				if err != nil {
					return r.rej, err
				}
				if !evicted || len(r.pending) == 0 {
					break
				}
			}
			if r.requeued > requeued && !retried.Equal(now) {
				// Jobs stopped at their max runtime and requeued in this
				// cycle could run on what it freed: one more cycle at the
				// same time (once, so that no plan can loop the clock in
				// place).
				retried = now
				r.push(now, evRecycle, 0)
			}
		} else if changed {
			r.fair.satisfied(now) // nothing waits: every queue has what it asks for
		}
		r.sample(now)
		if cfg.Progress != nil && processed%64 == 0 {
			cfg.Progress(processed, total)
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(total, total)
	}
	r.summarise()
	return r.rej, nil
}

func (r *replay) push(at time.Time, kind eventKind, job int) {
	heap.Push(&r.events, event{at: at, kind: kind, job: job, seq: r.seq, epoch: r.jobs[job].epoch})
	r.seq++
}

// pushAt pushes an event that names a device (node, dev) besides a job.
func (r *replay) pushAt(at time.Time, kind eventKind, job, node, dev int) {
	heap.Push(&r.events, event{at: at, kind: kind, job: job, seq: r.seq, epoch: r.jobs[job].epoch, node: node, dev: dev})
	r.seq++
}

// rendezvousTimeout fails a job whose pods have not all started within the
// rendezvous timeout, as torchrun's rendezvous (or NCCL's init) gives up:
// its started pods exit and free their GPUs, and its controller submits it
// again, so it waits once more, from its first submission. It reports
// whether the job failed.
func (r *replay) rendezvousTimeout(i int, now time.Time) bool {
	jr := r.jobs[i]
	if jr.started || jr.paused || jr.finished || jr.rejected || len(jr.bound) == 0 || jr.partialSince.IsZero() ||
		now.Before(jr.partialSince.Add(r.cfg.Rendezvous)) {
		return false // started, gave its pods back, or a later rendezvous
	}
	for _, ref := range sortedRefs(jr.bound) {
		r.unbind(jr, ref, false)
	}
	jr.partialSince = time.Time{}
	r.res.Summary.RendezvousFailures++
	if jr.rendezvousFails++; jr.rendezvousFails > rendezvousBackoffLimit {
		// The Job controller stops after backoffLimit retries; without this a
		// job that a pod-by-pod policy can never start whole is resubmitted
		// forever and the run never ends.
		jr.rejected = true
		r.pending = slices.DeleteFunc(r.pending, func(j int) bool { return j == i })
		r.res.Summary.JobsGaveUp++
		r.rej = append(r.rej, Rejection{Job: jr.job.ID, Source: jr.job.Source,
			Reason: fmt.Sprintf("gave up: its rendezvous failed %d times, past the Job backoffLimit of %d",
				jr.rendezvousFails, rendezvousBackoffLimit)})
	}
	return true
}

// rendezvousBackoffLimit is batch/v1 Job's default spec.backoffLimit: a job
// whose rendezvous fails more often than this is failed for good.
const rendezvousBackoffLimit = 6

// advance integrates utilisation and partial-gang idle time up to now.
func (r *replay) advance(now time.Time) {
	dt := now.Sub(r.lastT).Seconds()
	// Utilisation counts the arrival window only: the drain after the last
	// submit says more about the longest job than about the scheduler.
	until := now
	if until.After(r.lastArr) {
		until = r.lastArr
	}
	if w := until.Sub(r.lastT).Seconds(); w > 0 {
		r.area += float64(r.allocated) * w
		r.usefulArea += float64(r.useful) * w
		r.fair.advance(w)
	}
	if dt > 0 {
		r.usefulAll += float64(r.useful) * dt
		r.fail.allocArea += float64(r.allocated) * dt
		for _, i := range r.pending {
			jr := r.jobs[i]
			if !jr.started && len(jr.bound) > 0 {
				var held int64
				for _, b := range jr.bound {
					held += b.Alloc.GPUMilli()
				}
				if jr.paused {
					r.fail.idleHeld += float64(held) / 1000 * dt
					continue
				}
				r.res.Summary.PartialGangGPUHours += float64(held) / 1000 * dt / 3600
			}
		}
	}
	r.lastT = now
}

// sample records utilisation from now on (after now's events and cycle).
func (r *replay) sample(now time.Time) {
	r.res.Series.Utilization = append(r.res.Series.Utilization, metrics.Point{
		X: now.Sub(r.first).Hours(), Y: pct(r.useful, r.capacity)})
	r.sampleReport(now)
}

func (r *replay) cycle(now time.Time) (evicted bool, err error) {
	snap := &engine.Snapshot{State: r.state, Mix: r.mix.Mix(64), Now: now, Queues: r.fair.specs(), Runtimes: &r.hist}
	if r.inj != nil {
		snap.Failures = r.inj.records(now)
		snap.Spares = r.inj.m.Spares
	}
	for _, i := range r.pending {
		jr := r.jobs[i]
		pj := engine.PendingJob{Job: jr.job.Job, Within: jr.pin}
		if len(jr.bound) > 0 {
			jr.job.EachPod(func(ref workload.PodRef, _ workload.Request) {
				if _, ok := jr.bound[ref]; !ok {
					pj.Waiting = append(pj.Waiting, ref)
				}
			})
		}
		snap.Pending = append(snap.Pending, pj)
	}
	for _, i := range r.running {
		snap.Running = append(snap.Running, r.runningJob(r.jobs[i], now))
	}
	// Jobs holding pods without running (partial or paused gangs) hold
	// capacity too: a failure under them must be remediated, and a
	// scheduler that preempts pods sees them as it sees any running pod.
	for _, i := range r.pending {
		if jr := r.jobs[i]; !jr.started && len(jr.bound) > 0 {
			rj := r.runningJob(jr, now)
			rj.Start = now
			if !jr.partialSince.IsZero() {
				rj.Start = jr.partialSince
			}
			snap.Running = append(snap.Running, rj)
		}
	}
	t0 := r.cfg.Clock()
	plan := r.eng.Cycle(snap)
	d := r.cfg.Clock().Sub(t0)
	r.engineSec += d.Seconds()
	r.res.Summary.Cycles++
	if us := float64(d.Microseconds()); us > r.res.Summary.CycleMaxUS {
		r.res.Summary.CycleMaxUS = us
	}
	for _, rm := range plan.Remediations {
		if r.res.Summary.Remediations == nil {
			r.res.Summary.Remediations = map[string]int{}
		}
		r.res.Summary.Remediations[string(rm.Action)]++
		if rm.Action == workload.ReplaceRanks {
			r.jobs[r.byID[rm.Job]].pin = engine.Pin{Level: rm.Level, Domain: rm.Domain}
		}
	}
	for _, ev := range plan.Evictions {
		if err := r.evict(ev, now); err != nil {
			return false, err
		}
		switch ev.Cause {
		case engine.CausePreempt:
			r.res.Summary.Preempted++
		case engine.CauseReclaim:
			r.res.Summary.Reclaimed++
		case engine.CauseConsolidate:
			r.res.Summary.Consolidated++
		}
	}
	if err := repartition(r.state, plan, r.res); err != nil {
		return false, err
	}
	if r.cfg.MIGReconfigure > 0 {
		// The GPU drains and the MIG manager reconfigures it: the node
		// reports the new layout as pending (as a real node's
		// nvidia.com/mig.config.state does), no instance of it serves
		// anything, and the jobs it is meant for wait for it.
		for _, rp := range plan.Repartitions {
			if err := r.state.SetMIGLayout(rp.NodeIndex, rp.DeviceIndex, rp.Layout, true); err != nil {
				return false, err
			}
			r.pushAt(now.Add(r.cfg.MIGReconfigure), evMIGReady, 0, rp.NodeIndex, rp.DeviceIndex)
		}
	}
	r.fair.observe(plan.Queues, now)
	if plan.Retry.After(now) && (r.wakeAt.IsZero() || plan.Retry.Before(r.wakeAt)) {
		r.wakeAt = plan.Retry
		r.push(plan.Retry, evRetry, 0)
	}

	for _, b := range plan.Binds {
		if err := apply(r.state, b); err != nil {
			return false, err
		}
		jr := r.jobs[r.byID[b.Job]]
		for _, p := range b.Pods {
			jr.bound[p.Pod] = p
			r.allocated += p.Alloc.GPUMilli()
			r.res.Summary.PodsPlaced++
			if jr.started && jr.hungAt.IsZero() {
				// An elastic job growing, or a replica back in a running job.
				r.useful += p.Alloc.GPUMilli()
			}
		}
		if len(jr.bound) == jr.job.Pods() {
			jr.pin = engine.Pin{}
		}
		if jr.started {
			// Pods joined a running job: an elastic job grew, or replicas
			// replaced failed ones. A hung job stays hung.
			if jr.hungAt.IsZero() {
				r.recovered(jr, now)
				r.resize(jr, now)
			}
		} else if len(jr.bound) >= jr.job.GangMin() {
			r.startJob(jr, now)
		} else {
			if !jr.partial {
				jr.partial = true
				r.res.Summary.PartialGangs++
			}
			if jr.partialSince.IsZero() && !jr.paused && r.cfg.Rendezvous > 0 {
				// Its first pods started: their rendezvous waits for the rest.
				jr.partialSince = now
				r.pushAt(now.Add(r.cfg.Rendezvous), evRendezvous, r.byID[jr.job.ID], -1, -1)
			}
		}
	}
	for _, p := range plan.Pending {
		v := p.Reason.Verdict
		if v != placement.NeverFits && v != placement.Refused {
			continue
		}
		if v == placement.NeverFits && r.inj != nil && len(r.inj.failed) > 0 {
			continue // with devices out for repair, "never" may only mean "not until repaired"
		}
		jr := r.jobs[r.byID[p.Job]]
		if !jr.rejected && len(jr.bound) == 0 {
			jr.rejected = true
			r.res.Summary.JobsNeverFit++
			r.rej = append(r.rej, Rejection{Job: p.Job, Source: jr.job.Source, Reason: p.Reason.Message})
		}
	}
	// Drop started and rejected jobs from the queue, keeping arrival order;
	// a running job keeps its place while replicas of it are missing.
	kept := r.pending[:0]
	for _, i := range r.pending {
		jr := r.jobs[i]
		replacing := jr.started && !jr.failedAt.IsZero() && len(jr.bound) < jr.job.Pods()
		if (!jr.started || replacing) && !jr.rejected && !jr.finished {
			kept = append(kept, i)
		}
	}
	r.pending = kept
	if len(plan.Repartitions) > 0 && r.cfg.MIGReconfigure < 0 && len(r.pending) > 0 && r.recycles < maxRecycles {
		// The jobs that waited for the new layouts can bind now.
		r.recycles++
		defer func() { r.recycles-- }()
		again, err := r.cycle(now)
		return again || len(plan.Evictions) > 0, err
	}
	return len(plan.Evictions) > 0, nil
}

func (r *replay) startJob(jr *jobRun, now time.Time) {
	jr.started, jr.start = true, now
	jr.partialSince = time.Time{}
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
// loop reports its last checkpoint, as the corral.dev/last-checkpoint
// annotation does in a cluster.
func (r *replay) runningJob(jr *jobRun, now time.Time) engine.RunningJob {
	rj := engine.RunningJob{Job: jr.job.Job, Start: jr.start}
	for _, ref := range sortedRefs(jr.bound) {
		rj.Pods = append(rj.Pods, jr.bound[ref])
	}
	if saved, _ := r.progress(jr, now); saved > 0 {
		overhead := time.Duration(0)
		if jr.restarts > 0 {
			overhead = jr.job.RestartOverhead
		}
		slow := jr.slow
		if slow <= 0 {
			slow = 1
		}
		rj.LastCheckpoint = jr.start.Add(overhead + time.Duration(float64(saved)*slow))
	}
	return rj
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
	if !jr.hungAt.IsZero() && jr.hungAt.Before(now) {
		now = jr.hungAt // a hung gang made no progress since
	}
	slow, frac := jr.slow, jr.frac
	if slow <= 0 {
		slow = 1
	}
	if frac <= 0 {
		frac = 1
	}
	work := jr.segDone
	if now.After(jr.segStart) {
		work += time.Duration(float64(now.Sub(jr.segStart)) / slow * frac)
	}
	if work <= 0 {
		return 0, ran
	}
	switch ci := jr.job.CheckpointInterval; {
	case jr.job.Checkpoints.Every > 0:
		// The job's true schedule: the scheduler learns of each checkpoint
		// only once it is taken (runningJob reports the last one).
		if jr.ckpt == nil {
			jr.ckpt = newCkptSchedule(jr.job)
		}
		saved = jr.ckpt.saved(work)
	case ci > 0:
		saved = work / ci * ci
	}
	if left := jr.job.Runtime - jr.workDone; jr.job.Runtime > 0 && saved > left {
		saved = left
	}
	return saved, max(0, ran-time.Duration(float64(saved)*slow/frac))
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
	r.hist.Observe(jr.job.Job, jr.job.Runtime)
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

func (r *replay) summarise() {
	s := &r.res.Summary
	s.JobsSubmitted = len(r.jobs)
	var jcts []float64
	for _, jr := range r.jobs {
		if jr.finished && !jr.terminated {
			jcts = append(jcts, jr.end.Sub(jr.job.Submit).Seconds())
		}
		if !jr.started && !jr.rejected {
			s.JobsStillPending++
		}
	}
	s.MakespanS = r.lastT.Sub(r.first).Seconds()
	r.fair.summarise(s, r.lastArr.Sub(r.first).Seconds())
	if span := r.lastArr.Sub(r.first).Seconds(); span > 0 && r.capacity > 0 {
		s.UtilizationPct = 100 * r.usefulArea / (span * float64(r.capacity))
		s.AllocatedPct = 100 * r.area / (span * float64(r.capacity))
	}
	if s.MakespanS > 0 && r.capacity > 0 {
		s.UtilizationMakespanPct = 100 * r.usefulAll / (s.MakespanS * float64(r.capacity))
	}
	s.GPUAllocPct = pct(r.allocated, r.capacity)
	s.UnallocatedGPUPct = 100 - s.GPUAllocPct
	s.WholeGPUAllocPct = wholeAllocPct(r.state)
	s.FragPct = pct(int64(clusterFrag(r.state, r.mix.Mix(64))), r.capacity)
	waits := append([]float64(nil), r.res.Series.Waits...)
	s.WaitP50S, s.WaitP95S, s.WaitMaxS, s.WaitMeanS = quantiles(waits)
	s.JCTP50S, s.JCTP95S, _, s.JCTMeanS = quantiles(jcts)
	if s.PodsPlaced > 0 {
		s.DecisionMeanUS = r.engineSec * 1e6 / float64(s.PodsPlaced)
	}
	if s.Cycles > 0 {
		s.CycleMeanUS = r.engineSec * 1e6 / float64(s.Cycles)
	}
	r.loc.summarise(s)
	r.summariseFailures()
	r.largeJobWaits(s)
	r.wholeRun(s)
}

// wholeRun adds the figures over the whole run: GPUs allocated whatever they
// did, and waits and JCTs by job size, never-started jobs counted with their
// wait until the end of the run rather than dropped.
func (r *replay) wholeRun(s *metrics.Summary) {
	if s.MakespanS > 0 && r.capacity > 0 {
		s.AllocatedMakespanPct = 100 * r.fail.allocArea / (s.MakespanS * float64(r.capacity))
	}
	var all []float64
	waits := make([][]float64, len(metrics.SizeClasses))
	jcts := make([][]float64, len(metrics.SizeClasses))
	classes := make([]metrics.SizeClass, len(metrics.SizeClasses))
	for c := range classes {
		classes[c].Class = metrics.SizeClasses[c].Name
	}
	for _, jr := range r.jobs {
		if jr.rejected {
			continue
		}
		c := 0
		for c < len(metrics.SizeClasses)-1 && jr.job.GPUs() > metrics.SizeClasses[c].Max {
			c++
		}
		classes[c].Jobs++
		w := r.lastT.Sub(jr.job.Submit).Seconds()
		if jr.waited {
			w = jr.wait
			classes[c].Started++
		}
		all = append(all, w)
		waits[c] = append(waits[c], w)
		if jr.finished && !jr.terminated {
			classes[c].Completed++
			jcts[c] = append(jcts[c], jr.end.Sub(jr.job.Submit).Seconds())
		}
	}
	_, s.WaitCensoredP95S, _, s.WaitCensoredMeanS = quantiles(all)
	for c := range classes {
		if classes[c].Jobs == 0 {
			continue
		}
		_, classes[c].WaitP95S, _, classes[c].WaitMeanS = quantiles(waits[c])
		_, classes[c].JCTP95S, _, classes[c].JCTMeanS = quantiles(jcts[c])
		s.SizeClasses = append(s.SizeClasses, classes[c])
	}
}

// largeJobWaits measures the waits of the largest jobs: those at or above
// the 95th percentile of GPU size among the jobs submitted (the same set
// for every policy on one input). A large job that never started counts
// with the time it waited until the end of the run, so starvation shows.
func (r *replay) largeJobWaits(s *metrics.Summary) {
	var sizes []float64
	for _, jr := range r.jobs {
		sizes = append(sizes, jr.job.GPUs())
	}
	if len(sizes) == 0 {
		return
	}
	_, p95, _, _ := quantiles(sizes)
	if p95 <= 0 {
		return
	}
	var waits []float64
	for _, jr := range r.jobs {
		if jr.job.GPUs() < p95 || jr.rejected {
			continue
		}
		switch {
		case jr.waited:
			waits = append(waits, jr.wait)
		default:
			waits = append(waits, r.lastT.Sub(jr.job.Submit).Seconds())
		}
	}
	s.LargeJobMinGPUs = p95
	s.LargeJobs = len(waits)
	_, s.LargeWaitP95S, s.LargeWaitMaxS, s.LargeWaitMeanS = quantiles(waits)
}

// quantiles returns p50, p95, max and mean of xs (sorted in place).
func quantiles(xs []float64) (p50, p95, maxV, mean float64) {
	if len(xs) == 0 {
		return 0, 0, 0, 0
	}
	sort.Float64s(xs)
	q := func(p float64) float64 {
		i := int(p*float64(len(xs))+0.5) - 1
		i = max(0, min(i, len(xs)-1))
		return xs[i]
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return q(0.50), q(0.95), xs[len(xs)-1], sum / float64(len(xs))
}
