package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestReturningOwnerReclaimsItsGuarantee(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	s := build.State(build.Topo("rack"), build.Racks(2, 4))
	// Queue b borrowed the whole cluster while a was idle: 8 one-node jobs,
	// with checkpoints of different ages.
	var running []RunningJob
	for i := 0; i < 8; i++ {
		node := fmt.Sprintf("r%d-n-%d", i/4, i%4)
		v := victim{id: fmt.Sprintf("b-run%d", i), nodes: []string{node}, ago: 3 * time.Hour,
			sinceCkpt: time.Duration(5+3*i) * time.Minute, queue: "b", prio: 50}
		running = append(running, v.run(t, s, now))
	}
	qs := []queue.Spec{
		{Name: "a", Guarantee: h100(32), Reclaim: true},
		{Name: "b"},
	}
	back := build.Job("a-back").Queue("a").Pods(2).GPUs(8).Obj() // priority 0 < 50: only reclaim can help
	p := New(Config{CheckpointWait: -1}).Cycle(&Snapshot{State: s, Pending: pendingOf(back), Running: running, Queues: qs, Now: now})
	if diff := cmp.Diff([]string{"b-run0", "b-run1"}, evicted(p)); diff != "" {
		t.Fatalf("evicted (-want +got):\n%s\npending %+v", diff, p.Pending)
	}
	for _, ev := range p.Evictions {
		if ev.Cause != CauseReclaim || !strings.Contains(ev.Message, `queue "a"`) {
			t.Errorf("eviction %+v: want Reclaimed naming queue a", ev)
		}
	}
	if !outcomeOf(p, "a-back").Placed {
		t.Fatalf("the owner's job was not placed: %+v", p.Pending)
	}
	if got := queueGPUs(p); got["a"] != 16 || got["b"] != 48 {
		t.Errorf("after the cycle a holds %d, b %d GPUs; want 16 and 48", got["a"], got["b"])
	}

	// Without Reclaim the owner waits for borrowed capacity to come back.
	qs[0].Reclaim = false
	p = New(Config{}).Cycle(&Snapshot{State: s, Pending: pendingOf(back), Running: running, Queues: qs, Now: now})
	if len(p.Evictions) != 0 || outcomeOf(p, "a-back").Verdict != placement.WaitFree {
		t.Errorf("without reclaim: evictions %v, outcome %+v", p.Evictions, outcomeOf(p, "a-back"))
	}

	// A queue at its guarantee does not reclaim from a queue within its
	// own fair share.
	s = build.State(build.Topo("rack"), build.Racks(2, 4))
	running = nil
	for i := 0; i < 8; i++ {
		node := fmt.Sprintf("r%d-n-%d", i/4, i%4)
		q := "b"
		if i < 2 {
			q = "a"
		}
		running = append(running, victim{id: fmt.Sprintf("%s-run%d", q, i), nodes: []string{node}, ago: 3 * time.Hour, queue: q}.run(t, s, now))
	}
	qs = []queue.Spec{{Name: "a", Guarantee: h100(16), Reclaim: true}, {Name: "b", Guarantee: h100(48)}}
	p = New(Config{}).Cycle(&Snapshot{State: s, Pending: pendingOf(back), Running: running, Queues: qs, Now: now})
	if len(p.Evictions) != 0 || outcomeOf(p, "a-back").Verdict != placement.WaitFree {
		t.Errorf("reclaimed from a queue within its share: evictions %v, outcome %+v", p.Evictions, outcomeOf(p, "a-back"))
	}
}

