package preempt

import (
	"fmt"
	"time"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Ending is one victim of a priority preemption as the worth check sees
// it: the work its eviction throws away and how long it is expected to
// run on if left alone.
type Ending struct {
	// Cost is the victim's restart cost in GPU-seconds (RestartCost).
	Cost float64
	// Left is its expected remaining runtime; Known is false when nothing
	// predicts it (no declared runtime, no history).
	Left  time.Duration
	Known bool
}

// DefaultMaxLostPerWork bounds what a priority preemption may throw away
// (Config.MaxLostPerWork): at most this many times the work the preemptor
// is expected to do (its GPUs × expected runtime). Waiting cost alone let
// a 24-minute 256-GPU job of priority 100 evict three single-node jobs
// 70-134 hours into runs that never checkpoint, 1,500 GPU-hours for 102
// of work, and their reruns set the makespan (queues workload (B), tuning
// seed 44). Chosen on the tuning seeds from 1, 2, 4 and 8
// (docs/preemption.md).
const DefaultMaxLostPerWork = 2.0

// Preemptor is the waiting job as the worth check sees it.
type Preemptor struct {
	GPUs float64
	// Runtime is its expected runtime (declared, learned, else its max
	// runtime); zero when nothing predicts it.
	Runtime time.Duration
	// Room is how long until room for it is expected to free without any
	// eviction (backfill's earliest start, from every running job's
	// expected end; with queues, only room held for it); RoomKnown is
	// false when nothing predicts it or, with queues, nothing holds it.
	Room      time.Duration
	RoomKnown bool
}

// WorthEvicting says whether a priority preemption pays for itself: the
// work the victims lose must be at most what the waiting job would spend
// waiting without it, its GPUs × the wait. The wait ends when the last of
// the victims would end on their own (the room frees only when every
// victim has gone), or sooner when running jobs elsewhere are expected to
// leave it room first (Preemptor.Room): the eviction buys only that much.
// A victim whose end nothing predicts counts as never ending, so without
// a known room the priority decides, as before. Without this rule a
// whole-cluster job of priority 100 evicted an 8-GPU job six minutes
// before it ended after seven days without a checkpoint: 1,343 GPU-hours
// thrown away to start a 2-minute job 6 minutes sooner, and the victim's
// rerun added six days to the makespan (gen:llm seed 52, realistic
// information). Whatever the wait, the victims may not lose more than
// maxLostPerWork times the work the waiting job is expected to do, when
// something predicts its runtime: a short job waits for long victims
// instead. A maxLostPerWork that is not positive sets no such bound (the
// wait alone decides). why says, when it is not worth it, what each side
// weighs.
func WorthEvicting(p Preemptor, victims []Ending, maxLostPerWork float64) (ok bool, why string) {
	var cost float64
	var last time.Duration
	known := true
	for _, v := range victims {
		cost += v.Cost
		if !v.Known {
			known = false
			continue
		}
		last = max(last, v.Left)
	}
	if work := p.GPUs * p.Runtime.Seconds(); maxLostPerWork > 0 && p.Runtime > 0 && cost > maxLostPerWork*work {
		return false, fmt.Sprintf("preemption not worth it: the victims would lose %.0f GPU-hours, more than %g× the %.0f GPU-hours it is expected to run",
			cost/3600, maxLostPerWork, work/3600)
	}
	wait, by := last, "the victims are expected to end within"
	switch {
	case p.RoomKnown && p.Room > 0 && (!known || p.Room < last):
		// (Room free now contradicts the placement that just failed: the
		// replay's placer knows less, e.g. no exclusive claims. Ignored.)
		wait, by = p.Room, "room for it is expected to free without evicting within"
	case !known:
		return true, ""
	}
	waiting := p.GPUs * wait.Seconds()
	if cost <= waiting {
		return true, ""
	}
	return false, fmt.Sprintf("preemption not worth it: the victims would lose %.0f GPU-hours, and %s %s (%.0f GPU-hours of waiting)",
		cost/3600, by, wait.Round(time.Minute), waiting/3600)
}

// worthEvicting applies WorthEvicting to a set found by the search, for a
// job of priority preemption (ByPriority victims only: reclaim restores a
// guarantee, whatever it costs). Remaining is the engine's estimate of a
// running job's remaining runtime (nil: unknown for all).
func (m *Room) worthEvicting(pj cycle.PendingJob, gang placement.Gang, units []Unit, kinds []Kind, victims []int) (bool, string) {
	if m.Remaining == nil {
		return true, ""
	}
	if m.byJob == nil {
		m.byJob = make(map[workload.JobID]int, len(m.running))
		for i, rj := range m.running {
			m.byJob[rj.Job.ID] = i
		}
	}
	seen := map[workload.JobID]bool{}
	var ends []Ending
	for _, u := range victims {
		if kinds[u] != ByPriority {
			return true, ""
		}
		i, ok := m.byJob[units[u].Job]
		if !ok {
			return true, ""
		}
		cost := units[u].Cost
		if seen[units[u].Job] {
			ends = append(ends, Ending{Cost: cost, Known: true})
			continue
		}
		seen[units[u].Job] = true
		left, known := m.Remaining(m.running[i])
		ends = append(ends, Ending{Cost: cost, Left: left, Known: known})
	}
	p := Preemptor{GPUs: pj.Job.GPUs()}
	if d, _, ok := cycle.Runtime(m.s.Runtimes, pj.Job); ok {
		p.Runtime = d
	}
	if m.RoomFrees != nil {
		p.Room, p.RoomKnown = m.RoomFrees(pj.Job, gang)
	}
	return WorthEvicting(p, ends, m.cfg.MaxLostPerWork)
}
