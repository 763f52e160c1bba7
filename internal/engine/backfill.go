package engine

import (
	"github.com/corral-dev/corral/internal/queue"

	"github.com/corral-dev/corral/internal/cycle"

	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/preempt"
	"github.com/corral-dev/corral/internal/workload"
)

// MaxRuntimeAction is what happens to a job past its max runtime.
type MaxRuntimeAction string

const (
	// Terminate stops the job for good (Eviction.Terminal): it had its
	// declared time, as a batch system's time limit works.
	Terminate MaxRuntimeAction = "Terminate"
	// Requeue evicts the job back to pending; it restarts from its last
	// checkpoint and its max runtime counts again from the new start.
	Requeue MaxRuntimeAction = "Requeue"
)

// BackfillConfig tunes reservations and runtime limits (issue 6).
type BackfillConfig struct {
	// MaxReservations caps how many blocked jobs get a reservation per
	// cycle, over all queues; 0 means 1, negative means none (only jobs
	// past the starvation age are then reserved). Each reservation keeps
	// nodes from long jobs, so more of them trade utilization for the waits
	// of more big jobs.
	MaxReservations int
	// MaxReservationsPerQueue caps them per queue; 0 means 1.
	MaxReservationsPerQueue int
	// OnMaxRuntime is Terminate (the default) or Requeue.
	OnMaxRuntime MaxRuntimeAction
	// StarveAfter is the wait after which a job's reservation is made
	// before anything is placed, so that jobs ahead of it in the order
	// (higher priority, other queues) must also leave its room alone unless
	// they end first. It bounds the wait of any job that can fit: the
	// starvation age plus the longest estimated runtime in its way. Zero
	// means DefaultStarveAfter; negative turns it off.
	StarveAfter time.Duration
}

// DefaultStarveAfter is the default starvation age: a day, long enough that
// priorities order the ordinary day, short next to the week-long runs that
// would otherwise push a big gang back again and again.
const DefaultStarveAfter = 24 * time.Hour

// backfiller is one cycle's state for reservations, EASY backfill, pools,
// elastic jobs and runtime limits. Cycle calls it from separate steps.
type backfiller struct {
	cfg     BackfillConfig
	mode    Policy
	s       *Snapshot
	view    *cluster.State
	holds   *backfill.Holds
	pools   []*backfill.ResolvedPool
	res     []activeReservation
	queueRs map[string]int
	normal  int // reservations of blocked head jobs (starved ones not counted)
	// holders are the jobs holding capacity in the view: running jobs not
	// evicted, and the jobs placed this cycle. Index by job id in pos.
	holders []backfill.Holder
	pos     map[workload.JobID]int
	gone    map[workload.JobID]bool // evicted whole this cycle
	shrunk  map[workload.JobID]bool
	// fifoHead is the first blocked job under strict FIFO: nobody passes it.
	fifoHead workload.JobID
	// heldKey is the admit key the holds were last synced for, over heldRes
	// reservations (a new reservation changes what a key means).
	synced  bool
	heldKey string
	heldRes int
	// room is the cycle's preemption (issue 5), nil without it. Each side
	// must leave alone the jobs the other evicted: releasing a pod twice
	// would free capacity that is not there.
	room     *roomMaker
	qs       *queue.State // the cycle's queues (issue 5), nil without them
	seenEvs  int
	otherEvs map[workload.JobID]bool // jobs evicted by other steps
}

type activeReservation struct {
	job   *workload.Job
	slot  backfill.Slot
	nodes map[int]bool
}

func newBackfiller(cfg BackfillConfig, mode Policy, s *Snapshot, view *cluster.State) *backfiller {
	if cfg.MaxReservations == 0 {
		cfg.MaxReservations = 1
	}
	if cfg.MaxReservationsPerQueue <= 0 {
		cfg.MaxReservationsPerQueue = 1
	}
	if cfg.OnMaxRuntime == "" {
		cfg.OnMaxRuntime = Terminate
	}
	if cfg.StarveAfter == 0 {
		cfg.StarveAfter = DefaultStarveAfter
	}
	b := &backfiller{cfg: cfg, mode: mode, s: s, view: view, holds: backfill.NewHolds(view),
		queueRs: map[string]int{}, pos: map[workload.JobID]int{}, gone: map[workload.JobID]bool{},
		shrunk: map[workload.JobID]bool{}, otherEvs: map[workload.JobID]bool{}}
	running := append([]RunningJob(nil), s.Running...)
	sort.Slice(running, func(a, c int) bool { return running[a].Job.ID < running[c].Job.ID })
	for _, rj := range running {
		h := backfill.Holder{Job: rj.Job, Start: rj.Start}
		for _, p := range rj.Pods {
			h.Pods = append(h.Pods, backfill.Placed{Pod: p.Pod, Node: p.NodeIndex, Alloc: p.Alloc})
		}
		b.pos[rj.Job.ID] = len(b.holders)
		b.holders = append(b.holders, h)
	}
	return b
}

