package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/baseline"
	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/metrics"
	"github.com/corral-dev/corral/internal/trace"
	"github.com/corral-dev/corral/internal/workload"
)

// fakeClock makes engine timings reproducible: every reading is 1µs later.
func fakeClock() func() time.Time {
	t := time.Unix(0, 0)
	return func() time.Time {
		t = t.Add(time.Microsecond)
		return t
	}
}

func job(j *workload.Job, runtime time.Duration) Job { return Job{Job: j, Runtime: runtime} }

// gangWorkload: a stream of gangs and small jobs on 2 racks of 4 nodes.
func gangWorkload() Input {
	in := Input{ClusterName: "test", Topology: build.Topo("rack"), Nodes: build.Racks(2, 4), TraceName: "test"}
	for i := 0; i < 60; i++ {
		id := string(rune('a'+i%26)) + string(rune('a'+i/26))
		b := build.Job(id).Submit(int64(i * 600))
		switch i % 3 {
		case 0:
			b = b.Pods(3).GPUs(8).Required("rack")
		case 1:
			b = b.GPUs(2)
		default:
			b = b.Milli(500)
		}
		in.Jobs = append(in.Jobs, job(b.Obj(), time.Duration(1+i%5)*time.Hour))
	}
	return in
}

func TestReplayIsDeterministic(t *testing.T) {
	for _, p := range engine.Policies {
		t.Run(string(p), func(t *testing.T) {
			run := func() metrics.Result {
				res, _, err := Run(gangWorkload(), Config{Policy: p, Protocol: Replay, Seed: 1, Clock: fakeClock()})
				if err != nil {
					t.Fatal(err)
				}
				res.Summary.WallSeconds = 0
				return res
			}
			a, b := run(), run()
			if diff := cmp.Diff(a, b); diff != "" {
				t.Errorf("two runs differ (-first +second):\n%s", diff)
			}
			// Pod-by-pod policies may start part of a gang whose rendezvous
			// then fails until its controller gives up; every job still ends.
			if s := a.Summary; s.JobsCompleted+s.JobsGaveUp != 60 {
				t.Errorf("%d of 60 jobs completed, %d gave up", s.JobsCompleted, s.JobsGaveUp)
			}
		})
	}
}

