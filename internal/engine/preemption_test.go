package engine

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// victim is a running 2×8-GPU gang on two nodes that checkpoints every 30
// minutes and started `ago` before now.
type victim struct {
	id        string
	nodes     []string
	ago       time.Duration
	sinceCkpt time.Duration // 0: unknown (the interval is assumed)
	prio      int32
	minRun    time.Duration
	fixed     bool // not preemptible
	min       int  // gang minimum (0: all pods)
	queue     string
}

func (v victim) run(t *testing.T, s *cluster.State, now time.Time) RunningJob {
	b := build.Job(v.id).Pods(len(v.nodes)).GPUs(8).Priority(v.prio).MinRuntime(v.minRun).
		Checkpoint(30 * time.Minute).Overhead(5 * time.Minute).Min(v.min)
	if !v.fixed {
		b = b.Preemptible()
	}
	if v.queue != "" {
		b = b.Queue(v.queue)
	}
	rj := pin(t, s, b.Obj(), now.Add(-v.ago), v.nodes...)
	if v.sinceCkpt > 0 {
		rj.Checkpoints = reportedEvery(rj.Start, now.Add(-v.sinceCkpt), 30*time.Minute)
	}
	return rj
}

// reportedEvery is a job's reports since start, every interval, the last
// at last: a regular reporter (only reports count, issue 17).
func reportedEvery(start, last time.Time, every time.Duration) cycle.Checkpoints {
	var at []time.Time
	for t := last; t.After(start); t = t.Add(-every) {
		at = append(at, t)
	}
	var c cycle.Checkpoints
	for i := len(at) - 1; i >= 0; i-- {
		c = c.Add(at[i])
	}
	return c
}