// resolvePools reads the snapshot's pools; only corral honours them (the
// baselines are today's behaviour).
func (b *backfiller) resolvePools(plan *Plan) {
	if b.mode != Corral {
		return
	}
	b.pools, plan.PoolProblems = backfill.Resolve(b.view, b.s.Pools)
}

// enforceMaxRuntime evicts every running job past its max runtime and gives
// its capacity back to the view.
func (b *backfiller) enforceMaxRuntime(plan *Plan) {
	running := append([]RunningJob(nil), b.s.Running...)
	sort.Slice(running, func(a, c int) bool { return running[a].Job.ID < running[c].Job.ID })
	for _, rj := range running {
		maxRun := rj.Job.MaxRuntime
		ran := preempt.RunFor(rj, b.s.Now)
		if maxRun <= 0 || ran < maxRun || len(rj.Pods) == 0 {
			continue
		}
		ev := Eviction{Job: rj.Job.ID, Cause: CauseMaxRuntime, LostGPUSeconds: preempt.RestartCost(rj, nil, b.s.Now)}
		for _, p := range rj.Pods {
			ev.Pods = append(ev.Pods, p.Pod)
			b.view.Release(p.NodeIndex, p.Alloc)
		}
		what := "terminated"
		if b.cfg.OnMaxRuntime == Requeue {
			what = "requeued from its last checkpoint"
		} else {
			ev.Terminal = true
			ev.LostGPUSeconds = 0 // it ends: nothing is run again
		}
		ev.Message = fmt.Sprintf("ran %s, past its max runtime %s: %s", ran.Round(time.Second), maxRun, what)
		plan.Evictions = append(plan.Evictions, ev)
		b.gone[rj.Job.ID] = true
	}
	b.seenEvs = len(plan.Evictions)
}

// admit sets the holds for job j: nodes reserved for a job j cannot finish
// before, and pools j may not use. It returns a key for the shape cache
// (identical gangs with different holds are not interchangeable). The holds
// change only when the key does, so a long queue of alike jobs costs one
// comparison each.
func (b *backfiller) admit(j *workload.Job) string {
	if len(b.res) == 0 && len(b.pools) == 0 {
		return ""
	}
	var key strings.Builder
	for i, r := range b.res {
		if r.job.ID != j.ID && !b.endsBefore(j, r.slot.Start) {
			fmt.Fprintf(&key, "r%d", i)
		}
	}
	for _, p := range b.pools {
		if !p.Admits(j) {
			fmt.Fprintf(&key, "p%s", p.Name)
		}
	}
	k := key.String()
	if b.synced && k == b.heldKey && len(b.res) == b.heldRes {
		return k
	}
	want := map[int]bool{}
	for _, r := range b.res {
		if r.job.ID != j.ID && !b.endsBefore(j, r.slot.Start) {
			for n := range r.nodes {
				want[n] = true
			}
		}
	}
	for _, p := range b.pools {
		if !p.Admits(j) {
			for _, n := range p.Nodes {
				want[n] = true
			}
		}
	}
	b.holds.Sync(want)
	b.synced, b.heldKey, b.heldRes = true, k, len(b.res)
	return k
}

// endsBefore reports whether j, started now, is expected to end by t. A job
// without any estimate is assumed never to end.
func (b *backfiller) endsBefore(j *workload.Job, t time.Time) bool {
	d, _, ok := cycle.Runtime(b.s.Runtimes, j)
	return ok && !b.s.Now.Add(d).After(t)
}

