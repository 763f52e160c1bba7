package engine

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/preempt"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

// MaxRuntimeAction is what happens to a job past its max runtime
// (backfill.MaxRuntimeAction).
type MaxRuntimeAction = backfill.MaxRuntimeAction

const (
	Terminate = backfill.Terminate
	Requeue   = backfill.Requeue
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
	// they end first. When the reservation is worth holding
	// (backfill.WorthHolding: it idles no more GPU time than the job will
	// use) it bounds the job's wait by the starvation age plus the
	// estimated runtimes in its way; otherwise the job starts when its room
	// is free, as under greedy backfill. Zero means DefaultStarveAfter;
	// negative turns it off.
	StarveAfter time.Duration
	// ReserveConfidence is the least confidence (backfill.Slot.Conf) a
	// blocked head job's reservation needs to be made before the job
	// starves: below it the expected start is a guess, and holding nodes
	// for a guess idles them while greedy backfill would use them. Zero
	// means DefaultReserveConfidence; negative always reserves. Starved
	// jobs are reserved whatever the confidence, when the hold is worth its
	// idle GPU time (backfill.WorthHolding).
	ReserveConfidence float64
}

// DefaultReserveConfidence: declared runtimes that overestimate as users
// do (accuracy uniform on (0, 1]) score about 0.5 and learned percentiles
// less; exact runtimes score 1.
const DefaultReserveConfidence = 0.7

// DefaultStarveAfter is the default starvation age: a day, long enough that
// priorities order the ordinary day, short next to the week-long runs that
// would otherwise push a big gang back again and again.
const DefaultStarveAfter = 24 * time.Hour

// backfiller is one cycle's state for reservations, EASY backfill, pools,
// elastic jobs and runtime limits. Cycle calls it from separate steps.
type backfiller struct {
	cfg     BackfillConfig
	v       variant
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

func newBackfiller(cfg BackfillConfig, v variant, s *Snapshot, view *cluster.State) *backfiller {
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
	if cfg.ReserveConfidence == 0 {
		cfg.ReserveConfidence = DefaultReserveConfidence
	}
	b := &backfiller{cfg: cfg, v: v, s: s, view: view, holds: backfill.NewHolds(view),
		queueRs: map[string]int{}, pos: map[workload.JobID]int{}, gone: map[workload.JobID]bool{},
		shrunk: map[workload.JobID]bool{}, otherEvs: map[workload.JobID]bool{}}
	running := append([]RunningJob(nil), s.Running...)
	sort.Slice(running, func(a, c int) bool { return running[a].Job.ID < running[c].Job.ID })
	for _, rj := range running {
		h := backfill.Holder{Job: rj.Job, Start: rj.Start}
		for _, p := range rj.Pods {
			h.Pods = append(h.Pods, cluster.Placed{Pod: p.Pod, Node: p.NodeIndex, Alloc: p.Alloc})
		}
		b.pos[rj.Job.ID] = len(b.holders)
		b.holders = append(b.holders, h)
	}
	return b
}

// resolvePools reads the snapshot's pools; only corral honours them (the
// baselines are today's behaviour).
func (b *backfiller) resolvePools(plan *Plan) {
	if !b.v.backfill {
		return
	}
	b.pools, plan.PoolProblems = backfill.Resolve(b.view, b.s.Pools)
}

// enforceMaxRuntime evicts every running job past its max runtime
// (backfill.PastMaxRuntime), prices a requeue with the restart-cost model
// and gives the capacity back to the view.
func (b *backfiller) enforceMaxRuntime(plan *Plan) {
	for _, o := range backfill.PastMaxRuntime(b.s.Running, b.s.Now, b.cfg.OnMaxRuntime) {
		if !o.Eviction.Terminal {
			o.Eviction.LostGPUSeconds = preempt.RestartCost(o.Running, nil, b.s.Now)
		}
		for _, p := range o.Running.Pods {
			b.view.Release(p.NodeIndex, p.Alloc)
		}
		plan.Evictions = append(plan.Evictions, o.Eviction)
		b.gone[o.Running.Job.ID] = true
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
		h.Pods = append(h.Pods, cluster.Placed{Pod: p.Pod, Node: p.NodeIndex, Alloc: p.Alloc})
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
	switch {
	case b.v.fifo:
		if b.fifoHead == "" {
			b.fifoHead = j.ID
		}
		return r
	case b.v.backfill:
		return b.reserve(j, g, r, plan)
	}
	return r
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
	if slot.Start.After(b.s.Now) && slot.Conf < b.cfg.ReserveConfidence {
		// The cap stays spent: trying every blocked job's Earliest each
		// cycle would cost a replay each.
		r.Message += fmt.Sprintf("; no reservation yet: its start (~%s%s) rests on estimates too weak to hold nodes for; others may use them until it has waited %s",
			backfill.Humanize(slot.Start.Sub(b.s.Now)), backfill.Sureness(slot), backfill.Humanize(b.cfg.StarveAfter))
		return r
	}
	if !backfill.WorthHolding(b.s.Runtimes, j, slot, b.s.Now) {
		r.Message += fmt.Sprintf("; no reservation: holding nodes until its start (~%s%s) would idle %.0f GPU-hours, more than the %.0f it is expected to use; it starts when its room is free",
			backfill.Humanize(slot.Start.Sub(b.s.Now)), backfill.Sureness(slot), slot.Idle/3600, backfill.Protected(b.s.Runtimes, j)/3600)
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
