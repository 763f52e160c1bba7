package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// twoNodes is two 8-GPU nodes, a with 3 GPUs taken and b with 4: a 1-GPU pod
// fits either way, and the scorers disagree on where.
func twoNodes(t *testing.T) (*cluster.State, []engine.RunningJob) {
	t.Helper()
	s := build.State(cluster.Topology{}, []cluster.Node{build.Node().Name("a").Obj(), build.Node().Name("b").Obj()})
	var run []engine.RunningJob
	for _, u := range []struct {
		node string
		gpus int
	}{{"a", 3}, {"b", 4}} {
		n, _ := s.NodeIndex(u.node)
		a := cluster.Alloc{CPUMilli: 1000, MemMiB: 1024}
		for k := 0; k < u.gpus; k++ {
			a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
		}
		if err := s.Allocate(n, a); err != nil {
			t.Fatal(err)
		}
		j := build.Job("busy-" + u.node).GPUs(u.gpus).Obj()
		run = append(run, engine.RunningJob{Job: j, Pods: []engine.PodBind{{Placed: cluster.Placed{Pod: workload.PodRef{Job: j.ID}, NodeIndex: n, Alloc: a}, Node: u.node}}})
	}
	return s, run
}

func nodeOf(t *testing.T, p engine.Plan) string {
	t.Helper()
	if len(p.Binds) != 1 || len(p.Binds[0].Pods) != 1 {
		t.Fatalf("want one pod bound, plan %+v", p)
	}
	return p.Binds[0].Pods[0].Node
}

// TestCorralScoresFragmentationAgainstTheMix pins the yardstick's corral: it
// places by expected fragmentation of the workload mix, not best fit. With
// 4-GPU pods expected, the 1-GPU pod goes to a (5 free -> 4, both nodes
// still hold a 4-GPU pod); best fit, or the same scorer with the mix
// dropped, puts it on b and strands 3 GPUs.
func TestCorralScoresFragmentationAgainstTheMix(t *testing.T) {
	mix := placement.Mix{{Request: workload.Request{CPUMilli: 1000, MemMiB: 1024, GPUs: 4}, Weight: 1}}
	cases := map[string]struct {
		policy engine.Policy
		mix    placement.Mix
		want   string
	}{
		"corral with the mix keeps room for 4-GPU pods": {policy: engine.Corral, mix: mix, want: "a"},
		"corral without the mix falls back to best fit": {policy: engine.Corral, want: "b"},
		"binpack is best fit":                           {policy: engine.Binpack, mix: mix, want: "b"},
		"spread takes the emptier node":                 {policy: engine.Spread, mix: mix, want: "a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, run := twoNodes(t)
			p := engine.New(engine.Config{Policy: tc.policy}).Cycle(&engine.Snapshot{State: s, Running: run, Mix: tc.mix,
				Pending: []engine.PendingJob{{Job: build.Job("one").Obj()}}})
			if got := nodeOf(t, p); got != tc.want {
				t.Errorf("placed on %s, want %s", got, tc.want)
			}
		})
	}
}

// TestSpreadAndBinpackDiffer: the FGD paper's two baselines must not
// collapse into one: on a node with 2 GPUs used and an empty one, spread
// takes the empty node and binpack the used one.
func TestSpreadAndBinpackDiffer(t *testing.T) {
	got := map[engine.Policy]string{}
	for _, pol := range []engine.Policy{engine.Spread, engine.Binpack} {
		s, run := twoNodes(t)
		p := engine.New(engine.Config{Policy: pol}).Cycle(&engine.Snapshot{State: s, Running: run,
			Pending: []engine.PendingJob{{Job: build.Job("one").Obj()}}})
		got[pol] = nodeOf(t, p)
	}
	if got[engine.Spread] == got[engine.Binpack] {
		t.Errorf("spread and binpack both chose %s", got[engine.Spread])
	}
}