func TestPreemptionChoosesTheVictimsThatLoseLeastWork(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	two := func(a, b string) []string { return []string{a, b} }
	cases := map[string]struct {
		victims    []victim
		preemptor  *workload.Job
		preemption Preemption
		want       []string // evicted jobs
		wantPods   int      // pods evicted in all
		wantWhy    string   // in the preemptor's reason when nothing is evicted
	}{
		"the gang that lost the least work since its checkpoint": {
			victims: []victim{
				{id: "fresh-ckpt", nodes: two("r0-n-0", "r0-n-1"), ago: 10 * time.Hour, sinceCkpt: 2 * time.Minute},
				{id: "stale-ckpt", nodes: two("r0-n-2", "r0-n-3"), ago: 1 * time.Hour, sinceCkpt: 25 * time.Minute},
			},
			preemptor: build.Job("hi").Pods(2).GPUs(8).Priority(10).Obj(),
			want:      []string{"fresh-ckpt"}, wantPods: 2,
		},
		"the peers' baseline evicts the newest instead": {
			victims: []victim{
				{id: "fresh-ckpt", nodes: two("r0-n-0", "r0-n-1"), ago: 10 * time.Hour, sinceCkpt: 2 * time.Minute},
				{id: "stale-ckpt", nodes: two("r0-n-2", "r0-n-3"), ago: 1 * time.Hour, sinceCkpt: 25 * time.Minute},
			},
			preemptor:  build.Job("hi").Pods(2).GPUs(8).Priority(10).Obj(),
			preemption: PreemptNewest,
			want:       []string{"stale-ckpt"}, wantPods: 2,
		},
		"min-runtime protects a fresh job": {
			victims: []victim{
				{id: "young", nodes: two("r0-n-0", "r0-n-1"), ago: 20 * time.Minute, sinceCkpt: time.Minute, minRun: time.Hour},
				{id: "old", nodes: two("r0-n-2", "r0-n-3"), ago: 5 * time.Hour, sinceCkpt: 25 * time.Minute},
			},
			preemptor: build.Job("hi").Pods(2).GPUs(8).Priority(10).Obj(),
			want:      []string{"old"}, wantPods: 2,
		},
		"a non-preemptible job is never evicted": {
			victims: []victim{
				{id: "fixed", nodes: two("r0-n-0", "r0-n-1"), ago: 5 * time.Hour, sinceCkpt: time.Minute, fixed: true},
				{id: "young", nodes: two("r0-n-2", "r0-n-3"), ago: 10 * time.Minute, minRun: time.Hour},
			},
			preemptor: build.Job("hi").Pods(2).GPUs(8).Priority(10).Obj(),
		},
		"equal priority does not preempt": {
			victims: []victim{
				{id: "a", nodes: two("r0-n-0", "r0-n-1"), ago: time.Hour},
				{id: "b", nodes: two("r0-n-2", "r0-n-3"), ago: time.Hour},
			},
			preemptor: build.Job("same").Pods(2).GPUs(8).Obj(),
		},
		"a higher priority in the way is named": {
			victims: []victim{
				{id: "top", nodes: two("r0-n-0", "r0-n-1"), ago: time.Hour, prio: 20},
				{id: "low", nodes: two("r0-n-2", "r0-n-3"), ago: time.Hour},
				{id: "low1", nodes: two("r1-n-0", "r1-n-1"), ago: time.Hour},
				{id: "low2", nodes: two("r1-n-2", "r1-n-3"), ago: time.Hour},
			},
			preemptor: build.Job("hi").Pods(8).GPUs(8).Priority(10).Obj(),
			wantWhy:   "would not fit even with all 3 eligible jobs evicted (left alone: 1 of priority at least its own or of queues it may not take from)",
		},
		"no eviction when the job would still not fit": {
			// A 3-node gang that must stay in one rack: each rack has one
			// free node, one preemptible and two that cannot move.
			victims: []victim{
				{id: "fixed0", nodes: two("r0-n-0", "r0-n-1"), ago: time.Hour, fixed: true},
				{id: "fixed1", nodes: two("r1-n-0", "r1-n-1"), ago: time.Hour, fixed: true},
				{id: "cheap0", nodes: []string{"r0-n-2"}, ago: time.Hour, sinceCkpt: time.Minute},
				{id: "cheap1", nodes: []string{"r1-n-2"}, ago: time.Hour, sinceCkpt: time.Minute},
			},
			preemptor: build.Job("hi").Pods(3).GPUs(8).Priority(10).Required("rack").Obj(),
			wantWhy:   "would not fit even with all 2 eligible jobs evicted (left alone: 2 not preemptible or inside their minimum runtime)",
		},
		"an elastic gang gives back only its pods above the minimum": {
			victims: []victim{
				{id: "elastic", nodes: []string{"r0-n-0", "r0-n-1", "r0-n-2", "r0-n-3"}, ago: time.Hour, min: 2},
			},
			preemptor: build.Job("hi").Pods(2).GPUs(8).Priority(10).Required("rack").Obj(),
			want:      []string{"elastic"}, wantPods: 2,
		},
		"an elastic gang is never left below its minimum": {
			victims: []victim{
				{id: "elastic", nodes: []string{"r0-n-0", "r0-n-1", "r0-n-2", "r0-n-3"}, ago: time.Hour, min: 2},
			},
			preemptor: build.Job("hi").Pods(3).GPUs(8).Priority(10).Required("rack").Obj(),
			want:      []string{"elastic"}, wantPods: 4,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(2, 4))
			// Rack r1 is busy with work nobody may preempt unless a case uses it.
			var running []RunningJob
			used := map[string]bool{}
			for _, v := range tc.victims {
				running = append(running, v.run(t, s, now))
				for _, n := range v.nodes {
					used[n] = true
				}
			}
			if !used["r1-n-0"] {
				for i := 0; i < 4; i++ {
					n := fmt.Sprintf("r1-n-%d", i)
					running = append(running, victim{id: "blocker-" + n, nodes: []string{n}, ago: time.Hour, fixed: true}.run(t, s, now))
				}
			}
			e := New(Config{Preemption: tc.preemption, CheckpointWait: -1})
			p := e.Cycle(&Snapshot{State: s, Pending: pendingOf(tc.preemptor), Running: running, Now: now})
			if diff := cmp.Diff(tc.want, evicted(p)); diff != "" {
				t.Fatalf("evicted (-want +got):\n%s\npending: %+v", diff, p.Pending)
			}
			pods := 0
			for _, ev := range p.Evictions {
				pods += len(ev.Pods)
				// An elastic job is shrunk (backfill's step) before anyone is preempted.
				cause := CausePreempt
				if tc.victims[0].min > 0 && len(tc.victims) == 1 && len(ev.Pods) < len(tc.victims[0].nodes) {
					cause = CauseShrink
				}
				if ev.Cause != cause || ev.By != tc.preemptor.ID || !strings.Contains(ev.Message, string(tc.preemptor.ID)) || ev.LostGPUSeconds <= 0 {
					t.Errorf("eviction %+v: want cause Preempted by %s with its cost", ev, tc.preemptor.ID)
				}
			}
			if pods != tc.wantPods {
				t.Errorf("evicted %d pods, want %d", pods, tc.wantPods)
			}
			placed := outcomeOf(p, tc.preemptor.ID).Placed
			if placed != (len(tc.want) > 0) {
				t.Errorf("preemptor placed = %v with %d evictions", placed, len(p.Evictions))
			}
			if tc.wantWhy != "" && !strings.Contains(reasonOf(p, tc.preemptor.ID).Message, tc.wantWhy) {
				t.Errorf("reason %q does not say %q", reasonOf(p, tc.preemptor.ID).Message, tc.wantWhy)
			}
			checkPlanApplies(t, s, running, p)
		})
	}
}