// TestStrictReclaimTakesABorrowerHoldingItsOwnGuarantee: queue b's job
// borrowed the idle cluster in one gang, so evicting it leaves b below its
// own guarantee. Preempt waits for it to end; Strict takes it, but only when
// no set of victims that keeps b's guarantee would do.
func TestStrictReclaimTakesABorrowerHoldingItsOwnGuarantee(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	all := []string{"r0-n-0", "r0-n-1", "r0-n-2", "r0-n-3", "r1-n-0", "r1-n-1", "r1-n-2", "r1-n-3"}
	cases := map[string]struct {
		policy  func(*queue.Spec)
		running []victim // queue b's
		want    []string // evicted
		why     string   // in a's job's reason, when it waits
	}{
		"Preempt: the whole-cluster borrower stays": {
			policy:  func(s *queue.Spec) { s.Reclaim = true },
			running: []victim{{id: "b-all", nodes: all}},
			why:     "no set of eligible jobs makes room that leaves every queue it takes from its guarantee or fair share (reclaimPolicy Strict would take a borrower below its own queue's guarantee)",
		},
		"Strict: the whole-cluster borrower is reclaimed": {
			policy:  func(s *queue.Spec) { s.Reclaim, s.StrictReclaim = true, true },
			running: []victim{{id: "b-all", nodes: all}},
			want:    []string{"b-all"},
		},
		"Strict: a victim that keeps b's guarantee goes first": {
			policy:  func(s *queue.Spec) { s.Reclaim, s.StrictReclaim = true, true },
			running: []victim{{id: "b-big", nodes: all[:7]}, {id: "b-one", nodes: all[7:], sinceCkpt: 20 * time.Minute}},
			want:    []string{"b-one"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(2, 4))
			var running []RunningJob
			for _, v := range tc.running {
				v.ago, v.queue = 3*time.Hour, "b"
				if v.sinceCkpt == 0 {
					v.sinceCkpt = 10 * time.Minute
				}
				running = append(running, v.run(t, s, now))
			}
			qs := []queue.Spec{{Name: "a", Guarantee: h100(32)}, {Name: "b", Guarantee: h100(32)}}
			tc.policy(&qs[0])
			back := build.Job("a-back").Queue("a").GPUs(8).Obj()
			p := New(Config{CheckpointWait: -1}).Cycle(&Snapshot{State: s, Pending: pendingOf(back), Running: running, Queues: qs, Now: now})
			if diff := cmp.Diff(tc.want, evicted(p), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("evicted (-want +got):\n%s\npending %+v", diff, p.Pending)
			}
			for _, ev := range p.Evictions {
				if ev.Cause != CauseReclaim {
					t.Errorf("eviction %+v: want a reclaim", ev)
				}
			}
			if placed := outcomeOf(p, "a-back").Placed; placed != (len(tc.want) > 0) {
				t.Errorf("a's job placed %v, want %v: %+v", placed, len(tc.want) > 0, p.Pending)
			}
			for _, pe := range p.Pending {
				if pe.Job == "a-back" && !strings.Contains(pe.Reason.Message, tc.why) {
					t.Errorf("a's reason %q, want it to say %q", pe.Reason.Message, tc.why)
				}
			}
		})
	}
}

// TestReclaimPassesReservations: a queue taking back its guarantee is not
// held off by a reservation on the borrowed nodes (issue 17). The guard
// that keeps victims on reserved nodes applies to priority preemption only:
// reclaim restores what the queue was promised, and a reservation is a
// promise made on borrowed capacity. Before the change the owner waited for
// the starved gang (Jain 0.676 against 0.732 on the issue-5 workload).
func TestReclaimPassesReservations(t *testing.T) {
	now := t0.Add(48 * time.Hour)
	s := build.State(build.Topo("rack"), build.Racks(2, 4))
	var running []RunningJob
	for i := 0; i < 8; i++ {
		node := fmt.Sprintf("r%d-n-%d", i/4, i%4)
		j := build.Job(fmt.Sprintf("b-run%d", i)).Queue("b").GPUs(8).Priority(50).Preemptible().
			Expected(10 * time.Hour).Checkpoint(30 * time.Minute).Overhead(5 * time.Minute).Obj()
		rj := pin(t, s, j, now.Add(-3*time.Hour), node)
		rj.Checkpoints = reportedEvery(rj.Start, now.Add(-time.Duration(5+3*i)*time.Minute), 30*time.Minute)
		running = append(running, rj)
	}
	// b's whole-cluster gang has starved: it is reserved on every node.
	head := build.Job("b-head").Queue("b").Pods(8).GPUs(8).Priority(50).Expected(time.Hour).Obj()
	head.Submit = now.Add(-30 * time.Hour)
	back := build.Job("a-back").Queue("a").Pods(2).GPUs(8).Obj()
	back.Submit = now
	qs := []queue.Spec{{Name: "a", Guarantee: h100(32), Reclaim: true}, {Name: "b"}}
	p := New(Config{CheckpointWait: -1}).Cycle(&Snapshot{State: s, Pending: pendingOf(head, back), Running: running, Queues: qs, Now: now})
	if len(p.Reservations) == 0 || p.Reservations[0].Job != "b-head" {
		t.Fatalf("want b-head reserved, got %+v", p.Reservations)
	}
	if !outcomeOf(p, "a-back").Placed {
		t.Fatalf("the owner's job waits behind the reservation: %+v", outcomeOf(p, "a-back"))
	}
	for _, ev := range p.Evictions {
		if ev.Cause != CauseReclaim {
			t.Errorf("eviction %+v: want a reclaim", ev)
		}
	}
}