// placed records a job placed this cycle as a holder and counts it as
// backfilled when it took reserved nodes.
func (b *backfiller) placed(j *workload.Job, gb GangBind, plan *Plan) {
	b.syncEvictions(plan)
	h := backfill.Holder{Job: j, Start: b.s.Now}
	onReserved := false
	for _, p := range gb.Pods {
		h.Pods = append(h.Pods, backfill.Placed{Pod: p.Pod, Node: p.NodeIndex, Alloc: p.Alloc})
		for _, r := range b.res {
			onReserved = onReserved || (r.job.ID != j.ID && r.nodes[p.NodeIndex])
		}
	}
	if onReserved {
		plan.Stats.Backfilled++
	}
	if i, ok := b.pos[j.ID]; ok {
		b.holders[i].Pods = append(b.holders[i].Pods, h.Pods...)
		return
	}
	b.pos[j.ID] = len(b.holders)
	b.holders = append(b.holders, h)
}

// fifoBlocked says whether j must wait behind the strict-FIFO head.
func (b *backfiller) fifoBlocked() (Reason, bool) {
	if b.fifoHead == "" {
		return Reason{}, false
	}
	return Reason{Verdict: placement.WaitFree, Level: cluster.LevelCluster,
		Message: fmt.Sprintf("strict FIFO: waiting behind job %s", b.fifoHead)}, true
}

// blocked is called for a job that could not be placed now.
func (b *backfiller) blocked(j *workload.Job, g placement.Gang, r Reason, plan *Plan) Reason {
	if r.Verdict != placement.WaitFree {
		return r
	}
	switch b.mode {
	case FIFO:
		if b.fifoHead == "" {
			b.fifoHead = j.ID
		}
		return r
	case Corral:
		return b.reserve(j, g, r, plan)
	}
	return r
}

// reserveStarved gives a job that has waited past the starvation age a
// reservation before anything is placed. Among starved jobs the largest
// (GPUs) goes first, then the oldest; priority and queue order do not count:
// that is what bounds the wait. Largest first because small jobs find gaps
// on their own, and because big gangs reserved one after the other share
// one drain of the cluster instead of paying one each. Starved jobs that fit
// now are reserved too (their room is theirs this cycle) and do not count:
// the walk stops at the first starved job that has to wait.
// maxStarvedTries bounds the earliest-start searches reserveStarved runs in
// one cycle.
const maxStarvedTries = 16

func (b *backfiller) reserveStarved(order []int, plan *Plan) {
	if b.mode != Corral || b.cfg.StarveAfter < 0 {
		return
	}
	var starved []int
	for _, i := range order {
		pj := b.s.Pending[i]
		if pj.Waiting == nil && b.s.Now.Sub(pj.Job.Submit) >= b.cfg.StarveAfter {
			starved = append(starved, i)
		}
	}
	sort.SliceStable(starved, func(a, c int) bool {
		x, y := b.s.Pending[starved[a]].Job, b.s.Pending[starved[c]].Job
		if gx, gy := x.GPUMilli(), y.GPUMilli(); gx != gy {
			return gx > gy
		}
		if !x.Submit.Equal(y.Submit) {
			return x.Submit.Before(y.Submit)
		}
		return x.ID < y.ID
	})
	reserved := map[int]bool{}
	noSlot := map[string]bool{} // shapes Earliest found no start for this cycle
	tries := 0
	for _, i := range starved {
		if tries >= maxStarvedTries {
			// Thousands of starved jobs (a backlog after an outage) would
			// each replay every release; the rest wait for later cycles.
			return
		}
		pj := b.s.Pending[i]
		pods, _, ok := resolvePods(b.view, pj)
		if !ok {
			continue
		}
		g, _, ok := gangOf(b.view, pj.Job, pods)
		if !ok || placement.CheckNeverFits(b.view, g) != nil {
			continue
		}
		key := shapeKey(g)
		if noSlot[key] {
			continue
		}
		tries++
		blocked := func(n int) bool { return reserved[n] }
		slot, ok := backfill.Earliest(b.view, b.live(), g, b.s.Now, b.s.Runtimes, blocked)
		if !ok {
			noSlot[key] = true
			continue
		}
		if slot.Start.After(b.s.Now) && b.evictStragglers(pj.Job, g, slot, blocked, plan) {
			// The jobs that kept it waiting are gone: its start is earlier.
			if earlier, ok := backfill.Earliest(b.view, b.live(), g, b.s.Now, b.s.Runtimes, blocked); ok {
				slot = earlier
			}
		}
		b.add(pj.Job, slot, plan)
		plan.Stats.StarvedReservations++
		for _, n := range slot.Nodes {
			reserved[n] = true
		}
		if slot.Start.After(b.s.Now) {
			return
		}
	}
}