// checkPlanApplies carries the plan out on a copy as the drivers do,
// evictions first: every bind must fit in what they free.
func checkPlanApplies(t *testing.T, s *cluster.State, running []RunningJob, p Plan) {
	t.Helper()
	c := s.Clone()
	pods := map[workload.PodRef]PodBind{}
	for _, rj := range running {
		for _, pb := range rj.Pods {
			pods[pb.Pod] = pb
		}
	}
	for _, ev := range p.Evictions {
		for _, ref := range ev.Pods {
			pb, ok := pods[ref]
			if !ok {
				t.Fatalf("eviction of %s, which is not running", ref)
			}
			c.Release(pb.NodeIndex, pb.Alloc)
		}
	}
	for _, b := range p.Binds {
		for _, pb := range b.Pods {
			if err := c.Allocate(pb.NodeIndex, pb.Alloc); err != nil {
				t.Errorf("bind %s does not fit after the evictions: %v", pb.Pod, err)
			}
		}
	}
}

func TestConsolidationFreesARackOnlyWhenItPays(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	// Every running job ends in about 5 minutes: the gang would wait 5
	// minutes, a gain of 32 GPUs × 5 min ≈ 2.7 GPU-hours.
	cases := map[string]struct {
		sinceCkpt time.Duration // of the two movable jobs in rack r0
		want      []string
		wantWhy   string
	}{
		"cheap jobs move so that a rack frees up":            {sinceCkpt: 2 * time.Minute, want: []string{"m0", "m1"}},
		"jobs that would lose more than the gang gains stay": {sinceCkpt: 0, wantWhy: "not less than"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(2, 4))
			mk := func(id, node string, expected time.Duration, since time.Duration, ckpt time.Duration) RunningJob {
				j := build.Job(id).GPUs(8).Preemptible().Expected(expected).Checkpoint(ckpt).Overhead(time.Minute).Obj()
				rj := pin(t, s, j, now.Add(-time.Hour), node)
				if since > 0 {
					rj.Checkpoints = reportedEvery(rj.Start, now.Add(-since), ckpt)
				}
				return rj
			}
			// Half of each rack is busy; r0's jobs are cheap to move (recent
			// checkpoint) or costly (none since they started an hour ago).
			end := time.Hour + 5*time.Minute
			ckpt := 10 * time.Minute
			if tc.sinceCkpt == 0 {
				ckpt = 0 // never checkpoints: an hour of work lost
			}
			running := []RunningJob{
				mk("m0", "r0-n-0", end, tc.sinceCkpt, ckpt), mk("m1", "r0-n-1", end, tc.sinceCkpt, ckpt),
				mk("x0", "r1-n-0", end, 0, 0), mk("x1", "r1-n-1", end, 0, 0),
			}
			gang := build.Job("gang").Pods(4).GPUs(8).Required("rack").Obj()
			p := New(Config{Consolidate: true}).Cycle(&Snapshot{State: s, Pending: pendingOf(gang), Running: running, Now: now})
			if diff := cmp.Diff(tc.want, evicted(p)); diff != "" {
				t.Fatalf("moved (-want +got):\n%s\npending %+v", diff, p.Pending)
			}
			for _, ev := range p.Evictions {
				if ev.Cause != CauseConsolidate || !strings.Contains(ev.Message, "wait about") {
					t.Errorf("eviction %+v: want Consolidated with the gain", ev)
				}
			}
			if got := outcomeOf(p, "gang"); got.Placed != (len(tc.want) > 0) {
				t.Errorf("gang outcome %+v", got)
			}
			if tc.wantWhy != "" && !strings.Contains(reasonOf(p, "gang").Message, tc.wantWhy) {
				t.Errorf("reason %q does not say %q", reasonOf(p, "gang").Message, tc.wantWhy)
			}
			checkPlanApplies(t, s, running, p)
		})
	}
}