// TestFairShareReclaimSparesJobsWithoutCheckpoints: rebalancing capacity
// nobody is guaranteed never evicts a job that reported no checkpoint in
// its run (it would lose all its work since start); a guarantee reclaim
// still does.
func TestFairShareReclaimSparesJobsWithoutCheckpoints(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	// b holds the whole cluster, 8 one-node jobs; a, which may reclaim,
	// waits with a 16-GPU job: its fair share is 16 GPUs, b's 48.
	// reporting says which of b's jobs reported checkpoints (the last 25
	// minutes ago, 3 hours into their run); the others started 20 minutes
	// ago and reported none, so evicting them would lose less work.
	world := func(reporting ...int) (*cluster.State, []RunningJob) {
		s := build.State(build.Topo("rack"), build.Racks(2, 4))
		var running []RunningJob
		for i := 0; i < 8; i++ {
			v := victim{id: fmt.Sprintf("b-run%d", i), nodes: []string{fmt.Sprintf("r%d-n-%d", i/4, i%4)},
				ago: 20 * time.Minute, queue: "b"}
			for _, r := range reporting {
				if r == i {
					v.ago, v.sinceCkpt = 3*time.Hour, 25*time.Minute
				}
			}
			running = append(running, v.run(t, s, now))
		}
		return s, running
	}
	back := build.Job("a-back").Queue("a").Pods(2).GPUs(8).Obj()
	cases := map[string]struct {
		reporting   []int
		aGuaranteed int64
		want        []string // evicted; nil: a-back waits
	}{
		"fair share: the reporting jobs go, though the others would lose less": {
			reporting: []int{6, 7}, want: []string{"b-run6", "b-run7"},
		},
		"fair share: no job reported a checkpoint, nothing is evicted": {},
		"guarantee: owed whatever it costs, the cheapest go": {
			reporting: []int{6, 7}, aGuaranteed: 16, want: []string{"b-run0", "b-run1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, running := world(tc.reporting...)
			qs := []queue.Spec{{Name: "a", Reclaim: true}, {Name: "b"}}
			if tc.aGuaranteed > 0 {
				qs[0].Guarantee = h100(tc.aGuaranteed)
			}
			p := New(Config{CheckpointWait: -1}).Cycle(&Snapshot{State: s, Pending: pendingOf(back), Running: running, Queues: qs, Now: now})
			if diff := cmp.Diff(tc.want, evicted(p)); diff != "" {
				t.Fatalf("evicted (-want +got):\n%s\npending %+v", diff, p.Pending)
			}
			if placed := outcomeOf(p, "a-back").Placed; placed != (tc.want != nil) {
				t.Errorf("a-back placed %v, want %v: %+v", placed, tc.want != nil, outcomeOf(p, "a-back"))
			}
			for _, ev := range p.Evictions {
				if ev.Cause != CauseReclaim {
					t.Errorf("eviction %+v: want Reclaimed", ev)
				}
			}
		})
	}
}

