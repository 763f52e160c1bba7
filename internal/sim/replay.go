package sim

import (
	"container/heap"
	"fmt"
	"slices"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/metrics"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

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
	// ckpt is the job's true checkpoint schedule (Job.Checkpoints);
	// reported the checkpoints of the current run the scheduler has been
	// told of, up to reportedWork (in runtime units).
	ckpt         *ckptSchedule
	reported     cycle.Checkpoints
	reportedWork time.Duration
	// aboveLimit is the scheduler's reason once it said the job alone asks
	// more than its queue's limit (Reason.AboveLimit): limits never change
	// in a run, so unless it started it never could (summarise).
	aboveLimit string
}

type replay struct {
	state   *cluster.State
	eng     Scheduler
	cfg     Config
	res     *metrics.Result
	jobs    []*jobRun
	byID    map[workload.JobID]int
	pending []int // job indexes waiting, in arrival order
	events  eventQueue
	seq     int
	// arrived counts every pod that arrived: the yardstick the reported
	// fragmentation is measured against (the trace's mix). The scheduler
	// is given the present pods instead (engine.MixOf).
	arrived    placement.MixCounter
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
				r.jobs[e.job].job.EachPod(func(_ workload.PodRef, rq workload.Request) { r.arrived.Observe(rq, 1) })
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
	x := now.Sub(r.first).Hours()
	r.res.Series.Utilization = append(r.res.Series.Utilization, metrics.Point{X: x, Y: pct(r.useful, r.capacity)})
	r.res.Series.Allocated = append(r.res.Series.Allocated, metrics.Point{X: x, Y: pct(r.allocated, r.capacity)})
	r.sampleReport(now)
}

func (r *replay) cycle(now time.Time) (evicted bool, err error) {
	snap := &engine.Snapshot{State: r.state, Now: now, Queues: r.fair.specs(), Runtimes: &r.hist}
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
	// The mix means what it means on Kubernetes: the pods present now.
	snap.Mix = engine.MixOf(snap.Pending, snap.Running, 64)
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
		if v == placement.WaitQuota && p.Reason.AboveLimit {
			// Kept pending, as a driver must: the queue's demand and fair
			// share count it as they would in a cluster.
			r.jobs[r.byID[p.Job]].aboveLimit = p.Reason.Message
		}
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