func TestPreemptionSearchIsBounded(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	s := build.State(build.Topo("rack"), build.Racks(2, 4))
	var running []RunningJob
	for i := 0; i < 8; i++ {
		node := fmt.Sprintf("r%d-n-%d", i/4, i%4)
		running = append(running, victim{id: fmt.Sprintf("v%d", i), nodes: []string{node}, ago: time.Hour}.run(t, s, now))
	}
	hi := build.Job("hi").Pods(4).GPUs(8).Priority(10).Required("rack").Obj()
	// A budget of 2: the scan of the running jobs, and one placement tried,
	// enough to learn that evicting everything would make room, not enough
	// to prove any set.
	p := New(Config{PreemptBudget: 2, CheckpointWait: -1}).Cycle(&Snapshot{State: s, Pending: pendingOf(hi), Running: running, Now: now})
	if len(p.Evictions) != 0 || p.Stats.PreemptGaveUp != 1 || p.Stats.PreemptEvaluations != 1 {
		t.Fatalf("evictions %v, stats %+v", p.Evictions, p.Stats)
	}
	if r := reasonOf(p, "hi"); !strings.Contains(r.Message, "gave up after 1 placements") {
		t.Errorf("reason %q does not say the search gave up", r.Message)
	}
	p = New(Config{CheckpointWait: -1}).Cycle(&Snapshot{State: s, Pending: pendingOf(hi), Running: running, Now: now})
	if len(p.Evictions) != 4 || p.Stats.PreemptGaveUp != 0 {
		t.Errorf("with the default budget: evictions %v, stats %+v", p.Evictions, p.Stats)
	}
}

func TestPreemptionIsDeterministic(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	var first Plan
	for round := 0; round < 5; round++ {
		s := build.State(build.Topo("rack"), build.Racks(2, 4))
		var running []RunningJob
		for i := 0; i < 8; i++ {
			node := fmt.Sprintf("r%d-n-%d", i/4, i%4)
			running = append(running, victim{id: fmt.Sprintf("v%d", i), nodes: []string{node}, ago: time.Hour,
				sinceCkpt: time.Duration(1+i%3) * time.Minute}.run(t, s, now))
		}
		// Present the running jobs in a different order each round.
		for i := range running {
			j := (i*7 + round) % len(running)
			running[i], running[j] = running[j], running[i]
		}
		hi := build.Job("hi").Pods(3).GPUs(8).Priority(10).Required("rack").Obj()
		p := New(Config{CheckpointWait: -1}).Cycle(&Snapshot{State: s, Pending: pendingOf(hi), Running: running, Now: now})
		if round == 0 {
			first = p
			if len(p.Evictions) != 3 {
				t.Fatalf("evictions %v", p.Evictions)
			}
			continue
		}
		if diff := cmp.Diff(first, p); diff != "" {
			t.Fatalf("round %d differs (-first +this):\n%s", round, diff)
		}
	}
}

func TestPreemptionWaitsForTheVictimsCheckpoint(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	// The victim checkpoints every 30 minutes; corral waits at most 10.
	cases := map[string]struct {
		sinceCkpt time.Duration
		deferred  bool
	}{
		"next checkpoint in 5 minutes: wait for it":     {sinceCkpt: 25 * time.Minute, deferred: true},
		"next checkpoint in 20 minutes: evict now":      {sinceCkpt: 10 * time.Minute},
		"checkpoint late by a minute: still wait":       {sinceCkpt: 31 * time.Minute, deferred: true},
		"checkpoint late by 5 minutes: evict now":       {sinceCkpt: 35 * time.Minute},
		"just checkpointed: nothing to save, evict now": {sinceCkpt: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(1, 2))
			v := victim{id: "v", nodes: []string{"r0-n-0", "r0-n-1"}, ago: 10 * time.Hour, sinceCkpt: tc.sinceCkpt}
			if tc.sinceCkpt == 0 {
				v.sinceCkpt = time.Nanosecond
			}
			// Twenty reported checkpoints, 30 minutes apart: its own history
			// predicts the next (issue 17).
			v.ago = 10*time.Hour + v.sinceCkpt
			running := []RunningJob{v.run(t, s, now)}
			hi := build.Job("hi").Pods(2).GPUs(8).Priority(10).Obj()
			p := New(Config{CheckpointWait: 10 * time.Minute}).Cycle(&Snapshot{State: s, Pending: pendingOf(hi), Running: running, Now: now})
			if got := len(p.Evictions) == 0; got != tc.deferred {
				t.Fatalf("deferred = %v, want %v; evictions %v, pending %+v", got, tc.deferred, p.Evictions, p.Pending)
			}
			if !tc.deferred {
				if !p.Retry.IsZero() {
					t.Errorf("retry %v set without a deferral", p.Retry)
				}
				return
			}
			next := running[0].Checkpoints.Last().Add(30 * time.Minute)
			if want := next.Add(time.Second); next.After(now) && !p.Retry.Equal(want) {
				t.Errorf("retry at %v, want %v", p.Retry, want)
			}
			if r := reasonOf(p, "hi"); !strings.Contains(r.Message, "preemption deferred") || p.Stats.PreemptDeferred != 1 {
				t.Errorf("reason %q, stats %+v", r.Message, p.Stats)
			}
			// At the retry the victim has checkpointed: it loses only its
			// restart overhead.
			running[0].Checkpoints = running[0].Checkpoints.Add(p.Retry.Add(-time.Second))
			later := New(Config{CheckpointWait: 10 * time.Minute}).Cycle(&Snapshot{State: s, Pending: pendingOf(hi), Running: running, Now: p.Retry})
			if len(later.Evictions) != 1 || !outcomeOf(later, "hi").Placed {
				t.Fatalf("at the retry: evictions %v, pending %+v", later.Evictions, later.Pending)
			}
			if lost, overhead := later.Evictions[0].LostGPUSeconds, 16*(5*time.Minute+time.Second).Seconds(); lost > overhead {
				t.Errorf("lost %v GPU-s after the checkpoint, want at most the overhead %v", lost, overhead)
			}
		})
	}
}

