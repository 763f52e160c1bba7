package engine

// One plan per failure: no pod named twice, escalation after remediation,
// growth beside pinned replacement ranks.

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/workload"
)

// TestNoPodEvictedTwiceInOnePlan: a preemptible gang loses a GPU while a
// higher-priority job waits for room. Remediation evicts the failed rank
// (its rack has a free node for the replacement); preemption then takes the
// rest of the gang, but never again the pod remediation already evicted (a
// driver fails evicting a pod twice).
func TestNoPodEvictedTwiceInOnePlan(t *testing.T) {
	victim := build.Job("victim").Pods(2).GPUs(8).Preemptible().Submit(t0.Unix()).Obj()
	w := newHealthWorld(t, victim, "r0-n-0", "r0-n-1")
	for _, n := range []string{"r1-n-0", "r1-n-1", "r1-n-2"} {
		w.fillNode(t, n)
	}
	f := w.failDevice(t, "r0-n-0", 2)
	// The free node r0-n-2 is held for the replacement rank, so hi can
	// only get room by preempting the victim gang as a whole.
	hi := build.Job("hi").GPUs(8).Priority(100).Submit(t0.Unix()).Obj()
	p := New(Config{}).Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Pending: pendingOf(hi),
		Failures: []health.Failure{f}, Now: t0.Add(time.Hour)})
	seen := map[workload.PodRef]EvictionCause{}
	for _, ev := range p.Evictions {
		for _, ref := range ev.Pods {
			if c, twice := seen[ref]; twice {
				t.Fatalf("pod %s evicted twice: %s, then %s", ref, c, ev.Cause)
			}
			seen[ref] = ev.Cause
		}
	}
	if len(seen) != 2 || !outcomeOf(p, "hi").Placed {
		t.Fatalf("want both ranks evicted once and hi placed; evicted %v, pending %+v", seen, p.Pending)
	}
}

// TestSparesGiveWayToJobsThatNeedThem: a job that could never fit beside a
// rack's spare (it needs the whole rack) may use it; smaller jobs may not.
func TestSparesGiveWayToJobsThatNeedThem(t *testing.T) {
	spares := []health.Spare{{Level: "rack", GPUs: 8}}
	for _, tc := range []struct {
		name      string
		job       *workload.Job
		wantNodes int
		wantHeld  int // spare GPUs held after the cycle
	}{
		{"a whole-rack gang uses its rack's spare", build.Job("w").Pods(3).GPUs(8).Required("rack").Obj(), 3, 8},
		{"a smaller gang leaves the spare alone", build.Job("s").Pods(2).GPUs(8).Required("rack").Obj(), 2, 16},
		{"a gang bigger than any rack never fits either way", build.Job("b").Pods(4).GPUs(8).Required("rack").Obj(), 0, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(2, 3))
			p := New(Config{Policy: Corral}).Cycle(&Snapshot{State: s, Spares: spares, Now: t0,
				Pending: []PendingJob{{Job: tc.job}}})
			got := outcomeOf(p, tc.job.ID)
			if len(got.Nodes) != tc.wantNodes {
				t.Errorf("placed on %v, want %d nodes (pending: %+v)", got.Nodes, tc.wantNodes, p.Pending)
			}
			if p.Stats.SpareGPUsHeld != tc.wantHeld {
				t.Errorf("spare GPUs held %d, want %d", p.Stats.SpareGPUsHeld, tc.wantHeld)
			}
		})
	}
}

// TestEscalationEvictsOnlyWhatTheGangStillHolds: a three-rank rack gang
// waits for the replacement of a failed rank when a second rank fails.
// The new failure's replacement takes the rack's last free node, so the
// first replacement finds no room and the gang restarts: the escalation
// evicts the one rank left, not again the one remediation just evicted.
func TestEscalationEvictsOnlyWhatTheGangStillHolds(t *testing.T) {
	job := build.Job("g").Pods(3).GPUs(8).Obj()
	s := build.State(build.Topo("rack"), build.Racks(2, 4))
	w := newHealthWorldOn(t, s, job, "r0-n-0", "r0-n-1", "r0-n-2")
	eng := New(Config{Policy: Corral})
	f1 := w.failDevice(t, "r0-n-0", 3)
	p1 := eng.Cycle(&Snapshot{State: s, Running: []RunningJob{w.run}, Failures: []health.Failure{f1}, Now: t0})
	w.apply(t, p1)
	r := p1.Remediations[0]
	f2 := w.failDevice(t, "r0-n-1", 3)
	p2 := eng.Cycle(&Snapshot{State: s, Running: []RunningJob{w.run}, Failures: []health.Failure{f1, f2}, Now: t0,
		Pending: []PendingJob{{Job: job, Waiting: r.Pods, Within: Pin{Level: r.Level, Domain: r.Domain}}}})
	want := []remediation{
		{Action: workload.ReplaceRanks, Evicted: []string{"g/0-1"}, Domain: "r0"},
		{Action: workload.RestartGang, Evicted: []string{"g/0-2"}},
	}
	if diff := cmp.Diff(want, remediationOf(p2)); diff != "" {
		t.Errorf("remediation (-want +got):\n%s", diff)
	}
	var evicted []string
	for _, ev := range p2.Evictions {
		for _, ref := range ev.Pods {
			evicted = append(evicted, ref.String())
		}
	}
	if diff := cmp.Diff([]string{"g/0-1", "g/0-2"}, evicted); diff != "" {
		t.Errorf("evicted pods, each once (-want +got):\n%s", diff)
	}
}

