package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/mig"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// take marks MIG instances in use: "node/gpuK/profile@start".
func take(t *testing.T, s *cluster.State, used ...string) {
	t.Helper()
	for _, u := range used {
		parts := strings.Split(u, "/")
		n, ok := s.NodeIndex(parts[0])
		if !ok {
			t.Fatalf("no node %s", parts[0])
		}
		k := deviceIndexOf(s.Node(n), parts[1])
		ref, ok := s.MIGRef(n, k, build.Lay(parts[2])[0])
		if !ok {
			t.Fatalf("%s: no such MIG instance", u)
		}
		if err := s.Allocate(n, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: k, MIG: ref}}}); err != nil {
			t.Fatal(err)
		}
	}
}

func deviceIndexOf(n *cluster.Node, id string) int {
	for k, d := range n.Devices {
		if d.ID == id {
			return k
		}
	}
	return -1
}

// migOutcome is what a MIG test checks of a plan for one job.
type migOutcome struct {
	Bound        string // "node/gpu/profile@start" of the first pod, if bound
	Verdict      placement.Verdict
	Message      string
	Repartitions []string // "node/gpu: layout"
}

func migOutcomeOf(s *cluster.State, p Plan, id workload.JobID) migOutcome {
	var o migOutcome
	for _, rp := range p.Repartitions {
		o.Repartitions = append(o.Repartitions, fmt.Sprintf("%s/%s: %s", rp.Node, rp.Device, rp.Layout))
	}
	for _, b := range p.Binds {
		if b.Job == id {
			pb := b.Pods[0]
			d := pb.Alloc.Devices[0]
			o.Bound = fmt.Sprintf("%s/%s/%s", pb.Node, pb.Devices[0], s.MIGInstance(pb.NodeIndex, d.Device, d.MIG))
		}
	}
	for _, pe := range p.Pending {
		if pe.Job == id {
			o.Verdict, o.Message = pe.Reason.Verdict, pe.Reason.Message
		}
	}
	return o
}