// Straggler eviction: a starved job's reservation often waits on a few
// small long jobs while the rest of its domain, already drained, sits idle
// or runs only short backfill (on gen:llm seed 48 a whole-cluster gang
// waited 131 h, reserved up to 140 h ahead, the cluster mostly idle). The
// latest-ending jobs in its way are evicted when they are few and cheap
// next to the time they cost it:
const (
	// stragglerShare: the evicted jobs hold at most this share of the
	// starved job's GPUs (1/stragglerShare).
	stragglerShare = 8
	// stragglerCost: the work they lose (GPU-seconds since their last
	// checkpoint plus restart overhead) times this is at most the starved
	// job's GPUs times the time its start moves earlier.
	stragglerCost = 4
)

// evictStragglers looks at the running jobs on slot's nodes that starved
// job j (gang g) waits for and may evict: preemptible (not protected), of
// no higher priority, not themselves started after starving. Taking the
// latest-ending first, up to 1/stragglerShare of j's GPUs, it replays the
// ends with them gone now; if j would start earlier and the work lost is
// small (stragglerCost), the ones that still matter are evicted. Only
// without queues (a queue's jobs are evicted by its own rules) and only
// where preemption is on. It reports whether it evicted.
func (b *backfiller) evictStragglers(j *workload.Job, g placement.Gang, slot backfill.Slot, blocked func(int) bool, plan *Plan) bool {
	if b.room == nil || b.qs != nil {
		return false
	}
	b.syncEvictions(plan)
	on := map[int]bool{}
	for _, n := range slot.Nodes {
		on[n] = true
	}
	running := map[workload.JobID]RunningJob{}
	for _, rj := range b.s.Running {
		running[rj.Job.ID] = rj
	}
	starved := map[workload.JobID]bool{}
	for i, rj := range b.room.running {
		starved[rj.Job.ID] = b.room.starvedRun != nil && b.room.starvedRun[i]
	}
	never := b.s.Now.Add(100 * 365 * 24 * time.Hour)
	endOf := func(h backfill.Holder) time.Time {
		if d, _, ok := cycle.Runtime(b.s.Runtimes, h.Job); ok {
			return h.Start.Add(d)
		}
		return never
	}
	type cand struct {
		i     int // in live
		end   time.Time
		milli int64
	}
	live := b.live()
	var cands []cand
	for i, h := range live {
		rj, ok := running[h.Job.ID]
		if !ok || rj.Job.Priority > j.Priority || starved[h.Job.ID] || b.shrunk[h.Job.ID] || b.otherEvs[h.Job.ID] ||
			b.room.gone[h.Job.ID] || preempt.Protected(rj.Job, preempt.RunFor(rj, b.s.Now)) != "" {
			continue
		}
		in := false
		var milli int64
		for _, p := range h.Pods {
			in = in || on[p.Node]
			milli += p.Alloc.GPUMilli()
		}
		if in && endOf(h).After(b.s.Now) {
			cands = append(cands, cand{i: i, end: endOf(h), milli: milli})
		}
	}
	sort.Slice(cands, func(a, c int) bool {
		if !cands[a].end.Equal(cands[c].end) {
			return cands[a].end.After(cands[c].end)
		}
		return live[cands[a].i].Job.ID < live[cands[c].i].Job.ID
	})
	var held int64
	trial := append([]backfill.Holder(nil), live...)
	var picked []cand
	for _, c := range cands {
		if (held+c.milli)*stragglerShare > j.GPUMilli() {
			break
		}
		held += c.milli
		trial[c.i].End = b.s.Now
		picked = append(picked, c)
	}
	if len(picked) == 0 {
		return false
	}
	earlier, ok := backfill.Earliest(b.view, trial, g, b.s.Now, b.s.Runtimes, blocked)
	if !ok || !earlier.Start.Before(slot.Start) {
		return false
	}
	uses := map[int]bool{}
	for _, n := range earlier.Nodes {
		uses[n] = true
	}
	var victims []RunningJob
	var lost float64
	for _, c := range picked {
		h := live[c.i]
		in := false
		for _, p := range h.Pods {
			in = in || uses[p.Node]
		}
		if !in || !c.end.After(earlier.Start) {
			continue
		}
		rj := running[h.Job.ID]
		victims = append(victims, rj)
		lost += preempt.RestartCost(rj, nil, b.s.Now)
	}
	gain := float64(j.GPUMilli()) / workload.MilliPerGPU * slot.Start.Sub(earlier.Start).Seconds()
	if len(victims) == 0 || lost*stragglerCost > gain {
		return false
	}
	sort.Slice(victims, func(a, c int) bool { return victims[a].Job.ID < victims[c].Job.ID })
	for _, rj := range victims {
		ev := Eviction{Job: rj.Job.ID, Cause: CausePreempt, By: j.ID, LostGPUSeconds: preempt.RestartCost(rj, nil, b.s.Now),
			Message: fmt.Sprintf("evicted for job %s, waiting past the starvation age: without its %d longest jobs in the way it starts in ~%s instead of ~%s",
				j.ID, len(victims), backfill.Humanize(earlier.Start.Sub(b.s.Now)), backfill.Humanize(slot.Start.Sub(b.s.Now)))}
		for _, p := range rj.Pods {
			ev.Pods = append(ev.Pods, p.Pod)
			b.view.Release(p.NodeIndex, p.Alloc)
		}
		sort.Slice(ev.Pods, func(a, c int) bool { return podLess(ev.Pods[a], ev.Pods[c]) })
		plan.Evictions = append(plan.Evictions, ev)
		plan.Stats.Evictions++
		b.gone[rj.Job.ID] = true
		b.taken(rj.Job.ID)
	}
	b.seenEvs = len(plan.Evictions)
	return true
}