// TestPinnedReplacementIsNotGrownAgain: an elastic rack job waits for the
// replacement of a failed pod. The health step binds the replacement in
// its rack; growth, later in the same cycle, must count it as the job's
// and not place the same pod a second time.
func TestPinnedReplacementIsNotGrownAgain(t *testing.T) {
	job := build.Job("e").Pods(2).Min(1).GPUs(8).Required("rack").Obj()
	w := newHealthWorld(t, job, "r0-n-0", "r0-n-1")
	w.apply(t, Plan{Evictions: []Eviction{{Job: "e", Pods: []workload.PodRef{{Job: "e", Index: 1}}}}})
	p := New(Config{Policy: Corral}).Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Now: t0.Add(time.Hour),
		Pending: []PendingJob{{Job: job, Waiting: []workload.PodRef{{Job: "e", Index: 1}}, Within: Pin{Level: "rack", Domain: "r0"}}}})
	bound := map[workload.PodRef]int{}
	for _, b := range p.Binds {
		for _, pb := range b.Pods {
			bound[pb.Pod]++
		}
	}
	if diff := cmp.Diff(map[workload.PodRef]int{{Job: "e", Index: 1}: 1}, bound); diff != "" {
		t.Errorf("pods bound (-want +got):\n%s", diff)
	}
	if p.Stats.PodsGrown != 0 {
		t.Errorf("grew %d pods, want 0", p.Stats.PodsGrown)
	}
}

// TestEscalationOfAGangLeftHoldingNothing: a two-rank gang waits for the
// replacement of one rank when the other fails too, and its replacement
// takes the rack's last free node. The gang holds nothing any more: the
// plan evicts the second rank once and restarts nothing else.
func TestEscalationOfAGangLeftHoldingNothing(t *testing.T) {
	w := newHealthWorld(t, gang("g"), "r0-n-0", "r0-n-1")
	eng := New(Config{Policy: Corral})
	f1 := w.failDevice(t, "r0-n-0", 3)
	p1 := eng.Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Failures: []health.Failure{f1}, Now: t0})
	w.apply(t, p1)
	r := p1.Remediations[0]
	f2 := w.failDevice(t, "r0-n-1", 3)
	p2 := eng.Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Failures: []health.Failure{f1, f2}, Now: t0,
		Pending: []PendingJob{{Job: w.run.Job, Waiting: r.Pods, Within: Pin{Level: r.Level, Domain: r.Domain}}}})
	want := []remediation{{Action: workload.ReplaceRanks, Evicted: []string{"g/0-1"}, Domain: "r0"}}
	if diff := cmp.Diff(want, remediationOf(p2)); diff != "" {
		t.Errorf("remediation (-want +got):\n%s", diff)
	}
	if len(p2.Evictions) != 1 || len(p2.Evictions[0].Pods) != 1 {
		t.Errorf("evictions %+v, want g/0-1 once", p2.Evictions)
	}
}

// TestPausedGangIsPricedOnce: a three-rank strict gang (no checkpoint
// reported, 10-minute restart overhead) loses a rank an hour in: the whole
// gang rolls back, priced once as its 24 GPUs × (1 h + 10 min). An hour
// later, while it waits for the replacement, a second rank fails and the
// first replacement's room is gone, so the gang restarts. Its ranks sat
// idle since the rollback: neither the second failure's eviction nor the
// escalation throws away work (nor adds an overhead) that the first did not
// already count.
func TestPausedGangIsPricedOnce(t *testing.T) {
	job := build.Job("g").Pods(3).GPUs(8).Obj()
	job.RestartOverhead = 10 * time.Minute
	s := build.State(build.Topo("rack"), build.Racks(2, 4))
	w := newHealthWorldOn(t, s, job, "r0-n-0", "r0-n-1", "r0-n-2")
	eng := New(Config{Policy: Corral})
	f1 := w.failDevice(t, "r0-n-0", 3)
	p1 := eng.Cycle(&Snapshot{State: s, Running: []RunningJob{w.run}, Failures: []health.Failure{f1}, Now: t0.Add(time.Hour)})
	w.apply(t, p1)
	r := p1.Remediations[0]
	f2 := w.failDevice(t, "r0-n-1", 3)
	p2 := eng.Cycle(&Snapshot{State: s, Running: []RunningJob{w.run}, Failures: []health.Failure{f1, f2}, Now: t0.Add(2 * time.Hour),
		Pending: []PendingJob{{Job: job, Waiting: r.Pods, Within: Pin{Level: r.Level, Domain: r.Domain}}}})
	lost := map[string]float64{}
	for i, p := range []Plan{p1, p2} {
		for _, ev := range p.Evictions {
			for _, ref := range ev.Pods {
				lost[fmt.Sprintf("cycle %d: %s", i+1, ref)] = ev.LostGPUSeconds
			}
		}
	}
	want := map[string]float64{
		"cycle 1: g/0-0": 24 * (time.Hour + 10*time.Minute).Seconds(), // the rollback of the whole gang
		"cycle 2: g/0-1": 0,                                           // a second failure under the idle gang
		"cycle 2: g/0-2": 0,                                           // the escalation to a restart
	}
	if diff := cmp.Diff(want, lost); diff != "" {
		t.Errorf("GPU-seconds lost per evicted pod (-want +got):\n%s", diff)
	}
}
