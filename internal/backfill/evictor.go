package backfill

import (
	"fmt"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// evictorHold is the room a blocked job will take by priority preemption
// as soon as the jobs it may not evict end: a lower-priority job started
// there now would only be thrown away then.
type evictorHold struct {
	job   *workload.Job
	start time.Time
	nodes []int
}

// HoldForEvictor is told of a job j (gang g) that could not be placed,
// not even by preemption. It replays the expected ends of the running jobs
// j may not evict (evictable says which it may), with those it may evict
// gone (Earliest). When that finds room only later than now, the jobs it
// may not evict are what keeps j waiting, and j will evict whatever runs
// on that room when they end: for the rest of the cycle its nodes are held
// from every lower-priority job not expected to end before (Admit). One
// such hold a cycle, for the first job the order reaches (the highest
// priority); EASY only. A job whose blockers have no estimate gets none:
// nothing says when it will evict, and a job that fits with evictions but
// was refused them (worth check, budget) is not blocked by them.
//
// Why: on gen:llm tuning seeds 44 and 49 (realistic information) a
// whole-cluster priority-100 job waited three days behind non-preemptible
// jobs while single-node jobs started under it, ran for days without a
// checkpoint and were evicted when it started: 1,362 and 1,250 GPU-hours,
// half and a third of those seeds' loss (docs/preemption.md).
func (b *Cycle) HoldForEvictor(j *workload.Job, g placement.Gang, evictable func(Holder) bool) {
	if b.mode != EASY || b.evictor != nil {
		return
	}
	s := b.l.Snapshot()
	b.l.RetakeHolds()
	after := b.l.View().Clone()
	var stay []Holder
	for _, h := range b.l.Holders() {
		if !evictable(h) {
			stay = append(stay, h)
			continue
		}
		for _, p := range h.Pods {
			if !b.holds.Closed(p.NodeIndex) {
				after.Release(p.NodeIndex, p.Alloc)
			}
		}
	}
	slot, ok := Earliest(after, stay, g, s.Now, s.Runtimes, b.holds.Closed)
	if !ok || !slot.Start.After(s.Now) {
		return
	}
	b.evictor = &evictorHold{job: j, start: slot.Start, nodes: slot.Nodes}
	b.synced = false
}

// heldForEvictor says whether j keeps off the evictor's room: its priority
// is lower and its estimate (declared, else learned; none: it never ends)
// does not end before the evictor's expected start. The estimate's
// confidence is not asked for: with it (ReserveConfidence) nearly every
// job was held, for days, and the mean JCT of the tuning seeds doubled
// (5.3 to 11.3 hours). A job not started has reported no checkpoint, so
// none makes its loss small.
func (b *Cycle) heldForEvictor(j *workload.Job) bool {
	e := b.evictor
	if e == nil || e.job.ID == j.ID || j.Priority >= e.job.Priority {
		return false
	}
	s := b.l.Snapshot()
	est, ok := Expect(s.Runtimes, j, time.Time{}, s.Now)
	return !ok || s.Now.Add(est.Runtime).After(e.start)
}

// EvictorNote is what the reason of a job kept off an evictor's room adds,
// "" when none keeps it off.
func (b *Cycle) EvictorNote(j *workload.Job) string {
	if !b.heldForEvictor(j) {
		return ""
	}
	e, s := b.evictor, b.l.Snapshot()
	return fmt.Sprintf("%d nodes held for job %s (priority %d), which evicts lower-priority jobs there once the jobs it may not evict end (~%s): started there, this job would be thrown away then",
		len(e.nodes), e.job.ID, e.job.Priority, Humanize(e.start.Sub(s.Now)))
}

// holdEvictorRoom adds the evictor's nodes to want, the holds for j.
func (b *Cycle) holdEvictorRoom(j *workload.Job, want map[int]cluster.HoldOwner) {
	if !b.heldForEvictor(j) {
		return
	}
	o := cluster.HoldOwner{Kind: cluster.HoldReservation, Name: string(b.evictor.job.ID)}
	for _, n := range b.evictor.nodes {
		if _, ok := want[n]; !ok {
			want[n] = o
		}
	}
}
