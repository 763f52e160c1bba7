package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// TestLedgerBooksEachPodOnce: the ledger alone gives capacity back, once
// per pod, whether a trial vacated it first or the eviction frees it; an
// evicted pod leaves its job, so a second eviction naming it frees nothing.
// Only decisions for room or runtime take a job out of Running: a failure
// leaves its healthy ranks in play.
func TestLedgerBooksEachPodOnce(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 5))
	a := pin(t, s, build.Job("a").Pods(2).GPUs(8).Obj(), t0, "r0-n-0", "r0-n-1")
	b := pin(t, s, build.Job("b").GPUs(8).Obj(), t0, "r0-n-2")
	c := pin(t, s, build.Job("c").Pods(2).GPUs(4).Obj(), t0, "r0-n-3", "r0-n-4")
	view := s.Clone()
	l := newLedger(&Snapshot{State: s, Running: []RunningJob{c, b, a}, Now: t0}, view)
	free := func() int64 { return view.FreeMilli() }
	ids := func() []workload.JobID {
		var out []workload.JobID
		for _, rj := range l.Running() {
			out = append(out, rj.Job.ID)
		}
		return out
	}
	if diff := cmp.Diff([]workload.JobID{"a", "b", "c"}, ids()); diff != "" {
		t.Fatalf("Running, in id order (-want +got):\n%s", diff)
	}

	// A failure takes one rank of a: its capacity returns, a stays in play
	// with the other rank.
	l.Evict(Eviction{Job: "a", Pods: []workload.PodRef{a.Pods[0].Pod}, Cause: CauseFailure})
	if free() != 16000 || l.Evicted("a") || len(l.Running()[0].Pods) != 1 {
		t.Errorf("after a failure of one rank of a: free %d (want 16000), evicted %v, running pods %d (want 1)",
			free(), l.Evicted("a"), len(l.Running()[0].Pods))
	}

	// A trial vacates b, then the eviction is recorded: freed once.
	l.Vacate([]cluster.Placed{b.Pods[0].Placed})
	if free() != 24000 {
		t.Errorf("after vacating b: free %d, want 24000", free())
	}
	l.Evict(Eviction{Job: "b", Pods: []workload.PodRef{b.Pods[0].Pod}, Cause: CausePreempt})
	if free() != 24000 || !l.Evicted("b") {
		t.Errorf("after evicting the vacated b: free %d (want 24000), evicted %v", free(), l.Evicted("b"))
	}

	// A trial that does not go ahead gives the capacity back.
	cp := []cluster.Placed{c.Pods[0].Placed}
	l.Vacate(cp)
	l.Restore(cp)
	if free() != 24000 {
		t.Errorf("after a trial on c undone: free %d, want 24000", free())
	}

	// Shrinking c by one pod, then an eviction naming that pod again.
	l.Evict(Eviction{Job: "c", Pods: []workload.PodRef{c.Pods[1].Pod}, Cause: CauseShrink})
	l.Evict(Eviction{Job: "c", Pods: []workload.PodRef{c.Pods[1].Pod}, Cause: CausePreempt})
	if free() != 28000 {
		t.Errorf("after evicting one pod of c twice: free %d, want 28000 (freed once)", free())
	}
	if diff := cmp.Diff([]workload.JobID{"a"}, ids()); diff != "" {
		t.Errorf("Running after the decisions (-want +got):\n%s", diff)
	}
	holders := map[workload.JobID]int{}
	for _, h := range l.Holders() {
		holders[h.Job.ID] = len(h.Pods)
	}
	if diff := cmp.Diff(map[workload.JobID]int{"a": 1, "c": 1}, holders); diff != "" {
		t.Errorf("holders' pods (-want +got):\n%s", diff)
	}
	if got := len(l.plan.Evictions); got != 4 {
		t.Errorf("plan has %d evictions, want the 4 recorded", got)
	}
}
