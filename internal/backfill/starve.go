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
// not reserved, and no straggler is evicted for it.
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