func TestCorralNeverStartsPartOfAGang(t *testing.T) {
	// Two 3-node gangs arrive together on a 4-node cluster, pods interleaved
	// by arrival: pod-by-pod baselines start b partly (it holds a node while a
	// runs), then c partly once a ends.
	in := Input{ClusterName: "test", Topology: build.Topo("rack"), Nodes: build.Racks(1, 4)}
	in.Jobs = []Job{
		job(build.Job("a").Pods(3).GPUs(8).Obj(), time.Hour),
		job(build.Job("b").Pods(3).GPUs(8).Obj(), time.Hour),
		job(build.Job("c").Pods(2).GPUs(8).Submit(1).Obj(), time.Hour),
	}
	want := map[engine.Policy]int{engine.Corral: 0, engine.Spread: 2, engine.Binpack: 2}
	for p, partial := range want {
		res, _, err := Run(in, Config{Policy: p, Protocol: Replay, Clock: fakeClock()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Summary.PartialGangs != partial {
			t.Errorf("%s: %d partial gangs, want %d", p, res.Summary.PartialGangs, partial)
		}
		if p == engine.Corral && res.Summary.JobsCompleted != 3 {
			t.Errorf("corral completed %d of 3 jobs", res.Summary.JobsCompleted)
		}
	}
}

func TestJobsThatNeverFitAreReportedAndTheRunGoesOn(t *testing.T) {
	in := gangWorkload()
	big := build.Job("too-big").Pods(9).GPUs(8).Obj()
	big.Source = "trace.csv:7"
	nine := build.Job("nine-gpus").GPUs(9).Obj()
	nine.Source = "trace.csv:8"
	in.Jobs = append(in.Jobs, job(big, time.Hour), job(nine, time.Hour))
	res, rej, err := Run(in, Config{Policy: engine.Corral, Protocol: Replay, Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.JobsNeverFit != 2 || len(rej) != 2 {
		t.Fatalf("never-fit: summary %d, rejections %+v", res.Summary.JobsNeverFit, rej)
	}
	for _, r := range rej {
		if !strings.HasPrefix(r.Source, "trace.csv:") || r.Reason == "" {
			t.Errorf("rejection without source or reason: %+v", r)
		}
	}
	if res.Summary.JobsCompleted != 60 {
		t.Errorf("the other jobs: %d of 60 completed", res.Summary.JobsCompleted)
	}
}

func TestFGDProtocol(t *testing.T) {
	in := Input{ClusterName: "test", Topology: build.Topo(), Nodes: build.Node().Name("n").GPUs(4).Times(10)}
	for i, m := range []int{1000, 500, 250, 2000} {
		b := build.Job(string(rune('a' + i)))
		if m < 1000 {
			b = b.Milli(m)
		} else {
			b = b.GPUs(m / 1000)
		}
		in.Jobs = append(in.Jobs, job(b.Obj(), 0))
	}
	res, _, err := Run(in, Config{Policy: engine.Corral, Protocol: FGD, Seed: 42, Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	arrived := res.Series.AllocVsArrived[len(res.Series.AllocVsArrived)-1].X
	if arrived > 130 || arrived < 125 {
		t.Errorf("arrivals end at %.1f%% of capacity, want just under 130%%", arrived)
	}
	for _, k := range []string{"100", "110", "120", "130"} {
		if _, ok := s.UnallocatedAt[k]; !ok {
			t.Errorf("no unallocated figure at %s%%", k)
		}
	}
	if s.UnallocatedAt["130"] > 1 {
		t.Errorf("these shapes pack perfectly; %.2f%% left unallocated", s.UnallocatedAt["130"])
	}
	again, _, _ := Run(in, Config{Policy: engine.Corral, Protocol: FGD, Seed: 42, Clock: fakeClock()})
	if diff := cmp.Diff(res.Series.AllocVsArrived, again.Series.AllocVsArrived); diff != "" {
		t.Errorf("same seed, different curve:\n%s", diff)
	}
	other, _, _ := Run(in, Config{Policy: engine.Corral, Protocol: FGD, Seed: 43, Clock: fakeClock()})
	if cmp.Equal(res.Series.AllocVsArrived, other.Series.AllocVsArrived) {
		t.Errorf("seeds 42 and 43 gave the same arrival order")
	}
}

func TestFGDOfflineBound(t *testing.T) {
	// Fractions that pack badly online pack well when the big ones go first.
	in := Input{ClusterName: "test", Topology: build.Topo(), Nodes: build.Node().Name("n").GPUs(2).Times(6)}
	for i, m := range []int{700, 300, 600, 400, 1000} {
		b := build.Job(string(rune('a' + i)))
		if m < 1000 {
			b = b.Milli(m)
		}
		in.Jobs = append(in.Jobs, job(b.Obj(), 0))
	}
	online, _, err := Run(in, Config{Policy: engine.Corral, Protocol: FGD, Seed: 42, Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	offline, _, err := Run(in, Config{Policy: engine.Corral, Protocol: FGDOffline, Seed: 42, Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("unallocated at 130%%: online %.2f%%, offline %.2f%%", online.Summary.UnallocatedAt["130"], offline.Summary.UnallocatedAt["130"])
	if offline.Summary.UnallocatedAt["130"] > online.Summary.UnallocatedAt["130"] {
		t.Errorf("offline packing left %.2f%%, online %.2f%%", offline.Summary.UnallocatedAt["130"], online.Summary.UnallocatedAt["130"])
	}
	if offline.Summary.JobsSubmitted != online.Summary.JobsSubmitted {
		t.Errorf("offline placed a different workload: %d vs %d jobs", offline.Summary.JobsSubmitted, online.Summary.JobsSubmitted)
	}
}

func TestReplayWithQueuesMeasuresFairnessAndLostWork(t *testing.T) {
	spec, err := trace.LoadCluster("dgx-h100:blocks=1,racks=2,nodes=4")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadTrace("gen:llm?jobs=150&late=0.5&load=1.2&ckpt=30m&restart=5m&est=hours", trace.Options{Seed: 5, Cluster: spec})
	if err != nil {
		t.Fatal(err)
	}
	queues, err := trace.LoadQueues("teams", spec)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Topology: spec.Topology, Nodes: spec.Nodes, Queues: queues}
	for _, j := range tr.Jobs {
		in.Jobs = append(in.Jobs, Job{Job: j.Job, Runtime: j.Runtime})
	}
	// kueue-tas models ClusterQueues and reports their standing too, so its
	// Jain's index is measured beside corral's (issue 17).
	for _, pol := range []engine.Policy{engine.Corral, engine.CorralNewest, baseline.KueueTASName} {
		res, _, err := Run(in, Config{Policy: pol, Protocol: Replay, Seed: 5, Clock: fakeClock()})
		if err != nil {
			t.Fatal(err)
		}
		s := res.Summary
		if s.JobsCompleted != len(in.Jobs) {
			t.Errorf("%s: %d of %d jobs completed", pol, s.JobsCompleted, len(in.Jobs))
		}
		if s.LateQueue != "team-c" || !(s.FairnessJain > 0 && s.FairnessJain <= 1) {
			t.Errorf("%s: late queue %q, Jain %v", pol, s.LateQueue, s.FairnessJain)
		}
		if s.Evictions == 0 || s.Preempted+s.Reclaimed+s.Consolidated != s.Evictions {
			t.Errorf("%s: evictions %d = %d preempted + %d reclaimed + %d consolidated?", pol, s.Evictions, s.Preempted, s.Reclaimed, s.Consolidated)
		}
		if d := s.GPUHoursLost - s.GPUHoursLostPreemption - s.GPUHoursLostConsolidation; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: lost %v != %v + %v", pol, s.GPUHoursLost, s.GPUHoursLostPreemption, s.GPUHoursLostConsolidation)
		}
		again, _, _ := Run(in, Config{Policy: pol, Protocol: Replay, Seed: 5, Clock: fakeClock()})
		if again.Summary.GPUHoursLost != s.GPUHoursLost || again.Summary.FairnessJain != s.FairnessJain {
			t.Errorf("%s: a second run differs", pol)
		}
		t.Logf("%s: %d evictions, %.1f GPU-h lost, Jain %.3f", pol, s.Evictions, s.GPUHoursLost, s.FairnessJain)
	}
}