// reservationOf returns the index of j's reservation, or -1.
func (b *backfiller) reservationOf(j workload.JobID) int {
	for i, r := range b.res {
		if r.job.ID == j {
			return i
		}
	}
	return -1
}

// live lists the holders still holding capacity.
func (b *backfiller) live() []backfill.Holder {
	var out []backfill.Holder
	for _, h := range b.holders {
		if !b.gone[h.Job.ID] && len(h.Pods) > 0 {
			out = append(out, h)
		}
	}
	return out
}

// reserve gives a blocked job a reservation if the caps allow: the earliest
// time its gang fits once running jobs end, and the domain where.
func (b *backfiller) reserve(j *workload.Job, g placement.Gang, r Reason, plan *Plan) Reason {
	if i := b.reservationOf(j.ID); i >= 0 {
		// Reserved as a starved job: say so.
		r.Level, r.Best, r.BestFits = plan.Reservations[i].Level, plan.Reservations[i].Domain, 0
		r.Message = backfill.Describe(b.view, b.res[i].slot, b.s.Now) + " (waiting past the starvation age); " + r.Message
		return r
	}
	if b.normal >= b.cfg.MaxReservations || b.queueRs[j.Queue] >= b.cfg.MaxReservationsPerQueue {
		return r
	}
	b.normal++
	b.queueRs[j.Queue]++
	b.syncEvictions(plan)
	slot, ok := backfill.Earliest(b.view, b.live(), g, b.s.Now, b.s.Runtimes, b.holds.Held)
	if !ok {
		switch {
		case len(b.res) > 0:
			// Earlier reservations may hold the room it needs (it would
			// not end before they start): estimates are not the only cause.
			r.Message += "; no reservation: the room it needs is held for jobs reserved ahead of it, or the jobs in its way have no runtime estimate"
		case len(b.s.Running) > 0:
			// Without running jobs nothing corral knows will free the room:
			// blaming estimates would mislead.
			r.Message += "; no reservation: the jobs in its way have no runtime estimate"
		}
		return r
	}
	rv := b.add(j, slot, plan)
	r.Level, r.Best, r.BestFits = rv.Level, rv.Domain, 0
	r.Message = backfill.Describe(b.view, slot, b.s.Now) + "; " + r.Message
	return r
}