// TestQueueMadeInvalidKeepsItsRunningJobs: an admin's bad edit to a queue
// (its limit below its guarantee, a parent cycle, an unknown parent) takes
// it out of the tree, but what it runs keeps running: charged nowhere, its
// jobs are neither reclaimed by a queue at its guarantee nor preempted by a
// job of another queue, exactly as before the edit.
func TestQueueMadeInvalidKeepsItsRunningJobs(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	for name, edit := range map[string]func(*queue.Spec){
		"valid":                 func(*queue.Spec) {},
		"limit below guarantee": func(b *queue.Spec) { b.Limit = h100(8) },
		"unknown parent":        func(b *queue.Spec) { b.Parent = "nope" },
		"its own parent":        func(b *queue.Spec) { b.Parent = "b" },
		"negative guarantee":    func(b *queue.Spec) { b.Guarantee = h100(-1) },
	} {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(2, 4))
			var running []RunningJob
			for i := 0; i < 8; i++ {
				q := "b"
				if i < 2 {
					q = "a"
				}
				running = append(running, victim{id: fmt.Sprintf("%s-run%d", q, i), nodes: []string{fmt.Sprintf("r%d-n-%d", i/4, i%4)},
					ago: 3 * time.Hour, queue: q}.run(t, s, now))
			}
			qs := []queue.Spec{{Name: "a", Guarantee: h100(16), Reclaim: true}, {Name: "b", Guarantee: h100(48)}}
			edit(&qs[1])
			// a holds its guarantee: only b's jobs are in the way.
			more := build.Job("a-more").Queue("a").Pods(2).GPUs(8).Obj()
			p := New(Config{CheckpointWait: -1}).Cycle(&Snapshot{State: s, Pending: pendingOf(more), Running: running, Queues: qs, Now: now})
			if len(p.Evictions) != 0 || outcomeOf(p, "a-more").Placed {
				t.Errorf("evicted %v, a-more %+v: want nothing moved", evicted(p), outcomeOf(p, "a-more"))
			}
		})
	}
}

// TestReclaimSparesABorrowerThatWouldLoseDaysOfWork: the only borrower in
// the owner's way has run a day without a checkpoint. Within the owner's
// grace reclaim leaves it alone (the owner waits, told why and until when,
// and a cycle is booked for then); past the grace, or with the bound
// turned off, it is taken; a borrower that checkpointed is taken at once.
func TestReclaimSparesABorrowerThatWouldLoseDaysOfWork(t *testing.T) {
	now := t0.Add(48 * time.Hour)
	cases := map[string]struct {
		submitted time.Duration // before now
		sinceCkpt time.Duration // 0: no checkpoint reported
		maxLost   time.Duration
		want      []string // evicted
	}{
		"no checkpoint, within the grace: spared":    {submitted: time.Hour},
		"no checkpoint, past the grace: taken":       {submitted: 25 * time.Hour, want: []string{"b-long"}},
		"no checkpoint, the bound turned off: taken": {submitted: time.Hour, maxLost: -1, want: []string{"b-long"}},
		"checkpointed 10 minutes ago: taken at once": {submitted: time.Hour, sinceCkpt: 10 * time.Minute, want: []string{"b-long"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(1, 1))
			running := []RunningJob{victim{id: "b-long", nodes: []string{"r0-n-0"}, ago: 24 * time.Hour,
				sinceCkpt: tc.sinceCkpt, queue: "b"}.run(t, s, now)}
			qs := []queue.Spec{{Name: "a", Guarantee: h100(8), Reclaim: true}, {Name: "b"}}
			back := build.Job("a-back").Queue("a").Pods(1).GPUs(8).Obj()
			back.Submit = now.Add(-tc.submitted)
			p := New(Config{CheckpointWait: -1, ReclaimMaxLost: tc.maxLost}).Cycle(
				&Snapshot{State: s, Pending: pendingOf(back), Running: running, Queues: qs, Now: now})
			if diff := cmp.Diff(tc.want, evicted(p), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("evicted (-want +got):\n%s\npending %+v", diff, p.Pending)
			}
			if len(tc.want) > 0 {
				return
			}
			until := back.Submit.Add(DefaultReclaimGrace)
			msg := ""
			for _, pe := range p.Pending {
				if pe.Job == "a-back" {
					msg = pe.Reason.Message
				}
			}
			if outcomeOf(p, "a-back").Placed || !strings.Contains(msg, "reclaim spares 1 borrower(s) that would each lose more than 6 hours of progress") ||
				!strings.Contains(msg, until.UTC().Format(time.RFC3339)) {
				t.Errorf("owner's reason %q: want waiting, told the borrower is spared until %v", msg, until)
			}
			if !p.Retry.Equal(until) {
				t.Errorf("Retry %v, want the end of the grace %v", p.Retry, until)
			}
		})
	}
}
