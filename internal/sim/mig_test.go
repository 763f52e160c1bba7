package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
)

// TestMIGReplay: two GPUs partitioned into two 3g each, and a stream of 3g
// and 7g jobs. corral re-partitions an idle GPU for each 7g and back for the
// 3g, so every job ends; the baselines keep the static layout and the 7g
// jobs never start.
func TestMIGReplay(t *testing.T) {
	threes := build.Lay("3g.40gb@0 3g.40gb@4")
	in := Input{ClusterName: "mig", TraceName: "test",
		Nodes: []cluster.Node{build.Node().Name("a").Model("A100").GPUs(2).PCIe().MIG("A100-80GB", threes, threes).Obj()}}
	for i := range 12 {
		profile := "3g.40gb"
		if i%3 == 2 {
			profile = "7g.80gb"
		}
		j := build.Job(fmt.Sprintf("j%02d", i)).MIG(profile).Submit(int64(i * 600)).Obj()
		in.Jobs = append(in.Jobs, job(j, time.Hour))
	}
	want := map[engine.Policy]struct{ done int }{
		engine.Corral: {done: 12}, engine.Binpack: {done: 8},
	}
	for p, w := range want {
		t.Run(string(p), func(t *testing.T) {
			res, _, err := Run(in, Config{Policy: p, Protocol: Replay, Seed: 1, Clock: fakeClock()})
			if err != nil {
				t.Fatal(err)
			}
			s := res.Summary
			if s.JobsCompleted != w.done {
				t.Errorf("%d jobs completed, want %d", s.JobsCompleted, w.done)
			}
			if (s.MIGRepartitions > 0) != (p == engine.Corral) {
				t.Errorf("%d re-partitions; want some only for corral", s.MIGRepartitions)
			}
		})
	}
}

// TestMIGReconfigurationTakesTime: a 7g job that needs an idle GPU
// re-partitioned waits for the reconfiguration, during which the GPU serves
// nothing; with the instantaneous oracle it starts at once.
func TestMIGReconfigurationTakesTime(t *testing.T) {
	threes := build.Lay("3g.40gb@0 3g.40gb@4")
	in := Input{ClusterName: "mig", TraceName: "test",
		Nodes: []cluster.Node{build.Node().Name("a").Model("A100").GPUs(2).PCIe().MIG("A100-80GB", threes, threes).Obj()}}
	// A 3g job arriving during the reconfiguration runs a cycle then: the
	// engine must not re-partition the other GPU for the waiting 7g job.
	in.Jobs = []Job{job(build.Job("seven").MIG("7g.80gb").Obj(), time.Hour),
		job(build.Job("three").MIG("3g.40gb").Submit(60).Obj(), time.Hour)}
	cases := map[string]struct {
		reconfigure time.Duration
		wantWait    float64
	}{
		"default: two minutes out of service": {reconfigure: 0, wantWait: DefaultMIGReconfigure.Seconds()},
		"five minutes":                        {reconfigure: 5 * time.Minute, wantWait: 300},
		"oracle: instantaneous":               {reconfigure: -1, wantWait: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, _, err := Run(in, Config{Policy: engine.Corral, Protocol: Replay, Clock: fakeClock(), MIGReconfigure: tc.reconfigure})
			if err != nil {
				t.Fatal(err)
			}
			s := res.Summary
			if s.JobsCompleted != 2 || s.MIGRepartitions != 1 {
				t.Fatalf("%d jobs completed, %d re-partitions; want 2 and 1", s.JobsCompleted, s.MIGRepartitions)
			}
			if s.WaitMaxS != tc.wantWait {
				t.Errorf("waited %v s, want %v", s.WaitMaxS, tc.wantWait)
			}
		})
	}
}
