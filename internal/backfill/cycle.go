package backfill

import (
	"fmt"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Config tunes reservations and runtime limits.
type Config struct {
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
	// they end first. When the reservation's start is confident
	// (ReserveConfidence) and worth holding (WorthHolding: it idles no more
	// GPU time than the job will use) it bounds the job's wait by the
	// starvation age plus the estimated runtimes in its way;
	// otherwise the job starts when its room is free, as under greedy
	// backfill. Zero means DefaultStarveAfter; negative turns it off.
	StarveAfter time.Duration
	// ReserveConfidence is the least confidence (Slot.Conf) a blocked head
	// job's reservation needs to be made before the job starves: below it
	// the expected start is a guess, and holding nodes for a guess idles
	// them while greedy backfill would use them. Zero means
	// DefaultReserveConfidence; negative always reserves. It applies to
	// starved jobs too: such a job's guessed start receded cycle after
	// cycle and bounded nothing (gen:llm seeds 42 and 47); holding jobs of
	// at most half the cluster on a guess was measured and dropped
	// (docs/backfill.md).
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

// withDefaults fills the zero values.
func (c Config) withDefaults() Config {
	if c.MaxReservations == 0 {
		c.MaxReservations = 1
	}
	if c.MaxReservationsPerQueue <= 0 {
		c.MaxReservationsPerQueue = 1
	}
	if c.OnMaxRuntime == "" {
		c.OnMaxRuntime = Terminate
	}
	if c.StarveAfter == 0 {
		c.StarveAfter = DefaultStarveAfter
	}
	if c.ReserveConfidence == 0 {
		c.ReserveConfidence = DefaultReserveConfidence
	}
	return c
}

// Mode is how a policy treats a blocked job, chosen once per engine.
type Mode uint8

const (
	// Greedy: any job that fits starts; a blocked job reserves nothing, and
	// there are no pools, shrinking or growth (the baselines, greedy).
	Greedy Mode = iota
	// StrictFIFO: a blocked job stops every job behind it (fifo).
	StrictFIFO
	// EASY: a blocked head job gets a reservation that only jobs ending
	// before it may use; jobs past the starvation age are reserved first;
	// pools, shrinking, pool reclaim and growth (corral).
	EASY
)

// Ledger is what backfill needs of the cycle's ledger (internal/engine):
// the snapshot and the running view, the jobs holding capacity, and the
// verbs through which capacity changes.
type Ledger interface {
	Snapshot() *cycle.Snapshot
	// View is the running view, to read; Placer places on it (Commit keeps
	// a placement, Undo takes it back).
	View() *cluster.State
	Placer() *placement.Placer
	// Running lists the jobs that ran before the cycle and no decision of
	// it evicted, in id order, with the pods they still hold (shared: not
	// to be changed).
	Running() []cycle.RunningJob
	// Holders lists every job holding capacity: Running, and the jobs bound
	// this cycle with what they were bound (shared: not to be changed).
	Holders() []Holder
	// Bind records a placement on the view as the plan's bind of j.
	Bind(j *workload.Job, res placement.Result) cycle.GangBind
	// Evict records an eviction and gives its pods' capacity back.
	Evict(ev cycle.Eviction)
	// Vacate frees pods' capacity ahead of a decision (a trial); Evict
	// then records them, Restore takes the capacity back.
	Vacate(pods []cluster.Placed)
	Restore(pods []cluster.Placed)
	// Holds is the cycle's table of capacity kept from placement: backfill
	// closes reserved and pooled nodes in it.
	Holds() *cluster.Holds
	// Reserve adds a reservation to the plan.
	Reserve(rv cycle.Reservation)
	// RetakeHolds takes the closed nodes of Holds again when an eviction
	// came since they were last taken: the victims may have freed capacity
	// on them.
	RetakeHolds()
	// Waiting says whether a job waits for capacity (a WaitFree pending
	// reason); Stats are the plan's counters.
	Waiting() bool
	Stats() *cycle.CycleStats
	// RestartCost prices evicting pods of rj (nil: all) with the
	// restart-cost model; Protected says rj may never be evicted now
	// (the preemption rules).
	RestartCost(rj cycle.RunningJob, pods []workload.PodRef) float64
	Protected(rj cycle.RunningJob) bool
	// Gang resolves a pending job into its gang for a reservation's replay,
	// and a key equal for gangs interchangeable in placement; ok is false
	// for an invalid job.
	Gang(pj cycle.PendingJob) (g placement.Gang, key string, ok bool)
}

// Queues is what backfill asks of the cycle's queues (queue.State): a
// grown pod counts against its queue's limits like any placement, and the
// pods shrink and pool reclaim evict leave their queue's usage.
type Queues interface {
	Leaf(j *workload.Job) (string, error)
	// LimitBefore says why the job would take its queue past a limit: a
	// WaitQuota reason, or the zero Reason when it would not.
	LimitBefore(leaf string, view *cluster.State, pj cycle.PendingJob) cycle.Reason
	LimitAfter(leaf string, view *cluster.State, as []placement.Assignment) cycle.Reason
	Bound(leaf string, view *cluster.State, as []placement.Assignment)
	// Unbound takes evicted pods off their job's queue usage.
	Unbound(job workload.JobID, view *cluster.State, pods []cluster.Placed)
}

// Cycle is backfill's state within one cycle: reservations made, the pools
// in force, the holds that keep reserved and pooled nodes from the jobs
// that may not use them, and the strict-FIFO head. The engine calls it
// from separate steps of Engine.Cycle.
type Cycle struct {
	cfg  Config
	mode Mode
	l    Ledger
	// Stragglers lets a starved job evict the few long jobs in its way
	// (evictStragglers); the engine turns it on when preemption is on and
	// the snapshot has no queues (a queue's jobs are evicted by its rules).
	Stragglers bool
	queues     Queues // nil without queues

	holds   *cluster.Holds // the ledger's
	pools   []*ResolvedPool
	res     []reservation
	queueRs map[string]int
	normal  int // reservations of blocked head jobs (starved ones not counted)
	// fifoHead is the first blocked job under strict FIFO: nobody passes it.
	fifoHead workload.JobID
	// heldKey is the admit key the holds were last synced for, over heldRes
	// reservations (a new reservation changes what a key means).
	synced  bool
	heldKey string
	heldRes int
	// letInJobs are the starved jobs bound ahead of a streak's head (letIn).
	letInJobs map[workload.JobID]bool
}

type reservation struct {
	job   *workload.Job
	slot  Slot
	nodes map[int]bool
	rv    cycle.Reservation
}

// NewCycle starts backfill's part of one cycle on the ledger l.
func NewCycle(cfg Config, mode Mode, l Ledger) *Cycle {
	return &Cycle{cfg: cfg.withDefaults(), mode: mode, l: l, holds: l.Holds(), queueRs: map[string]int{}}
}

// SetQueues links the cycle's queues (nil: none), for growth's limits
// and the usage of the pods shrink and pool reclaim evict.
func (b *Cycle) SetQueues(q Queues) { b.queues = q }

// StartedStarved reports whether rj started only after waiting past the
// starvation age. Priority preemption leaves such a job alone: it would
// wait, and drain its domain, all over again, so the bound on its wait
// would not hold. (A whole-cluster gang started after a four-day drain was
// evicted within the hour for a one-GPU job.)
func (b *Cycle) StartedStarved(rj cycle.RunningJob) bool {
	return b.mode == EASY && b.pastStarvation(rj.Start.Sub(rj.Job.Submit))
}

// pastStarvation reports whether a wait reaches the starvation age (never
// when it is turned off).
func (b *Cycle) pastStarvation(waited time.Duration) bool {
	return b.cfg.StarveAfter > 0 && waited >= b.cfg.StarveAfter
}

// Remaining is how long rj is expected to run on, from its estimate
// (Expect: declared or learned, extended once outlived); ok is false when
// nothing predicts it. Priority preemption weighs it against the work an
// eviction throws away (preempt.WorthEvicting).
func (b *Cycle) Remaining(rj cycle.RunningJob) (time.Duration, bool) {
	s := b.l.Snapshot()
	e, ok := Expect(s.Runtimes, rj.Job, rj.Start, s.Now)
	if !ok {
		return 0, false
	}
	return max(0, e.Runtime-s.Now.Sub(rj.Start)), true
}

// Closed reports whether node n is held now for a reservation or pool the
// job being placed may not use: preemption frees no victim there for it.
func (b *Cycle) Closed(n int) bool { return b.holds.Closed(n) }

// ResolvePools reads the snapshot's pools (EASY only: the other policies
// are today's behaviour) and returns the problems of the invalid ones.
func (b *Cycle) ResolvePools() []string {
	if b.mode != EASY {
		return nil
	}
	var problems []string
	b.pools, problems = Resolve(b.l.View(), b.l.Snapshot().Pools)
	return problems
}

// EnforceMaxRuntime evicts every running job past its max runtime
// (PastMaxRuntime), a requeue priced with the restart-cost model.
func (b *Cycle) EnforceMaxRuntime() {
	s := b.l.Snapshot()
	for _, o := range PastMaxRuntime(b.l.Running(), s.Now, b.cfg.OnMaxRuntime) {
		if !o.Eviction.Terminal {
			o.Eviction.LostGPUSeconds = b.l.RestartCost(o.Running, nil)
		}
		b.l.Evict(o.Eviction)
	}
	b.l.RetakeHolds()
}

// Admit sets the holds for job j: nodes reserved for a job j cannot finish
// before, and pools j may not use. It returns a key for the shape cache
// (identical gangs with different holds are not interchangeable). The holds
// change only when the key does, so a long queue of alike jobs costs one
// comparison each.
func (b *Cycle) Admit(j *workload.Job) string {
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
	// A node closed for several owners is held once, for the first.
	want := map[int]cluster.HoldOwner{}
	for _, r := range b.res {
		if r.job.ID != j.ID && !b.endsBefore(j, r.slot.Start) {
			o := cluster.HoldOwner{Kind: cluster.HoldReservation, Name: string(r.job.ID)}
			for _, n := range r.slot.Nodes {
				if _, ok := want[n]; !ok {
					want[n] = o
				}
			}
		}
	}
	for _, p := range b.pools {
		if !p.Admits(j) {
			o := cluster.HoldOwner{Kind: cluster.HoldPool, Name: p.Name}
			for _, n := range p.Nodes {
				if _, ok := want[n]; !ok {
					want[n] = o
				}
			}
		}
	}
	b.holds.Sync(want)
	b.synced, b.heldKey, b.heldRes = true, k, len(b.res)
	return k
}

// endsBefore reports whether j, started now, is expected to end by t. A job
// without any estimate is assumed never to end.
func (b *Cycle) endsBefore(j *workload.Job, t time.Time) bool {
	s := b.l.Snapshot()
	d, _, ok := cycle.Runtime(s.Runtimes, j)
	return ok && !s.Now.Add(d).After(t)
}

// Placed counts a job bound this cycle as backfilled when it took reserved
// nodes.
func (b *Cycle) Placed(j *workload.Job, gb cycle.GangBind) {
	b.l.RetakeHolds()
	onReserved := false
	for _, p := range gb.Pods {
		for _, r := range b.res {
			onReserved = onReserved || (r.job.ID != j.ID && r.nodes[p.NodeIndex])
		}
	}
	if onReserved {
		b.l.Stats().Backfilled++
	}
}

// FIFOBlocked says whether a job must wait behind the strict-FIFO head.
func (b *Cycle) FIFOBlocked() (cycle.Reason, bool) {
	if b.fifoHead == "" {
		return cycle.Reason{}, false
	}
	return cycle.Reason{Verdict: placement.WaitFree, Level: cluster.LevelCluster,
		Message: fmt.Sprintf("strict FIFO: waiting behind job %s", b.fifoHead)}, true
}

// Blocked is told of a job that could not be placed now (gang g, reason
// r) and returns the reason it waits with: under EASY the job may get a
// reservation, under strict FIFO it stops everyone behind it.
func (b *Cycle) Blocked(j *workload.Job, g placement.Gang, r cycle.Reason) cycle.Reason {
	if r.Verdict != placement.WaitFree {
		return r
	}
	switch b.mode {
	case StrictFIFO:
		if b.fifoHead == "" {
			b.fifoHead = j.ID
		}
	case EASY:
		return b.reserve(j, g, r)
	}
	return r
}

// holdRefusal is why a start found for a job is not held for it.
type holdRefusal uint8

const (
	holdOK       holdRefusal = iota
	holdGuess                // the start is later and below Config.ReserveConfidence
	holdNotWorth             // its nodes would idle more than the job uses (WorthHolding)
)

// refusesHold applies the two rules every reservation passes (a blocked
// head's, a starved job's, and the room the worth check of preemption
// counts on with queues): a later start must be confident, and the hold
// worth its idle GPUs.
func (b *Cycle) refusesHold(j *workload.Job, slot Slot) holdRefusal {
	s := b.l.Snapshot()
	switch {
	case slot.Start.After(s.Now) && slot.Conf < b.cfg.ReserveConfidence:
		return holdGuess
	case !WorthHolding(s.Runtimes, j, slot, s.Now):
		return holdNotWorth
	}
	return holdOK
}

// capsSpent says this cycle's reservation caps leave none for j: all of
// them, or its queue's.
func (b *Cycle) capsSpent(j *workload.Job) bool {
	return b.normal >= b.cfg.MaxReservations || b.queueRs[j.Queue] >= b.cfg.MaxReservationsPerQueue
}

// reservationOf returns the index of j's reservation, or -1.
func (b *Cycle) reservationOf(j workload.JobID) int {
	for i, r := range b.res {
		if r.job.ID == j {
			return i
		}
	}
	return -1
}

// reserve gives a blocked job a reservation if the caps allow: the earliest
// time its gang fits once running jobs end, and the domain where.
func (b *Cycle) reserve(j *workload.Job, g placement.Gang, r cycle.Reason) cycle.Reason {
	s, view := b.l.Snapshot(), b.l.View()
	if i := b.reservationOf(j.ID); i >= 0 {
		// Reserved as a starved job: say so.
		rv := b.res[i].rv
		r.Level, r.Best, r.BestFits = rv.Level, rv.Domain, 0
		r.Message = Describe(view, b.res[i].slot, s.Now) + " (waiting past the starvation age); " + r.Message
		return r
	}
	if b.capsSpent(j) {
		return r
	}
	b.normal++
	b.queueRs[j.Queue]++
	b.l.RetakeHolds()
	slot, ok := Earliest(view, b.l.Holders(), g, s.Now, s.Runtimes, b.holds.Closed)
	if !ok {
		switch {
		case len(b.res) > 0:
			// Earlier reservations may hold the room it needs (it would
			// not end before they start): estimates are not the only cause.
			r.Message += "; no reservation: the room it needs is held for jobs reserved ahead of it, or the jobs in its way have no runtime estimate"
		case len(s.Running) > 0:
			// Without running jobs nothing corral knows will free the room:
			// blaming estimates would mislead.
			r.Message += "; no reservation: the jobs in its way have no runtime estimate"
		}
		return r
	}
	switch b.refusesHold(j, slot) {
	case holdGuess:
		// The cap stays spent: trying every blocked job's Earliest each
		// cycle would cost a replay each.
		if b.pastStarvation(s.Now.Sub(j.Submit)) {
			// ReserveStarved refused it for the same guess: promising a
			// hold at the starvation age it has passed would mislead.
			r.Message += fmt.Sprintf("; no reservation: its start (~%s%s) rests on estimates too weak to hold nodes for, even past the starvation age (%s); it starts when its room is free",
				Humanize(slot.Start.Sub(s.Now)), Sureness(slot), Humanize(b.cfg.StarveAfter))
			return r
		}
		r.Message += fmt.Sprintf("; no reservation yet: its start (~%s%s) rests on estimates too weak to hold nodes for; others may use them until it has waited %s",
			Humanize(slot.Start.Sub(s.Now)), Sureness(slot), Humanize(b.cfg.StarveAfter))
		return r
	case holdNotWorth:
		r.Message += fmt.Sprintf("; no reservation: holding nodes until its start (~%s%s) would idle %.0f GPU-hours, more than the %.0f it is expected to use; it starts when its room is free",
			Humanize(slot.Start.Sub(s.Now)), Sureness(slot), slot.Idle/3600, Protected(s.Runtimes, j)/3600)
		return r
	}
	rv := b.add(j, slot)
	r.Level, r.Best, r.BestFits = rv.Level, rv.Domain, 0
	r.Message = Describe(view, slot, s.Now) + "; " + r.Message
	return r
}

// add records a reservation and puts it in the plan.
func (b *Cycle) add(j *workload.Job, slot Slot) cycle.Reservation {
	view := b.l.View()
	ar := reservation{job: j, slot: slot, nodes: map[int]bool{}}
	rv := cycle.Reservation{Job: j.ID, Start: slot.Start, Level: cluster.LevelCluster, Domain: cluster.LevelCluster}
	if slot.Level > 0 {
		rv.Level, rv.Domain = view.Levels()[slot.Level], view.Domain(slot.Domain).Name
	}
	for _, n := range slot.Nodes {
		ar.nodes[n] = true
		rv.Nodes = append(rv.Nodes, view.Node(n).Name)
	}
	ar.rv = rv
	b.res = append(b.res, ar)
	b.l.Reserve(rv)
	return rv
}

// Finish lifts every hold: the view is the cycle's alone, but a clean view
// keeps later steps from seeing held capacity as used.
func (b *Cycle) Finish() { b.holds.OpenAll() }

func podLess(a, c workload.PodRef) bool {
	if a.PodSet != c.PodSet {
		return a.PodSet < c.PodSet
	}
	return a.Index < c.Index
}
