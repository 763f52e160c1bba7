package backfill

import (
	"fmt"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Holder is a job holding capacity: running, or placed earlier in this cycle.
type Holder struct {
	Job   *workload.Job
	Pods  []cluster.Placed
	Start time.Time
	// End, when set, is when the holder is taken to end instead of its
	// estimate (a job to be evicted: the time it is evicted).
	End time.Time
}

// Slot is where and when a blocked gang is expected to fit.
type Slot struct {
	Start  time.Time
	Level  int
	Domain cluster.DomainID
	// Nodes are the node indexes the gang would use, ascending.
	Nodes []int
	// Releases is how many running jobs must end first.
	Releases int
	// Conf is the least confidence among the estimates of those jobs
	// (Estimate.Conf); 1 when none must end. Extended counts those that
	// outlived their first estimate.
	Conf     float64
	Extended int
	// Idle is the GPU-seconds the slot's nodes would sit idle until Start
	// if nothing backfilled into them: their GPUs free now, and those each
	// release frees, each until Start. It is what holding the nodes may
	// cost (WorthHolding).
	Idle float64
}

// Earliest finds when gang g could start: it replays the expected ends of
// the holders, in end order, onto a copy of the running view s until the
// gang fits, and says where. Holders without a runtime estimate never end
// (the conservative choice: their room cannot be promised). Nodes in
// blocked (held for others) are never offered. ok is false when no replay
// makes the gang fit.
//
// Between releases only the aggregates are looked at (free GPU-milli, then
// the per-domain histograms of free GPUs per node, of the domains at the
// gang's top level: O(domains)); the placement search runs only where the
// aggregates say the gang might fit.
func Earliest(s *cluster.State, holders []Holder, g placement.Gang, now time.Time, h *History, blocked func(n int) bool) (Slot, bool) {
	type release struct {
		at       time.Time
		job      workload.JobID
		i        int
		conf     float64
		extended bool
	}
	var rel []release
	for i, hd := range holders {
		end, conf, ext := hd.End, 1.0, false
		if end.IsZero() {
			e, ok := Expect(h, hd.Job, hd.Start, now)
			if !ok {
				continue
			}
			end, conf, ext = hd.Start.Add(e.Runtime), e.Conf, e.Extended
		}
		if end.Before(now) {
			// Past its max runtime: it is ended this cycle.
			end = now
		}
		rel = append(rel, release{at: end, job: hd.Job.ID, i: i, conf: conf, extended: ext})
	}
	sort.Slice(rel, func(a, b int) bool {
		if !rel[a].at.Equal(rel[b].at) {
			return rel[a].at.Before(rel[b].at)
		}
		if rel[a].job != rel[b].job {
			return rel[a].job < rel[b].job
		}
		return rel[a].i < rel[b].i
	})
	top := 0
	if g.Required >= 0 {
		top = g.Required
	}
	var need int64
	var mask cluster.ModelMask
	for _, p := range g.Pods {
		need += p.GPUMilliTotal()
		if p.GPUMilliTotal() > 0 {
			mask |= p.Mask
		}
	}
	if mask == 0 {
		mask = cluster.AllModels
	}
	if len(rel) == 0 && (!mayFit(s, top, need, mask) || !placement.MayHold(s, g)) {
		// Nothing will be released and the room is not there now (blocked
		// nodes only take more away): no start, and no copy of the state.
		return Slot{}, false
	}
	future := s.Clone()
	if blocked != nil {
		// Blocked nodes offer nothing now either.
		want := map[int]cluster.HoldOwner{}
		for n := 0; n < future.NumNodes(); n++ {
			if blocked(n) {
				want[n] = cluster.HoldOwner{Kind: cluster.HoldReservation}
			}
		}
		cluster.NewHolds(future).Sync(want)
	}
	placer := placement.NewPlacer(future, placement.MostAllocated(), placement.Interconnect)
	found := func(at time.Time, k int) (Slot, bool) {
		if !mayFit(future, top, need, mask) || !placement.MayHold(future, g) {
			return Slot{}, false
		}
		res := placer.PlaceGang(g)
		if res.Failure != nil {
			return Slot{}, false
		}
		slot := Slot{Start: at, Level: res.Level, Domain: res.Domain, Releases: k, Conf: 1}
		for _, r := range rel[:k] {
			slot.Conf = min(slot.Conf, r.conf)
			if r.extended {
				slot.Extended++
			}
		}
		seen := map[int]bool{}
		for _, a := range res.Assignments {
			if !seen[a.Node] {
				seen[a.Node] = true
				slot.Nodes = append(slot.Nodes, a.Node)
			}
		}
		sort.Ints(slot.Nodes)
		// Idle: on the slot's nodes, the GPUs free now and those each
		// release frees, each until the start.
		var idleMilliSec float64
		for _, n := range slot.Nodes {
			for _, m := range s.GPUFree(n) {
				idleMilliSec += float64(m) * at.Sub(now).Seconds()
			}
		}
		for _, r := range rel[:k] {
			for _, p := range holders[r.i].Pods {
				if seen[p.NodeIndex] {
					idleMilliSec += float64(p.Alloc.GPUMilli()) * at.Sub(r.at).Seconds()
				}
			}
		}
		slot.Idle = idleMilliSec / workload.MilliPerGPU
		return slot, true
	}
	// It may fit now already (a caller reserving ahead of placement).
	if slot, ok := found(now, 0); ok {
		return slot, true
	}
	for k := 0; k < len(rel); {
		at := rel[k].at
		for ; k < len(rel) && rel[k].at.Equal(at); k++ {
			for _, p := range holders[rel[k].i].Pods {
				if blocked != nil && blocked(p.NodeIndex) {
					continue
				}
				future.Release(p.NodeIndex, p.Alloc)
			}
		}
		if slot, ok := found(at, k); ok {
			return slot, true
		}
	}
	return Slot{}, false
}

// WorthHolding says whether a reservation at slot is worth its cost to
// job j: the GPU time its nodes may sit idle until the start (Slot.Idle)
// is at most the work it protects, j's GPUs × its expected runtime
// (issue 17). A reservation that would idle more than the job will ever
// use trades a sure loss for an uncertain gain: on the default sim (seed
// 42) a whole-cluster job that runs 20 minutes held a start ~4 days ahead,
// receding as the estimates of the jobs it waited for were extended, and
// kept jobs declaring a week out of the cluster for 11 days; it then
// started no earlier than without any reservation. A job without any
// runtime estimate protects nothing measurable, so it is never held for
// ahead of its start. Without the hold such a job is placed as greedy
// backfill would: as soon as its room is free.
func WorthHolding(h *History, j *workload.Job, slot Slot, now time.Time) bool {
	if !slot.Start.After(now) {
		return true // it fits now: holding costs nothing
	}
	return slot.Idle <= Protected(h, j)
}

// Protected is the work a reservation for j protects, in GPU-seconds: its
// GPUs × its expected runtime (cycle.Runtime); 0 without an estimate.
func Protected(h *History, j *workload.Job) float64 {
	d, _, ok := cycle.Runtime(h, j)
	if !ok {
		return 0
	}
	return float64(j.GPUMilli()) / workload.MilliPerGPU * d.Seconds()
}

// mayFit is the aggregate test: some domain at level top has the GPU-milli.
func mayFit(s *cluster.State, top int, need int64, mask cluster.ModelMask) bool {
	if need == 0 {
		return true
	}
	for _, d := range s.DomainsAt(top) {
		if s.DomainFreeMilli(d, mask) >= need {
			return true
		}
	}
	return false
}

// Describe renders a slot for a pending reason, e.g. "rack r07 reserved,
// expected start in ~40 min".
func Describe(s *cluster.State, slot Slot, now time.Time) string {
	where := fmt.Sprintf("%d nodes reserved", len(slot.Nodes))
	if slot.Level > 0 {
		where = fmt.Sprintf("%s %s reserved", s.Levels()[slot.Level], s.Domain(slot.Domain).Name)
		if slot.Level == s.HostLevel() {
			where = fmt.Sprintf("node %s reserved", s.Domain(slot.Domain).Name)
		}
	}
	return fmt.Sprintf("%s, expected start in ~%s%s", where, Humanize(slot.Start.Sub(now)), Sureness(slot))
}

// Humanize renders a wait roughly: "40 min", "3 h", "2.5 d".
func Humanize(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "1 min"
	case d < time.Hour:
		return fmt.Sprintf("%d min", int((d+30*time.Second)/time.Minute))
	case d < 48*time.Hour:
		h := d.Hours()
		if h < 10 {
			return fmt.Sprintf("%.1f h", h)
		}
		return fmt.Sprintf("%.0f h", h)
	default:
		return fmt.Sprintf("%.1f d", d.Hours()/24)
	}
}