// add records a reservation and puts it in the plan.
func (b *backfiller) add(j *workload.Job, slot backfill.Slot, plan *Plan) Reservation {
	ar := activeReservation{job: j, slot: slot, nodes: map[int]bool{}}
	rv := Reservation{Job: j.ID, Start: slot.Start, Level: cluster.LevelCluster, Domain: cluster.LevelCluster}
	if slot.Level > 0 {
		rv.Level, rv.Domain = b.view.Levels()[slot.Level], b.view.Domain(slot.Domain).Name
	}
	for _, n := range slot.Nodes {
		ar.nodes[n] = true
		rv.Nodes = append(rv.Nodes, b.view.Node(n).Name)
	}
	b.res = append(b.res, ar)
	plan.Reservations = append(plan.Reservations, rv)
	return rv
}

// shrinkFor takes pods above their minimum from running elastic jobs of no
// higher priority than j, lowest priority and latest start first, until j's
// gang fits. It runs before any preemption: a shrunk job keeps running. If
// shrinking cannot make room, nothing is shrunk.
func (b *backfiller) shrinkFor(placer *placement.Placer, j *workload.Job, g placement.Gang, plan *Plan) (placement.Result, bool) {
	if b.mode != Corral {
		return placement.Result{}, false
	}
	b.syncEvictions(plan)
	var cands []RunningJob
	for _, rj := range b.s.Running {
		if rj.Job.ID != j.ID && !b.gone[rj.Job.ID] && !b.shrunk[rj.Job.ID] && !b.otherEvs[rj.Job.ID] &&
			rj.Job.Priority <= j.Priority && len(rj.Pods) > rj.Job.GangMin() {
			cands = append(cands, rj)
		}
	}
	if len(cands) == 0 {
		return placement.Result{}, false
	}
	sort.Slice(cands, func(a, c int) bool {
		x, y := cands[a], cands[c]
		if x.Job.Priority != y.Job.Priority {
			return x.Job.Priority < y.Job.Priority
		}
		if !x.Start.Equal(y.Start) {
			return x.Start.After(y.Start)
		}
		return x.Job.ID < y.Job.ID
	})
	var cuts []cut
	for _, rj := range cands {
		pods := append([]PodBind(nil), rj.Pods...)
		sort.Slice(pods, func(a, c int) bool { return podLess(pods[c].Pod, pods[a].Pod) })
		cuts = append(cuts, cut{rj: rj})
		last := &cuts[len(cuts)-1]
		// One pod at a time, highest ordinal first: take no more than needed.
		for _, p := range pods[:len(pods)-rj.Job.GangMin()] {
			b.view.Release(p.NodeIndex, p.Alloc)
			b.holds.Refresh()
			last.pods = append(last.pods, p)
			res := placer.PlaceGang(g)
			if res.Failure != nil {
				continue
			}
			b.commitShrink(j, cuts, plan)
			return res, true
		}
	}
	b.restore(func() {
		for _, c := range cuts {
			for _, p := range c.pods {
				_ = b.view.Allocate(p.NodeIndex, p.Alloc)
			}
		}
	})
	return placement.Result{}, false
}

type cut struct {
	rj   RunningJob
	pods []PodBind
}

// commitShrink turns the pods taken in a successful shrink into evictions.
func (b *backfiller) commitShrink(j *workload.Job, cuts []cut, plan *Plan) {
	for _, c := range cuts {
		if len(c.pods) == 0 {
			continue
		}
		ev := Eviction{Job: c.rj.Job.ID, Cause: CauseShrink, By: j.ID,
			Message: fmt.Sprintf("shrunk by %d pods (to %d, its minimum %d) for job %s",
				len(c.pods), len(c.rj.Pods)-len(c.pods), c.rj.Job.GangMin(), j.ID)}
		gone := map[workload.PodRef]bool{}
		for _, p := range c.pods {
			ev.Pods = append(ev.Pods, p.Pod)
			gone[p.Pod] = true
		}
		sort.Slice(ev.Pods, func(a, c int) bool { return podLess(ev.Pods[a], ev.Pods[c]) })
		// The pods cut lose their work since the last checkpoint, as a
		// preemption of them would.
		ev.LostGPUSeconds = preempt.RestartCost(c.rj, ev.Pods, b.s.Now)
		plan.Evictions = append(plan.Evictions, ev)
		b.shrunk[c.rj.Job.ID] = true
		b.taken(c.rj.Job.ID)
		if i, ok := b.pos[c.rj.Job.ID]; ok {
			var keep []backfill.Placed
			for _, p := range c.rj.Pods {
				if !gone[p.Pod] {
					keep = append(keep, backfill.Placed{Pod: p.Pod, Node: p.NodeIndex, Alloc: p.Alloc})
				}
			}
			b.holders[i].Pods = keep
		}
	}
}

