package backfill

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// cycleLedger is the part of the engine's ledger (internal/engine, which
// this package may not import) that reservations use: the snapshot, a
// running view cloned from it with its holds table, the running jobs as
// holders, and the plan's reservations. The verbs that bind, evict or
// price (Bind, Evict, RestartCost, ...) are left to the embedded nil
// Ledger: a test that reaches one panics instead of passing on a stand-in.
type cycleLedger struct {
	Ledger
	snap     *cycle.Snapshot
	view     *cluster.State
	placer   *placement.Placer
	holds    *cluster.Holds
	reserved []cycle.Reservation
}

// newCycleLedger starts a cycle's ledger on snapshot s: the view is a
// clone, so the cycle never changes s.State.
func newCycleLedger(s *cycle.Snapshot) *cycleLedger {
	view := s.State.Clone()
	return &cycleLedger{snap: s, view: view, holds: cluster.NewHolds(view),
		placer: placement.NewPlacer(view, placement.MostAllocated(), placement.Interconnect)}
}

func (l *cycleLedger) Snapshot() *cycle.Snapshot    { return l.snap }
func (l *cycleLedger) View() *cluster.State         { return l.view }
func (l *cycleLedger) Placer() *placement.Placer    { return l.placer }
func (l *cycleLedger) Holds() *cluster.Holds        { return l.holds }
func (l *cycleLedger) Reserve(rv cycle.Reservation) { l.reserved = append(l.reserved, rv) }

// RetakeHolds has nothing to retake: nothing is evicted in these cycles.
func (l *cycleLedger) RetakeHolds() {}

// Running is the snapshot's running jobs: nothing is evicted.
func (l *cycleLedger) Running() []cycle.RunningJob { return l.snap.Running }

// Holders are the running jobs with their pods: nothing is bound.
func (l *cycleLedger) Holders() []Holder {
	var out []Holder
	for _, rj := range l.snap.Running {
		out = append(out, holderOf(rj))
	}
	return out
}

// holderOf is running job rj as the replay of expected ends sees it.
func holderOf(rj cycle.RunningJob) Holder {
	var pods []cluster.Placed
	for _, p := range rj.Pods {
		pods = append(pods, p.Placed)
	}
	return Holder{Job: rj.Job, Start: rj.Start, Pods: pods}
}

// runOnNode allocates all 8 GPUs of node n of s to j, started at start.
func runOnNode(t *testing.T, s *cluster.State, j *workload.Job, n int, start time.Time) cycle.RunningJob {
	t.Helper()
	a := cluster.Alloc{CPUMilli: 1000, MemMiB: 1024}
	for k := range 8 {
		a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: workload.MilliPerGPU})
	}
	if err := s.Allocate(n, a); err != nil {
		t.Fatal(err)
	}
	return cycle.RunningJob{Job: j, Start: start, Pods: []cycle.PodBind{{
		Placed: cluster.Placed{Pod: workload.PodRef{Job: j.ID}, NodeIndex: n, Alloc: a}, Node: s.Node(n).Name}}}
}

// gangOf resolves job j's pods on s into a gang, bound to the level
// required ("" for none).
func gangOf(s *cluster.State, j *workload.Job, required string) placement.Gang {
	g := placement.Gang{Required: -1, Preferred: -1}
	if required != "" {
		g.Required = s.LevelIndex(required)
	}
	j.EachPod(func(ref workload.PodRef, r workload.Request) {
		pr, _ := placement.Resolve(s, ref, r)
		g.Pods = append(g.Pods, pr)
	})
	return g
}

// waitFree is the reason of a job the placer found no room for now.
var waitFree = cycle.Reason{Verdict: placement.WaitFree, Level: cluster.LevelCluster, Message: "no room"}