// TestRendezvousTimeoutFreesAPartlyStartedJob: under kube, a 2-node job
// whose second pod cannot start holds the first only until its rendezvous
// times out; then the pod is freed and the job resubmitted. Without the
// timeout it holds the node until the blocker ends.
func TestRendezvousTimeoutFreesAPartlyStartedJob(t *testing.T) {
	in := Input{ClusterName: "two", Nodes: build.Node().Name("n").Times(2)}
	in.Jobs = []Job{
		job(build.Job("blocker").GPUs(8).Obj(), time.Hour),
		job(build.Job("pair").Pods(2).GPUs(8).Submit(1).Obj(), time.Hour),
	}
	cases := map[string]struct {
		rendezvous   time.Duration
		wantFailures bool
		maxHeldHours float64 // GPU-hours the pair held while partial
	}{
		"10-minute timeout": {rendezvous: 10 * time.Minute, wantFailures: true, maxHeldHours: 16.1},
		"no timeout":        {rendezvous: -1, wantFailures: false, maxHeldHours: 16.1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, _, err := Run(in, Config{Policy: "kube", Protocol: Replay, Clock: fakeClock(), Rendezvous: tc.rendezvous})
			if err != nil {
				t.Fatal(err)
			}
			s := res.Summary
			if (s.RendezvousFailures > 0) != tc.wantFailures {
				t.Errorf("%d rendezvous failures, want some: %t", s.RendezvousFailures, tc.wantFailures)
			}
			if s.JobsCompleted != 2 {
				t.Errorf("%d of 2 jobs completed", s.JobsCompleted)
			}
			if s.PartialGangGPUHours > tc.maxHeldHours {
				t.Errorf("partial pods held %.1f GPU-hours", s.PartialGangGPUHours)
			}
			// Useful work never counts the partly started pair.
			if s.UtilizationMakespanPct > s.AllocatedMakespanPct+1e-9 {
				t.Errorf("useful %.2f%% above allocated %.2f%%", s.UtilizationMakespanPct, s.AllocatedMakespanPct)
			}
		})
	}
	// The timeout must free the GPUs: with it, the pair is resubmitted and
	// retaken each time (pod by pod nothing stops that), but each hold ends:
	// from its submission at 1 s, every 10 minutes until the blocker ends
	// at 1 h.
	res, _, _ := Run(in, Config{Policy: "kube", Protocol: Replay, Clock: fakeClock()})
	if want := int((time.Hour - time.Second) / DefaultRendezvous); res.Summary.RendezvousFailures != want {
		t.Errorf("%d rendezvous failures in the blocker's hour, want %d", res.Summary.RendezvousFailures, want)
	}
}

// TestRendezvousGivesUpAfterBackoffLimit: a job whose rendezvous keeps
// failing is given up after the Job's default backoffLimit, as its
// controller does, so the run ends instead of resubmitting it forever.
func TestRendezvousGivesUpAfterBackoffLimit(t *testing.T) {
	in := Input{ClusterName: "two", Nodes: build.Node().Name("n").Times(2)}
	in.Jobs = []Job{
		job(build.Job("blocker").GPUs(8).Obj(), 3*time.Hour),
		job(build.Job("pair").Pods(2).GPUs(8).Submit(1).Obj(), time.Hour),
	}
	res, rej, err := Run(in, Config{Policy: "kube", Protocol: Replay, Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if s.RendezvousFailures != rendezvousBackoffLimit+1 || s.JobsGaveUp != 1 || s.JobsCompleted != 1 {
		t.Errorf("%d rendezvous failures, %d gave up, %d completed; want %d, 1, 1",
			s.RendezvousFailures, s.JobsGaveUp, s.JobsCompleted, rendezvousBackoffLimit+1)
	}
	if len(rej) != 1 || rej[0].Job != "pair" || !strings.Contains(rej[0].Reason, "backoffLimit") {
		t.Errorf("rejections %+v, want the pair with its backoffLimit reason", rej)
	}
}

// TestWorkExcludesCommSlowdown: kube-gang spreads a 2 × 4-GPU job over two
// 8-GPU nodes where one would do, so the communication model stretches its
// hour; useful % counts the stretched hour as work, work % only the hour
// the job needs at full speed.
func TestWorkExcludesCommSlowdown(t *testing.T) {
	in := Input{ClusterName: "two", Nodes: build.Node().Name("n").Times(2)}
	in.Jobs = []Job{job(build.Job("pair").Pods(2).GPUs(4).Obj(), time.Hour)}
	res, _, err := Run(in, Config{Policy: "kube-gang", Protocol: Replay, Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if s.CommSlowdownMean <= 1 {
		t.Fatalf("slowdown %.3f: the job was not spread, the test shows nothing", s.CommSlowdownMean)
	}
	want := 100 * 8 * time.Hour.Seconds() / (16 * s.MakespanS)
	if math.Abs(s.WorkMakespanPct-want) > 1e-9 || math.Abs(s.WorkMakespanPct*s.CommSlowdownMean-s.UtilizationMakespanPct) > 1e-6 {
		t.Errorf("work %.4f%%, want %.4f%% (useful %.4f%%, slowdown %.3f)", s.WorkMakespanPct, want, s.UtilizationMakespanPct, s.CommSlowdownMean)
	}
}