func TestMIGPlacement(t *testing.T) {
	sevenOnes := build.Lay("1g.5gb@0 1g.5gb@1 1g.5gb@2 1g.5gb@3 1g.5gb@4 1g.5gb@5 1g.5gb@6")
	twoThrees := build.Lay("3g.20gb@0 3g.20gb@4")
	a100 := func(name string, layouts ...mig.Layout) []cluster.Node {
		return []cluster.Node{build.Node().Name(name).Model("A100").GPUs(2).PCIe().MIG("A100-40GB", layouts...).Obj()}
	}
	cases := map[string]struct {
		nodes  [][]cluster.Node
		used   []string
		policy Policy
		job    *workload.Job
		mix    placement.Mix
		want   migOutcome
	}{
		"an instance of a busy GPU before an idle one": {
			nodes: [][]cluster.Node{a100("a", sevenOnes, sevenOnes)},
			used:  []string{"a/gpu1/1g.5gb@0"},
			job:   build.Job("j").MIG("1g.5gb").Obj(),
			want:  migOutcome{Bound: "a/gpu1/1g.5gb@1"},
		},
		"the baseline takes the first free instance": {
			nodes:  [][]cluster.Node{a100("a", sevenOnes, sevenOnes)},
			used:   []string{"a/gpu1/1g.5gb@0"},
			policy: Binpack,
			job:    build.Job("j").MIG("1g.5gb").Obj(),
			want:   migOutcome{Bound: "a/gpu0/1g.5gb@0"},
		},
		"the node with a busy GPU before an idle node": {
			nodes: [][]cluster.Node{a100("a", twoThrees, twoThrees), a100("b", twoThrees, twoThrees)},
			used:  []string{"b/gpu1/3g.20gb@0"},
			job:   build.Job("j").MIG("3g.20gb").Obj(),
			want:  migOutcome{Bound: "b/gpu1/3g.20gb@4"},
		},
		"re-partition of an idle GPU is planned, the job waits for it": {
			nodes: [][]cluster.Node{a100("a", twoThrees, twoThrees)},
			used:  []string{"a/gpu0/3g.20gb@0"},
			job:   build.Job("j").MIG("4g.20gb").Obj(),
			want: migOutcome{Verdict: placement.WaitFree, Message: "waiting for MIG re-partition of a/gpu1",
				Repartitions: []string{"a/gpu1: [4g.20gb@0 3g.20gb@4]"}},
		},
		"the new layout follows the expected mix": {
			nodes: [][]cluster.Node{a100("a", twoThrees, nil)},
			used:  []string{"a/gpu0/3g.20gb@0"},
			job:   build.Job("j").MIG("1g.5gb").Obj(),
			mix: placement.Mix{{Request: workload.Request{GPUs: 1, MIGProfile: "1g.5gb"}, Weight: 0.5},
				{Request: workload.Request{GPUs: 1, MIGProfile: "2g.10gb"}, Weight: 0.5}},
			want: migOutcome{Verdict: placement.WaitFree, Message: "waiting for MIG re-partition of a/gpu1",
				Repartitions: []string{"a/gpu1: [2g.10gb@0 2g.10gb@2 1g.5gb@4 1g.5gb@5 1g.5gb@6]"}},
		},
		"a busy GPU is never re-partitioned": {
			nodes: [][]cluster.Node{a100("a", twoThrees, twoThrees)},
			used:  []string{"a/gpu0/3g.20gb@0", "a/gpu1/3g.20gb@4"},
			job:   build.Job("j").MIG("4g.20gb").Obj(),
			want: migOutcome{Verdict: placement.WaitFree,
				Message: "the cluster has no room for 1×[MIG 4g.20gb, 1 CPU, 1 GiB] now (fits 0 of 1 pods, 1.144 GPUs free)"},
		},
		"a gang waits for one re-partition": {
			nodes: [][]cluster.Node{a100("a", nil, nil)},
			job:   build.Job("j").Pods(3).MIG("2g.10gb").Obj(),
			want: migOutcome{Verdict: placement.WaitFree, Message: "waiting for MIG re-partition of a/gpu0",
				Repartitions: []string{"a/gpu0: [2g.10gb@0 2g.10gb@2 2g.10gb@4 1g.10gb@6]"}},
		},
		"a re-partition the node has not reported yet is waited for, not planned again": {
			nodes: [][]cluster.Node{func() []cluster.Node {
				n := a100("a", twoThrees, twoThrees)
				n[0].Devices[1].MIGPending, n[0].Devices[1].MIGWanted = true, sevenOnes
				return n
			}()},
			used: []string{"a/gpu0/3g.20gb@0", "a/gpu0/3g.20gb@4"},
			job:  build.Job("j").MIG("1g.5gb").Obj(),
			want: migOutcome{Verdict: placement.WaitFree, Message: "waiting for MIG re-partition of a/gpu1"},
		},
		"the baseline never re-partitions": {
			nodes:  [][]cluster.Node{a100("a", twoThrees, twoThrees)},
			used:   []string{"a/gpu0/3g.20gb@0"},
			policy: Binpack,
			job:    build.Job("j").MIG("4g.20gb").Obj(),
			want:   migOutcome{Verdict: placement.WaitFree, Message: "1 of 1 pods found no node"},
		},
		"a profile no GPU of the cluster offers": {
			nodes: [][]cluster.Node{a100("a")},
			job:   build.Job("j").MIG("3g.40gb").Obj(),
			want: migOutcome{Verdict: placement.NeverFits,
				Message: "no MIG GPU in the cluster offers MIG profile 3g.40gb (profiles offered: 1g.10gb, 1g.5gb, 1g.5gb+me, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)"},
		},
		"a profile name that is no profile": {
			nodes: [][]cluster.Node{a100("a")},
			job:   build.Job("j").MIG("half").Obj(),
			want: migOutcome{Verdict: placement.NeverFits,
				Message: `invalid job: job j pod set "worker": unknown MIG profile "half": profiles are named like 1g.10gb or 3g.40gb`},
		},
		"a MIG profile on a cluster without MIG": {
			nodes: [][]cluster.Node{build.Node().Name("w").Times(1)},
			job:   build.Job("j").MIG("1g.10gb").Obj(),
			want: migOutcome{Verdict: placement.NeverFits,
				Message: "asks for MIG profile 1g.10gb, but no GPU in the cluster runs MIG"},
		},
		"a whole GPU never lands on a MIG GPU": {
			nodes: [][]cluster.Node{a100("a")},
			job:   build.Job("j").GPUs(1).Obj(),
			want: migOutcome{Verdict: placement.NeverFits,
				Message: "no GPU of model (a GPU not in MIG mode) in the cluster (models: A100 (MIG A100-40GB))"},
		},
		"a whole GPU goes to the GPU not in MIG mode": {
			nodes: [][]cluster.Node{a100("a"), build.Node().Name("w").Model("A100").GPUs(1).Times(1)},
			job:   build.Job("j").GPUs(1).Obj(),
			want:  migOutcome{Bound: "w-0/gpu0/@0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(cluster.Topology{}, tc.nodes...)
			take(t, s, tc.used...)
			policy := tc.policy
			if policy == "" {
				policy = Corral
			}
			snap := &Snapshot{State: s, Mix: tc.mix, Pending: []PendingJob{{Job: tc.job}}}
			got := migOutcomeOf(s, New(Config{Policy: policy}).Cycle(snap), tc.job.ID)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMIGAccounting checks that instances count their compute share of the
// GPU, that a cycle's later jobs see the instances reserved for a planned
// re-partition, and that releasing gives the GPU back whole.
func TestMIGAccounting(t *testing.T) {
	s := build.State(cluster.Topology{}, []cluster.Node{
		build.Node().Name("a").Model("H100").GPUs(1).PCIe().MIG("H100-80GB").Obj()})
	p := runCycle(s, Corral, build.Job("j1").MIG("3g.40gb").Obj(), build.Job("j2").MIG("3g.40gb").Obj(),
		build.Job("j3").MIG("3g.40gb").Obj())
	if len(p.Repartitions) != 1 || p.Repartitions[0].Layout.String() != "[3g.40gb@0 3g.40gb@4]" {
		t.Fatalf("repartitions = %+v, want one into [3g.40gb@0 3g.40gb@4]", p.Repartitions)
	}
	wantWait := map[workload.JobID]string{
		"j1": "waiting for MIG re-partition of a/gpu0", "j2": "waiting for MIG re-partition of a/gpu0",
		"j3": "the cluster has no room for 1×[MIG 3g.40gb, 1 CPU, 1 GiB] now (fits 0 of 1 pods, 0.143 GPUs free)",
	}
	for _, pe := range p.Pending {
		if pe.Reason.Message != wantWait[pe.Job] {
			t.Errorf("%s: %q, want %q", pe.Job, pe.Reason.Message, wantWait[pe.Job])
		}
	}

	// The driver applies the re-partition; the next cycle binds.
	rp := p.Repartitions[0]
	if err := s.SetMIGLayout(rp.NodeIndex, rp.DeviceIndex, rp.Layout, false); err != nil {
		t.Fatal(err)
	}
	p = runCycle(s, Corral, build.Job("j1").MIG("3g.40gb").Obj(), build.Job("j2").MIG("1g.10gb").Obj())
	if len(p.Binds) != 1 || len(p.Repartitions) != 0 {
		t.Fatalf("second cycle: binds %d, repartitions %d; want 1 and 0", len(p.Binds), len(p.Repartitions))
	}
	a := p.Binds[0].Pods[0].Alloc
	if err := s.Allocate(0, a); err != nil {
		t.Fatal(err)
	}
	if got, want := s.GPUFree(0)[0], int32(1000-428); got != want {
		t.Errorf("free milli with a 3g in use = %d, want %d (3 of 7 compute slices taken)", got, want)
	}
	if err := s.SetMIGLayout(0, 0, sevenTens(), false); err == nil {
		t.Error("re-partitioning a GPU with an instance in use succeeded")
	}
	s.Release(0, a)
	if got := s.GPUFree(0)[0]; got != 1000 {
		t.Errorf("free milli after release = %d, want 1000", got)
	}
}

func sevenTens() mig.Layout {
	return build.Lay("1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6")
}

func TestGPUShares(t *testing.T) {
	v100 := func(name, model string, mem int64) []cluster.Node {
		return []cluster.Node{build.Node().Name(name).Model(model).GPUs(2).PCIe().GPUMem(mem).Obj()}
	}
	type want struct {
		Placed  []string // "node/gpu/milli" per job, in order
		Verdict placement.Verdict
		Message string
	}
	cases := map[string]struct {
		nodes [][]cluster.Node
		held  map[int]int32 // device of node 0 -> milli taken before
		jobs  []*workload.Job
		want  want
	}{
		"four 4 GiB shares fill one 16 GiB GPU": {
			nodes: [][]cluster.Node{v100("a", "V100M16", 16384)},
			jobs: []*workload.Job{build.Job("j1").GPUMem(4096).Obj(), build.Job("j2").GPUMem(4096).Obj(),
				build.Job("j3").GPUMem(4096).Obj(), build.Job("j4").GPUMem(4096).Obj()},
			want: want{Placed: []string{"a/gpu0/250", "a/gpu0/250", "a/gpu0/250", "a/gpu0/250"}},
		},
		"a share rounds its milli up": {
			nodes: [][]cluster.Node{v100("a", "V100M16", 16384)},
			jobs:  []*workload.Job{build.Job("j1").GPUMem(5000).Obj()},
			want:  want{Placed: []string{"a/gpu0/306"}},
		},
		"a share never spans GPUs": {
			nodes: [][]cluster.Node{v100("a", "V100M16", 16384)},
			held:  map[int]int32{0: 625, 1: 625},
			jobs:  []*workload.Job{build.Job("j1").GPUMem(8192).Obj()},
			want: want{Verdict: placement.WaitFree,
				Message: "the cluster has no room for 1×[8 GiB of one GPU, 1 CPU, 1 GiB] now (fits 1 of 1 pods, 0.75 GPUs free)"},
		},
		"a share goes to the GPU whose memory holds it": {
			nodes: [][]cluster.Node{v100("a", "V100M16", 16384), v100("b", "V100M32", 32768)},
			jobs:  []*workload.Job{build.Job("j1").GPUMem(20000).Models("V100M16", "V100M32").Obj()},
			want:  want{Placed: []string{"b/gpu0/611"}},
		},
		"a share above the largest GPU's memory": {
			nodes: [][]cluster.Node{v100("a", "V100M16", 16384), v100("b", "V100M32", 32768)},
			jobs:  []*workload.Job{build.Job("j1").GPUMem(40000).Obj()},
			want: want{Verdict: placement.NeverFits,
				Message: "asks 40000 MiB of one GPU; the largest accepted GPU has 32 GiB, and a share never spans GPUs"},
		},
		"a share of GPUs whose memory is unknown": {
			nodes: [][]cluster.Node{v100("a", "G2", 0)},
			jobs:  []*workload.Job{build.Job("j1").GPUMem(1024).Obj()},
			want: want{Verdict: placement.NeverFits,
				Message: "asks 1 GiB of one GPU, but no accepted GPU states its memory"},
		},
		"a fraction above one GPU": {
			nodes: [][]cluster.Node{v100("a", "V100M16", 16384)},
			jobs:  []*workload.Job{build.Job("j1").Milli(1500).Obj()},
			want: want{Verdict: placement.NeverFits,
				Message: `invalid job: job j1 pod set "worker": GPU fraction 1500m is above one GPU (1000m)`},
		},
		"milli and memory shares add up on one GPU": {
			nodes: [][]cluster.Node{v100("a", "V100M16", 16384)},
			held:  map[int]int32{0: 500, 1: 1000},
			jobs:  []*workload.Job{build.Job("j1").GPUMem(8192).Obj(), build.Job("j2").Milli(1).Obj()},
			want: want{Placed: []string{"a/gpu0/500"}, Verdict: placement.WaitFree,
				Message: "the cluster has no room for 1×[1m GPU, 1 CPU, 1 GiB] now (fits 0 of 1 pods, 0 GPUs free)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(cluster.Topology{}, tc.nodes...)
			for k, m := range tc.held {
				if err := s.Allocate(0, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: k, Milli: m}}}); err != nil {
					t.Fatal(err)
				}
			}
			var got want
			// One cycle per job, the driver applying each plan, as the fgd
			// protocol does.
			for _, j := range tc.jobs {
				p := runCycle(s, Corral, j)
				for _, b := range p.Binds {
					for _, pb := range b.Pods {
						if err := s.Allocate(pb.NodeIndex, pb.Alloc); err != nil {
							t.Fatal(err)
						}
						got.Placed = append(got.Placed, fmt.Sprintf("%s/%s/%d", pb.Node, pb.Devices[0], pb.Alloc.Devices[0].Milli))
					}
				}
				for _, pe := range p.Pending {
					got.Verdict, got.Message = pe.Reason.Verdict, pe.Reason.Message
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestGPUModels checks that a request naming several models (openb's
// gpu_spec "V100M16|V100M32") lands only on those, and that each model is
// accounted on its own.
func TestGPUModels(t *testing.T) {
	s := build.State(cluster.Topology{},
		build.Node().Name("p").Model("P100").GPUs(2).PCIe().Times(1),
		build.Node().Name("v16").Model("V100M16").GPUs(2).PCIe().Times(1),
		build.Node().Name("v32").Model("V100M32").GPUs(2).PCIe().Times(1))
	free := func() map[string]int {
		out := map[string]int{}
		for _, m := range s.Models() {
			mask, _ := s.Mask([]string{m})
			out[m] = s.DomainFreeGPUs(0, mask)
		}
		return out
	}
	var nodes []string
	for i := range 5 {
		p := runCycle(s, Corral, build.Job(fmt.Sprint("j", i)).Models("V100M16", "V100M32").Obj())
		for _, b := range p.Binds {
			for _, pb := range b.Pods {
				if err := s.Allocate(pb.NodeIndex, pb.Alloc); err != nil {
					t.Fatal(err)
				}
				nodes = append(nodes, pb.Node)
			}
		}
		if i == 4 && (len(p.Pending) != 1 || p.Pending[0].Reason.Verdict != placement.WaitFree) {
			t.Errorf("fifth V100 pod: %+v, want WaitFree", p.Pending)
		}
	}
	if diff := cmp.Diff(map[string]int{"P100": 2, "V100M16": 0, "V100M32": 0}, free()); diff != "" {
		t.Errorf("free GPUs per model (-want +got):\n%s\nplaced on %v", diff, nodes)
	}
}