// Of two victims, the one about to checkpoint is taken and waited for, although
// evicting the other now would lose less: after its checkpoint it loses only its
// restart overhead (preempt.AwaitedCost).
func TestPreemptionPrefersTheVictimAboutToCheckpoint(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	s := build.State(build.Topo("rack"), build.Racks(1, 4))
	// Both checkpoint every 30 minutes: "soon" did 27 minutes ago, "later" 12.
	soon := victim{id: "soon", nodes: []string{"r0-n-0", "r0-n-1"}, ago: 10*time.Hour + 27*time.Minute, sinceCkpt: 27 * time.Minute}
	later := victim{id: "later", nodes: []string{"r0-n-2", "r0-n-3"}, ago: 10*time.Hour + 12*time.Minute, sinceCkpt: 12 * time.Minute}
	running := []RunningJob{later.run(t, s, now), soon.run(t, s, now)}
	hi := build.Job("hi").Pods(2).GPUs(8).Priority(10).Obj()
	p := New(Config{}).Cycle(&Snapshot{State: s, Pending: pendingOf(hi), Running: running, Now: now})
	if len(p.Evictions) != 0 || p.Stats.PreemptDeferred != 1 {
		t.Fatalf("evictions %v, stats %+v: want one deferral", p.Evictions, p.Stats)
	}
	if want := now.Add(3*time.Minute + time.Second); !p.Retry.Equal(want) {
		t.Fatalf("retry at %v, want %v (soon's checkpoint)", p.Retry, want)
	}
	running[1].Checkpoints = running[1].Checkpoints.Add(now.Add(3 * time.Minute))
	at := New(Config{}).Cycle(&Snapshot{State: s, Pending: pendingOf(hi), Running: running, Now: p.Retry})
	if len(at.Evictions) != 1 || at.Evictions[0].Job != "soon" {
		t.Fatalf("at the retry: evictions %v, want soon's", at.Evictions)
	}
}

// A victim the search priced at its awaited cost but evicted at once (beside
// a victim that reported no checkpoint, no wait) reports what it really loses.
func TestAnEvictionNotWaitedForReportsItsWholeLoss(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	s := build.State(build.Topo("rack"), build.Racks(1, 4))
	soon := victim{id: "soon", nodes: []string{"r0-n-0", "r0-n-1"}, ago: 10*time.Hour + 27*time.Minute, sinceCkpt: 27 * time.Minute}
	silent := victim{id: "silent", nodes: []string{"r0-n-2", "r0-n-3"}, ago: 20 * time.Minute}
	running := []RunningJob{soon.run(t, s, now), silent.run(t, s, now)}
	hi := build.Job("hi").Pods(4).GPUs(8).Priority(10).Obj()
	p := New(Config{}).Cycle(&Snapshot{State: s, Pending: pendingOf(hi), Running: running, Now: now})
	if len(p.Evictions) != 2 {
		t.Fatalf("evictions %v, want both victims now", p.Evictions)
	}
	for _, ev := range p.Evictions {
		if ev.Job != "soon" {
			continue
		}
		// 16 GPUs × (27 minutes since its checkpoint + 5 minutes' restart overhead).
		if want := 16 * (32 * time.Minute).Seconds(); math.Abs(ev.LostGPUSeconds-want) > 1 {
			t.Errorf("soon lost %v GPU-s, want %v", ev.LostGPUSeconds, want)
		}
	}
}
