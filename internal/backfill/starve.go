package backfill

import (
	"fmt"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// reserveStarved gives a job that has waited past the starvation age a
// reservation before anything is placed. Among starved jobs the largest
// (GPUs) goes first, then, among equally large ones, the one expected to
// run shortest (starvedOrder), then the oldest; priority and queue order do
// not count: that is what bounds the wait. Largest first because small
// jobs find gaps on their own, and because big gangs reserved one after the
// other share one drain of the cluster instead of paying one each. Starved
// jobs that fit now are reserved too (their room is theirs this cycle) and
// do not count: the walk stops at the first starved job that has to wait;
// at most maxStarvedTries earliest-start searches run in one cycle. A
// starved job whose start is a guess (below Config.ReserveConfidence) or
// whose hold would idle more GPU time than it will use (WorthHolding) is
// not reserved, and no straggler is evicted for it. Without queues, once
// starved jobs of at least half the cluster have held it back to back for
// longer than the starvation age (starvedStreak), the starved jobs smaller
// than the first are left out of the walk; when that head could start now,
// those that fit and are expected to end within its runtime are bound
// first (letIn) and the head reserves behind them.
// order is the pending jobs (indexes into the snapshot) their queues admit.
func (b *Cycle) ReserveStarved(order []int) {
	if b.mode != EASY || b.cfg.StarveAfter < 0 {
		return
	}
	s, view := b.l.Snapshot(), b.l.View()
	var starved []int
	for _, i := range order {
		pj := s.Pending[i]
		if pj.Waiting == nil && b.pastStarvation(s.Now.Sub(pj.Job.Submit)) && !b.overLimit(pj) {
			starved = append(starved, i)
		}
	}
	starvedOrder(s.Runtimes, s.Pending, starved, b.queues == nil)
	var behind []int // starved jobs smaller than the head of a long streak
	if b.queues == nil && len(starved) > 1 && b.starvedStreak(view.CapacityMilli()) > b.cfg.StarveAfter {
		starved, behind = splitBehind(s.Pending, starved)
	}
	reserved := map[int]bool{}
	noSlot := map[string]bool{} // shapes Earliest found no start for this cycle
	// slots are the starts Earliest found for each shape since the last
	// reservation: until one is added the inputs are the same, so a shape
	// refused as a guess or not worth holding need not be replayed again
	// for the next job of that shape (each replay places the gang at every
	// release; without this the refusals made cycles 2.5x slower).
	slots := map[string]Slot{}
	tries := 0
	for _, i := range starved {
		if tries >= maxStarvedTries {
			// Thousands of starved jobs (a backlog after an outage) would
			// each replay every release; the rest wait for later cycles.
			return
		}
		pj := s.Pending[i]
		g, key, ok := b.l.Gang(pj)
		if !ok || placement.CheckNeverFits(view, g) != nil || noSlot[key] {
			continue
		}
		tries++
		blocked := func(n int) bool { return reserved[n] }
		slot, ok := slots[key]
		if !ok {
			if slot, ok = Earliest(view, b.l.Holders(), g, s.Now, s.Runtimes, blocked); !ok {
				noSlot[key] = true
				continue
			}
			slots[key] = slot
		}
		if len(behind) > 0 && !slot.Start.After(s.Now) {
			// The streak's next head could start now: the jobs that
			// starved behind it go first, and it reserves behind them.
			let := b.letIn(behind, b.letInUntil(pj.Job))
			behind = nil
			if let > 0 {
				clear(slots)
				if slot, ok = Earliest(view, b.l.Holders(), g, s.Now, s.Runtimes, blocked); !ok {
					noSlot[key] = true
					continue
				}
				slots[key] = slot
			}
		}
		if b.refusesHold(pj.Job, slot) != holdOK {
			// A guess: on gen:llm seeds 42 and 47 such a start receded
			// every cycle as the estimates of the jobs in its way were
			// extended, the reservation kept jobs declaring a week out for
			// 10 days, and the starved job started exactly when greedy
			// started it. Not worth it: its nodes would idle longer than it
			// will run. Either way it is placed as greedy backfill would,
			// when its room is free, and nothing is evicted for it
			// (evicting for a hold that is then not made only restarted
			// the same jobs cycle after cycle).
			continue
		}
		if slot.Start.After(s.Now) && b.evictStragglers(pj.Job, g, slot, blocked) {
			// The jobs that kept it waiting are gone: its start is earlier.
			if earlier, ok := Earliest(view, b.l.Holders(), g, s.Now, s.Runtimes, blocked); ok {
				slot = earlier
			}
		}
		b.add(pj.Job, slot)
		clear(slots)
		b.l.Stats().StarvedReservations++
		for _, n := range slot.Nodes {
			reserved[n] = true
		}
		if slot.Start.After(s.Now) {
			return
		}
	}
}

// starvedOrder sorts starved jobs (indexes into pending): the largest
// (GPUs) first, then among equally large ones the shortest expected
// runtime (cycle.Runtime: declared, learned, else the max runtime; jobs
// without any estimate last), then the oldest. The drain of the cluster
// for its largest jobs happens once; whichever of them runs first holds
// the others back by its whole runtime. Oldest first among them made
// whole-cluster jobs of gen:llm that run minutes wait behind older ones
// that ran 22-51 h (tuning seeds 42, 44, 47, 48; see docs/backfill.md).
// byRuntime false (with queues) keeps the oldest first among equals: on
// the issue-5 queue workloads (tuning seeds 42-49, --queues teams) the
// shortest-first order raised the GPU-hours lost to preemption 104.8 ->
// 129.5 (every job checkpointing) and 560.0 -> 705.4 (the generator's mix);
// why was not diagnosed (perhaps a starved job's hold competing with
// the guarantees reclaim restores).
func starvedOrder(h *History, pending []cycle.PendingJob, starved []int, byRuntime bool) {
	type key struct {
		milli   int64
		runtime time.Duration
		known   bool
	}
	keys := make(map[int]key, len(starved))
	for _, i := range starved {
		j := pending[i].Job
		k := key{milli: j.GPUMilli()}
		if byRuntime {
			k.runtime, _, k.known = cycle.Runtime(h, j)
		}
		keys[i] = k
	}
	sort.SliceStable(starved, func(a, c int) bool {
		x, y := pending[starved[a]].Job, pending[starved[c]].Job
		kx, ky := keys[starved[a]], keys[starved[c]]
		if kx.milli != ky.milli {
			return kx.milli > ky.milli
		}
		if kx.known != ky.known {
			return kx.known
		}
		if kx.runtime != ky.runtime {
			return kx.runtime < ky.runtime
		}
		if !x.Submit.Equal(y.Submit) {
			return x.Submit.Before(y.Submit)
		}
		return x.ID < y.ID
	})
}

// streakGap is the longest pause between two runs that still counts as
// back to back (starvedStreak): a driver's cycle does not start the next
// job at the very instant the last one ended.
const streakGap = 15 * time.Minute

// starvedStreak is how long, up to now, jobs that started past the
// starvation age and hold at least half the cluster's GPUs have held it
// back to back: the running ones, and the completed ones whose spans the
// history keeps (cycle.History.Spans; the driver reports them). Served
// largest first, a backlog of starved whole-cluster jobs keeps every other
// job waiting as long as it lasts (gen:llm, 4,000 jobs, tuning seed 111:
// 27 of them, 163 h of runtime, served in a row for eight days while jobs
// of every size that arrived meanwhile waited 130-220 h). Looking back at
// what has been served, not ahead at what waits, keeps ordinary drains
// alone: a forward-looking test (the starved jobs ahead would hold the
// cluster for more than the starvation age) also fired on the 1,500-job
// runs and cost them (issue 17, thirteenth stop).
func (b *Cycle) starvedStreak(capacity int64) time.Duration {
	s := b.l.Snapshot()
	least := (capacity + 1) / 2
	var spans []cycle.Span
	for _, sp := range s.Runtimes.Spans(least) {
		if b.pastStarvation(sp.Waited) {
			spans = append(spans, sp)
		}
	}
	for _, rj := range b.l.Running() {
		if rj.Job.GPUMilli() >= least && b.pastStarvation(rj.Start.Sub(rj.Job.Submit)) {
			spans = append(spans, cycle.Span{Start: rj.Start, End: s.Now})
		}
	}
	return backToBack(spans, s.Now)
}

// backToBack is how long before now the spans cover without a pause
// longer than streakGap, starting from one that is running or ended
// within streakGap of now.
func backToBack(spans []cycle.Span, now time.Time) time.Duration {
	from := now
	for moved := true; moved; {
		moved = false
		for _, sp := range spans {
			if sp.Start.Before(from) && !sp.End.Before(from.Add(-streakGap)) {
				from, moved = sp.Start, true
			}
		}
	}
	return now.Sub(from)
}

// splitBehind splits starved (in starvedOrder) into the jobs as large as
// the first, which keep their place, and the smaller ones behind them.
func splitBehind(pending []cycle.PendingJob, starved []int) (keep, behind []int) {
	head := pending[starved[0]].Job.GPUMilli()
	keep = starved[:0:0]
	for _, i := range starved {
		if pending[i].Job.GPUMilli() < head {
			behind = append(behind, i)
		} else {
			keep = append(keep, i)
		}
	}
	return keep, behind
}

// letInUntil is when the jobs let in ahead of a streak's head must be
// expected to end: within the head's own expected runtime (the starvation
// age when it has none), so that each round in between delays it by at
// most as long as it will run, and the cluster alternates between the
// streak and the jobs that starved meanwhile. Letting in whatever fits
// (no bound) made the head wait for the longest of them, round after
// round: on tuning seeds 111 and 113 the largest jobs' p95 wait went from
// 8.0 and 9.1 days to 20.9 and 19.6 (greedy's: 22.3 and 23.9).
func (b *Cycle) letInUntil(head *workload.Job) time.Time {
	s := b.l.Snapshot()
	d, _, ok := cycle.Runtime(s.Runtimes, head)
	if !ok {
		d = b.cfg.StarveAfter
	}
	return s.Now.Add(d)
}

// letIn binds, in order, the starved jobs behind a streak's head (indexes
// into pending) that fit now and are expected (endsBy) to end by until,
// before anything else is placed: the moment the head could start is when
// they go in between. The holds keep them off the nodes reserved in this walk. At
// most maxStarvedTries shapes that do not fit are tried. It returns how
// many it bound; placement skips them (LetIn).
func (b *Cycle) letIn(behind []int, until time.Time) int {
	s := b.l.Snapshot()
	evictedFor := map[workload.JobID]bool{}
	for _, tp := range s.Terminating {
		evictedFor[tp.For] = true
	}
	placer := b.l.Placer()
	misses, bound := 0, 0
	full := map[string]bool{} // shapes that did not fit
	for _, i := range behind {
		if misses >= maxStarvedTries {
			break
		}
		pj := s.Pending[i]
		if evictedFor[pj.Job.ID] || !b.endsBy(pj.Job, until) {
			// It waits for its victims to terminate (placement), or
			// would hold the head back longer than the head will run, or
			// for as long as nobody can tell.
			continue
		}
		g, key, ok := b.l.Gang(pj)
		if !ok {
			continue
		}
		if key += "#" + b.Admit(pj.Job); full[key] {
			continue
		}
		res := placer.PlaceGang(g)
		if res.Failure != nil {
			full[key] = true
			misses++
			continue
		}
		placer.Commit()
		gb := b.l.Bind(pj.Job, res)
		st := b.l.Stats()
		st.JobsPlaced++
		st.PodsPlaced += len(res.Assignments)
		st.StarvedLetIn++
		b.Placed(pj.Job, gb)
		if b.letInJobs == nil {
			b.letInJobs = map[workload.JobID]bool{}
		}
		b.letInJobs[pj.Job.ID] = true
		bound++
	}
	return bound
}

// endsBy reports whether j, started now, is expected to end by t, on any
// estimate (declared or learned). Requiring a firm one (confidence at
// least Config.ReserveConfidence) let in almost nobody under realistic
// information, where few estimates are firm: on tuning seed 111 it changed
// nothing. A weak estimate let in can make the head's start a guess, which
// holds nothing; after a streak of starved jobs that ends it, as intended.
func (b *Cycle) endsBy(j *workload.Job, t time.Time) bool {
	s := b.l.Snapshot()
	e, ok := Expect(s.Runtimes, j, time.Time{}, s.Now)
	return ok && !s.Now.Add(e.Runtime).After(t)
}

// LetIn reports whether the cycle bound job id already, ahead of the head
// of a streak of starved jobs (letIn).
func (b *Cycle) LetIn(id workload.JobID) bool { return b.letInJobs[id] }

// Straggler eviction: a starved job's reservation often waits on a few
// small long jobs while the rest of its domain, already drained, sits idle
// or runs only short backfill (on gen:llm seed 48 a whole-cluster gang
// waited 131 h, reserved up to 140 h ahead, the cluster mostly idle). The
// latest-ending jobs in its way are evicted when they are few and cheap
// next to the time they cost it:
const (
	maxStarvedTries = 16
	// stragglerShare: the evicted jobs hold at most this share of the
	// starved job's GPUs (1/stragglerShare).
	stragglerShare = 8
	// stragglerCost: the work they lose (GPU-seconds since their last
	// checkpoint plus restart overhead) times this is at most the starved
	// job's GPUs times the time its start moves earlier.
	stragglerCost = 4
)

// admittedWhileStarved reports whether rj started after starved job j had
// waited past the starvation age: corral itself let it in then, because
// j's reservation was not made in that cycle (its start a guess, or not
// worth holding) or because rj was to end before j's start. Evicting it
// undoes corral's own decision: on gen:llm (4,000 jobs, exact runtimes,
// tuning seed 45) a whole-cluster job's start was a guess for one cycle in
// a few (a 15-minute job running 10% over its estimate halves the
// confidence of every start waiting on it), a 7-day and a 5-day job started
// in each such cycle and were evicted for the hold in the next, 11 times;
// the 7-day job, held out until the hold's start, was the run's tail. The
// starvation age counts as starved, as everywhere else (pastStarvation).
func (b *Cycle) admittedWhileStarved(rj cycle.RunningJob, j *workload.Job) bool {
	return b.pastStarvation(rj.Start.Sub(j.Submit))
}

// evictStragglers looks at the running jobs on slot's nodes that starved
// job j (gang g) waits for and may evict: preemptible (not protected), of
// no higher priority, not themselves started after starving, not started
// after j starved (admittedWhileStarved). Taking the
// latest-ending first, up to 1/stragglerShare of j's GPUs, it replays the
// ends with them gone now; if j would start earlier and the work lost is
// small (stragglerCost), the ones that still matter are evicted. Only
// without queues (a queue's jobs are evicted by its own rules) and only
// where preemption is on. It reports whether it evicted.
func (b *Cycle) evictStragglers(j *workload.Job, g placement.Gang, slot Slot, blocked func(int) bool) bool {
	if !b.Stragglers {
		return false
	}
	b.l.RetakeHolds()
	s, view := b.l.Snapshot(), b.l.View()
	on := map[int]bool{}
	for _, n := range slot.Nodes {
		on[n] = true
	}
	running := map[workload.JobID]cycle.RunningJob{}
	for _, rj := range b.l.Running() {
		running[rj.Job.ID] = rj
	}
	never := s.Now.Add(100 * 365 * 24 * time.Hour)
	endOf := func(h Holder) time.Time {
		if d, _, ok := cycle.Runtime(s.Runtimes, h.Job); ok {
			return h.Start.Add(d)
		}
		return never
	}
	type cand struct {
		i     int // in live
		end   time.Time
		milli int64
	}
	live := b.l.Holders()
	var cands []cand
	for i, h := range live {
		rj, ok := running[h.Job.ID]
		if !ok || rj.Job.Priority > j.Priority || b.StartedStarved(rj) || b.l.Protected(rj) || b.admittedWhileStarved(rj, j) {
			continue
		}
		in := false
		var milli int64
		for _, p := range h.Pods {
			in = in || on[p.NodeIndex]
			milli += p.Alloc.GPUMilli()
		}
		if in && endOf(h).After(s.Now) {
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
	trial := append([]Holder(nil), live...)
	var picked []cand
	for _, c := range cands {
		if (held+c.milli)*stragglerShare > j.GPUMilli() {
			break
		}
		held += c.milli
		trial[c.i].End = s.Now
		picked = append(picked, c)
	}
	if len(picked) == 0 {
		return false
	}
	earlier, ok := Earliest(view, trial, g, s.Now, s.Runtimes, blocked)
	if !ok || !earlier.Start.Before(slot.Start) {
		return false
	}
	uses := map[int]bool{}
	for _, n := range earlier.Nodes {
		uses[n] = true
	}
	var victims []cycle.RunningJob
	var lost float64
	for _, c := range picked {
		h := live[c.i]
		in := false
		for _, p := range h.Pods {
			in = in || uses[p.NodeIndex]
		}
		if !in || !c.end.After(earlier.Start) {
			continue
		}
		rj := running[h.Job.ID]
		victims = append(victims, rj)
		lost += b.l.RestartCost(rj, nil)
	}
	gain := float64(j.GPUMilli()) / workload.MilliPerGPU * slot.Start.Sub(earlier.Start).Seconds()
	if len(victims) == 0 || lost*stragglerCost > gain {
		return false
	}
	sort.Slice(victims, func(a, c int) bool { return victims[a].Job.ID < victims[c].Job.ID })
	for _, rj := range victims {
		ev := cycle.Eviction{Job: rj.Job.ID, Cause: cycle.CausePreempt, By: j.ID, LostGPUSeconds: b.l.RestartCost(rj, nil),
			Message: fmt.Sprintf("evicted for job %s, waiting past the starvation age: without its %d longest jobs in the way it starts in ~%s instead of ~%s",
				j.ID, len(victims), Humanize(earlier.Start.Sub(s.Now)), Humanize(slot.Start.Sub(s.Now)))}
		for _, p := range rj.Pods {
			ev.Pods = append(ev.Pods, p.Pod)
		}
		sort.Slice(ev.Pods, func(a, c int) bool { return podLess(ev.Pods[a], ev.Pods[c]) })
		b.l.Evict(ev)
	}
	b.l.RetakeHolds()
	return true
}

// overLimit says the job's own queue limit keeps it waiting. Room held for
// it would only idle: what frees it is its queue's other jobs ending, not
// anyone else's. A job asking for more than its queue's limit would hold a
// reservation forever (a queue limited to 64 GPUs with starved 256-GPU jobs
// stopped all of gen:llm's 600 jobs but 32).
func (b *Cycle) overLimit(pj cycle.PendingJob) bool {
	if b.queues == nil {
		return false
	}
	leaf, err := b.queues.Leaf(pj.Job)
	return err == nil && b.queues.LimitBefore(leaf, b.l.View(), pj).Verdict == placement.WaitQuota
}