// reclaimPool evicts jobs of other classes that backfill a pool of j's
// class, cheapest restart first, until j fits. If that cannot make room,
// nothing is evicted.
func (b *backfiller) reclaimPool(placer *placement.Placer, j *workload.Job, g placement.Gang, plan *Plan) (placement.Result, bool) {
	var pools []*backfill.ResolvedPool
	for _, p := range b.pools {
		if p.Class == j.Class && p.Others == backfill.PoolPreemptible {
			pools = append(pools, p)
		}
	}
	if len(pools) == 0 {
		return placement.Result{}, false
	}
	b.syncEvictions(plan)
	var cands []RunningJob
	for _, rj := range b.s.Running {
		if rj.Job.Class == j.Class || b.gone[rj.Job.ID] || b.shrunk[rj.Job.ID] || b.otherEvs[rj.Job.ID] {
			continue
		}
		in := false
		for _, p := range rj.Pods {
			for _, pl := range pools {
				in = in || pl.Has(p.NodeIndex)
			}
		}
		if in {
			cands = append(cands, rj)
		}
	}
	costs := map[workload.JobID]float64{}
	for _, rj := range cands {
		costs[rj.Job.ID] = preempt.RestartCost(rj, nil, b.s.Now)
	}
	sort.Slice(cands, func(a, c int) bool {
		x, y := cands[a], cands[c]
		if costs[x.Job.ID] != costs[y.Job.ID] {
			return costs[x.Job.ID] < costs[y.Job.ID]
		}
		return x.Job.ID < y.Job.ID
	})
	var taken []RunningJob
	for _, rj := range cands {
		for _, p := range rj.Pods {
			b.view.Release(p.NodeIndex, p.Alloc)
		}
		b.holds.Refresh()
		taken = append(taken, rj)
		res := placer.PlaceGang(g)
		if res.Failure != nil {
			continue
		}
		for _, t := range taken {
			ev := Eviction{Job: t.Job.ID, Cause: CauseReclaim, By: j.ID, LostGPUSeconds: costs[t.Job.ID],
				Message: fmt.Sprintf("held capacity taken back for job %s of class %q", j.ID, j.Class)}
			for _, p := range t.Pods {
				ev.Pods = append(ev.Pods, p.Pod)
			}
			plan.Evictions = append(plan.Evictions, ev)
			b.gone[t.Job.ID] = true
			b.taken(t.Job.ID)
		}
		return res, true
	}
	b.restore(func() {
		for _, t := range taken {
			for _, p := range t.Pods {
				_ = b.view.Allocate(p.NodeIndex, p.Alloc)
			}
		}
	})
	return placement.Result{}, false
}

// restore gives back capacity taken out of the view on a trial: holds are
// lifted so the exact allocations fit again, then taken anew.
func (b *backfiller) restore(fn func()) {
	held := map[int]bool{}
	for n := 0; n < b.view.NumNodes(); n++ {
		if b.holds.Held(n) {
			held[n] = true
		}
	}
	b.holds.ReleaseAll()
	fn()
	b.holds.Sync(held)
}

// grow places missing pods of running elastic jobs into idle capacity, but
// only when no job is left waiting for room: grown pods are the first given
// back (shrinkFor) when one arrives.
func (b *backfiller) grow(placer *placement.Placer, plan *Plan) {
	if b.mode != Corral {
		return
	}
	for _, p := range plan.Pending {
		if p.Reason.Verdict == placement.WaitFree {
			return
		}
	}
	b.syncEvictions(plan)
	running := append([]RunningJob(nil), b.s.Running...)
	sort.Slice(running, func(a, c int) bool {
		x, y := running[a].Job, running[c].Job
		if x.Priority != y.Priority {
			return x.Priority > y.Priority
		}
		if !running[a].Start.Equal(running[c].Start) {
			return running[a].Start.Before(running[c].Start)
		}
		return x.ID < y.ID
	})
	for _, rj := range running {
		j := rj.Job
		if b.gone[j.ID] || b.shrunk[j.ID] || b.otherEvs[j.ID] || j.GangMin() >= j.Pods() || len(rj.Pods) >= j.Pods() || len(rj.Pods) == 0 {
			continue
		}
		have := map[workload.PodRef]bool{}
		for _, p := range rj.Pods {
			have[p.Pod] = true
		}
		within := cluster.DomainID(0)
		if lv := b.view.LevelIndex(j.Topology.Required); lv > 0 {
			within = b.view.NodeDomain(rj.Pods[0].NodeIndex, lv)
		}
		b.admit(j)
		leaf := ""
		if b.qs != nil {
			var err error
			if leaf, err = b.qs.Leaf(j); err != nil {
				continue
			}
		}
		var res placement.Result
		full := false
		j.EachPod(func(ref workload.PodRef, r workload.Request) {
			if full || have[ref] || j.Validate() != nil {
				return
			}
			pr, _ := placement.Resolve(b.view, ref, r)
			a, ok := placer.PlacePod(&pr, within)
			if !ok {
				return
			}
			// A queue limit is a hard cap, idle capacity or not: grow one
			// pod at a time up to it.
			if why := b.qs.LimitAfter(leaf, b.view, []placement.Assignment{a}); why != "" {
				placer.Undo()
				full = true
				return
			}
			b.qs.Bound(leaf, b.view, []placement.Assignment{a})
			placer.Commit()
			res.Assignments = append(res.Assignments, a)
		})
		if len(res.Assignments) == 0 {
			continue
		}
		gb := bindOf(b.view, j.ID, res)
		plan.Binds = append(plan.Binds, gb)
		plan.Stats.PodsGrown += len(gb.Pods)
		b.placed(j, gb, plan)
	}
}

// attach links the cycle's queues and preemption: growth stays within
// queue limits, and the jobs stopped at their max runtime are no victims.
func (b *backfiller) attach(room *roomMaker, qs *queue.State) {
	b.room, b.qs = room, qs
	if room != nil && b.mode == Corral {
		// Preemption honours reservations as placement does: it may not
		// free reserved nodes for a job that may not use them.
		room.reserved = b.holds.Held
		if b.cfg.StarveAfter > 0 {
			// A job that started after waiting past the starvation age is
			// not evicted for priority: it would wait, and drain its
			// domain, all over again, so the bound on its wait would not
			// hold. (A whole-cluster gang started after a four-day drain
			// was evicted within the hour for a one-GPU job.)
			room.starvedRun = make([]bool, len(room.running))
			for i, rj := range room.running {
				room.starvedRun[i] = rj.Start.Sub(rj.Job.Submit) >= b.cfg.StarveAfter
			}
		}
	}
	for id := range b.gone {
		b.taken(id)
	}
}

// taken tells preemption that a backfill step evicted (part of) job id.
func (b *backfiller) taken(id workload.JobID) {
	if b.room != nil {
		b.room.gone[id] = true
	}
}

// syncEvictions takes note of evictions other steps added to the plan: their
// jobs are no candidates for shrinking, pools or growth, and their pods no
// longer hold capacity in a reservation's replay. Holds are taken again, as
// the victims may have freed capacity on held nodes.
func (b *backfiller) syncEvictions(plan *Plan) {
	if b.seenEvs == len(plan.Evictions) {
		return
	}
	for _, ev := range plan.Evictions[b.seenEvs:] {
		if b.gone[ev.Job] || b.shrunk[ev.Job] {
			continue // one of ours
		}
		b.otherEvs[ev.Job] = true
		i, ok := b.pos[ev.Job]
		if !ok {
			continue
		}
		out := map[workload.PodRef]bool{}
		for _, p := range ev.Pods {
			out[p] = true
		}
		var keep []backfill.Placed
		for _, p := range b.holders[i].Pods {
			if !out[p.Pod] {
				keep = append(keep, p)
			}
		}
		b.holders[i].Pods = keep
	}
	b.seenEvs = len(plan.Evictions)
	b.holds.Refresh()
}

// finish lifts every hold: the view is the cycle's alone, but a clean view
// keeps later steps (other helpers' steps) from seeing held capacity as used.
func (b *backfiller) finish() { b.holds.ReleaseAll() }

func podLess(a, c workload.PodRef) bool {
	if a.PodSet != c.PodSet {
		return a.PodSet < c.PodSet
	}
	return a.Index < c.Index
}
