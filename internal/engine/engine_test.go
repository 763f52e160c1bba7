package engine

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// outcome is what a test checks of a plan for one job.
type outcome struct {
	Placed  bool
	Level   string   // level of the single domain holding the gang
	Domain  string   // its name
	Nodes   []string // distinct nodes, sorted
	Verdict placement.Verdict
}

func outcomeOf(p Plan, id workload.JobID) outcome {
	for _, b := range p.Binds {
		if b.Job != id {
			continue
		}
		seen := map[string]bool{}
		var nodes []string
		for _, pb := range b.Pods {
			if !seen[pb.Node] {
				seen[pb.Node] = true
				nodes = append(nodes, pb.Node)
			}
		}
		sort.Strings(nodes)
		return outcome{Placed: true, Level: b.Level, Domain: b.Domain, Nodes: nodes}
	}
	for _, pe := range p.Pending {
		if pe.Job == id {
			return outcome{Verdict: pe.Reason.Verdict}
		}
	}
	return outcome{}
}

// occupy takes every GPU of the named nodes.
func occupy(t *testing.T, s *cluster.State, nodes ...string) {
	t.Helper()
	for _, name := range nodes {
		n, ok := s.NodeIndex(name)
		if !ok {
			t.Fatalf("no node %s", name)
		}
		a := cluster.Alloc{}
		for k := range s.Node(n).Devices {
			a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
		}
		if err := s.Allocate(n, a); err != nil {
			t.Fatal(err)
		}
	}
}

func runCycle(s *cluster.State, policy Policy, jobs ...*workload.Job) Plan {
	snap := &Snapshot{State: s}
	for _, j := range jobs {
		snap.Pending = append(snap.Pending, PendingJob{Job: j})
	}
	return New(Config{Policy: policy}).Cycle(snap)
}

func TestGangPlacement(t *testing.T) {
	cases := map[string]struct {
		busy []string // nodes fully used before the cycle
		job  *workload.Job
		want outcome
	}{
		"four 8-GPU pods fill one rack": {
			job:  build.Job("a").Pods(4).GPUs(8).Required("rack").Obj(),
			want: outcome{Placed: true, Level: "rack", Domain: "r0", Nodes: []string{"r0-n-0", "r0-n-1", "r0-n-2", "r0-n-3"}},
		},
		"best fit: the fuller rack that still holds the gang": {
			busy: []string{"r0-n-0"},
			job:  build.Job("a").Pods(3).GPUs(8).Required("rack").Obj(),
			want: outcome{Placed: true, Level: "rack", Domain: "r0", Nodes: []string{"r0-n-1", "r0-n-2", "r0-n-3"}},
		},
		"required rack is never exceeded": {
			busy: []string{"r0-n-0", "r1-n-0"},
			job:  build.Job("a").Pods(4).GPUs(8).Required("rack").Obj(),
			want: outcome{Verdict: placement.WaitFree},
		},
		"without a requirement the gang spans racks": {
			busy: []string{"r0-n-0", "r1-n-0"},
			job:  build.Job("a").Pods(4).GPUs(8).Obj(),
			want: outcome{Placed: true, Level: "cluster", Domain: "cluster", Nodes: []string{"r0-n-1", "r0-n-2", "r0-n-3", "r1-n-1"}},
		},
		"preferred rack is used when one fits": {
			busy: []string{"r0-n-0"},
			job:  build.Job("a").Pods(4).GPUs(8).Preferred("rack").Obj(),
			want: outcome{Placed: true, Level: "rack", Domain: "r1", Nodes: []string{"r1-n-0", "r1-n-1", "r1-n-2", "r1-n-3"}},
		},
		"small pods share one node before spilling": {
			job:  build.Job("a").Pods(4).GPUs(2).Obj(),
			want: outcome{Placed: true, Level: "host", Domain: "r0-n-0", Nodes: []string{"r0-n-0"}},
		},
		"a gang larger than the cluster never fits": {
			job:  build.Job("a").Pods(9).GPUs(8).Obj(),
			want: outcome{Verdict: placement.NeverFits},
		},
		"a 9-GPU pod on 8-GPU nodes never fits": {
			job:  build.Job("a").GPUs(9).Obj(),
			want: outcome{Verdict: placement.NeverFits},
		},
		"a gang larger than any rack never fits with a required rack": {
			job:  build.Job("a").Pods(5).GPUs(8).Required("rack").Obj(),
			want: outcome{Verdict: placement.NeverFits},
		},
		"an unknown level is reported, not guessed": {
			job:  build.Job("a").Pods(2).GPUs(8).Required("spine").Obj(),
			want: outcome{Verdict: placement.NeverFits},
		},
		"an unknown GPU model never fits": {
			job:  build.Job("a").GPUs(1).Models("B200").Obj(),
			want: outcome{Verdict: placement.NeverFits},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(2, 4))
			occupy(t, s, tc.busy...)
			got := outcomeOf(runCycle(s, Corral, tc.job), tc.job.ID)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGangIsAllOrNothing(t *testing.T) {
	// Three free nodes, two gangs of two 8-GPU pods: exactly one gang runs,
	// the other waits whole; the baselines start both partly.
	s := build.State(build.Topo("rack"), build.Racks(1, 3))
	a := build.Job("a").Pods(2).GPUs(8).Obj()
	b := build.Job("b").Pods(2).GPUs(8).Submit(1).Obj()
	plan := runCycle(s, Corral, a, b)
	if got := outcomeOf(plan, "a"); !got.Placed || len(got.Nodes) != 2 {
		t.Errorf("gang a: want placed on 2 nodes, got %+v", got)
	}
	if got := outcomeOf(plan, "b"); got.Placed || got.Verdict != placement.WaitFree {
		t.Errorf("gang b: want waiting whole, got %+v", got)
	}
	pods := 0
	for _, bind := range plan.Binds {
		pods += len(bind.Pods)
	}
	if pods != 2 {
		t.Errorf("corral bound %d pods, want 2", pods)
	}

	spread := runCycle(build.State(build.Topo("rack"), build.Racks(1, 3)), Spread, a, b)
	partial := 0
	for _, bind := range spread.Binds {
		if len(bind.Pods) < 2 {
			partial++
		}
	}
	if partial != 1 {
		t.Errorf("spread: want one partially started gang, got %d (binds %+v)", partial, spread.Binds)
	}
}

func TestReasonsNameTheLevel(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(2, 4))
	occupy(t, s, "r0-n-0", "r1-n-0")
	j := build.Job("a").Pods(4).GPUs(8).Required("rack").Obj()
	plan := runCycle(s, Corral, j)
	if len(plan.Pending) != 1 {
		t.Fatalf("want 1 pending, got %+v", plan)
	}
	msg := plan.Pending[0].Reason.Message
	for _, want := range []string{"no rack", "best rack", "fits 3 of 4", "24 GPUs free"} {
		if !strings.Contains(msg, want) {
			t.Errorf("reason %q does not say %q", msg, want)
		}
	}

	never := runCycle(s, Corral, build.Job("b").GPUs(9).Obj())
	if msg := never.Pending[0].Reason.Message; !strings.Contains(msg, "largest node has 8") {
		t.Errorf("reason %q does not name the largest node", msg)
	}
}

func TestDeviceSets(t *testing.T) {
	type pod struct {
		gpus, milli int
	}
	cases := map[string]struct {
		before []pod // placed first, one cycle each
		pod    pod
		want   []string
	}{
		"two GPUs share a PCIe switch":            {pod: pod{gpus: 2}, want: []string{"gpu0", "gpu1"}},
		"four GPUs share a NUMA node":             {pod: pod{gpus: 4}, want: []string{"gpu0", "gpu1", "gpu2", "gpu3"}},
		"a single GPU goes next to a used one":    {before: []pod{{gpus: 1}}, pod: pod{gpus: 1}, want: []string{"gpu1"}},
		"a pair avoids a broken switch":           {before: []pod{{gpus: 1}}, pod: pod{gpus: 2}, want: []string{"gpu2", "gpu3"}},
		"four GPUs keep to the untouched NUMA":    {before: []pod{{gpus: 1}}, pod: pod{gpus: 4}, want: []string{"gpu4", "gpu5", "gpu6", "gpu7"}},
		"fractions pack onto a used GPU":          {before: []pod{{milli: 500}}, pod: pod{milli: 300}, want: []string{"gpu0"}},
		"a fraction that no longer fits moves on": {before: []pod{{milli: 500}}, pod: pod{milli: 600}, want: []string{"gpu1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo(), build.Node().Name("n").Times(1))
			place := func(id string, p pod) []string {
				b := build.Job(id).GPUs(p.gpus)
				if p.milli > 0 {
					b = b.Milli(p.milli)
				}
				plan := runCycle(s, Corral, b.Obj())
				if len(plan.Binds) != 1 {
					t.Fatalf("%s not placed: %+v", id, plan.Pending)
				}
				pb := plan.Binds[0].Pods[0]
				if err := s.Allocate(pb.NodeIndex, pb.Alloc); err != nil {
					t.Fatal(err)
				}
				return pb.Devices
			}
			for i, p := range tc.before {
				place(string(rune('a'+i)), p)
			}
			got := place("z", tc.pod)
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNICsFollowTheDevices(t *testing.T) {
	s := build.State(build.Topo(), build.Node().Name("n").Times(1))
	plan := runCycle(s, Corral, build.Job("a").GPUs(2).Obj())
	if diff := cmp.Diff([]string{"mlx5_0", "mlx5_1"}, plan.Binds[0].Pods[0].NICs); diff != "" {
		t.Errorf("NICs (-want +got):\n%s", diff)
	}
}

func TestCycleIsDeterministic(t *testing.T) {
	var jobs []*workload.Job
	for i := 0; i < 40; i++ {
		b := build.Job(string(rune('A'+i%26)) + string(rune('a'+i/26))).Submit(int64(i % 7))
		switch i % 4 {
		case 0:
			b = b.Pods(3).GPUs(8).Required("rack")
		case 1:
			b = b.GPUs(2)
		case 2:
			b = b.Milli(250)
		default:
			b = b.Pods(2).GPUs(4).Priority(5)
		}
		jobs = append(jobs, b.Obj())
	}
	for _, policy := range Policies {
		t.Run(string(policy), func(t *testing.T) {
			run := func() Plan {
				s := build.State(build.Topo("block", "rack"), build.Racks(4, 4))
				mix := placement.MixCounter{}
				for _, j := range jobs {
					mix.Observe(j.PodSets[0].Request, j.Pods())
				}
				snap := &Snapshot{State: s, Mix: mix.Mix(0)}
				for _, j := range jobs {
					snap.Pending = append(snap.Pending, PendingJob{Job: j})
				}
				return New(Config{Policy: policy}).Cycle(snap)
			}
			first := run()
			for i := 0; i < 3; i++ {
				if diff := cmp.Diff(first, run()); diff != "" {
					t.Fatalf("run %d differs (-first +again):\n%s", i+2, diff)
				}
			}
		})
	}
}

func TestCycleNeverDoubleBooks(t *testing.T) {
	// Many jobs against little capacity: every device's milli sums to at most
	// 1000 across the plan.
	s := build.State(build.Topo("rack"), build.Racks(2, 2))
	var jobs []*workload.Job
	for i := 0; i < 30; i++ {
		b := build.Job(string(rune('a' + i)))
		switch i % 3 {
		case 0:
			b = b.GPUs(3)
		case 1:
			b = b.Milli(700)
		default:
			b = b.Pods(2).GPUs(4)
		}
		jobs = append(jobs, b.Obj())
	}
	for _, policy := range Policies {
		plan := runCycle(s, policy, jobs...)
		used := map[string]int32{}
		for _, b := range plan.Binds {
			for _, p := range b.Pods {
				for i, d := range p.Alloc.Devices {
					used[p.Node+"/"+p.Devices[i]] += d.Milli
				}
			}
		}
		for dev, m := range used {
			if m > 1000 {
				t.Errorf("%s: device %s booked %dm", policy, dev, m)
			}
		}
		// The plan must also apply cleanly to the real state.
		c := s.Clone()
		for _, b := range plan.Binds {
			for _, p := range b.Pods {
				if err := c.Allocate(p.NodeIndex, p.Alloc); err != nil {
					t.Errorf("%s: plan does not apply: %v", policy, err)
				}
			}
		}
	}
}

func TestDeviceScopeIsARequirement(t *testing.T) {
	// One GPU free on each PCIe switch: a pair that must share a switch
	// waits; an unconstrained pair is placed.
	s := build.State(build.Topo(), build.Node().Name("n").Times(1))
	for _, k := range []int{0, 2, 4, 6} {
		if err := s.Allocate(0, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: k, Milli: 1000}}}); err != nil {
			t.Fatal(err)
		}
	}
	scoped := build.Job("scoped").GPUs(2).Scope(workload.ScopePCIe).Obj()
	if got := outcomeOf(runCycle(s, Corral, scoped), "scoped"); got.Placed || got.Verdict != placement.WaitFree {
		t.Errorf("scoped pair: want waiting, got %+v", got)
	}
	free := build.Job("free").GPUs(2).Obj()
	if got := outcomeOf(runCycle(s, Corral, free), "free"); !got.Placed {
		t.Errorf("unconstrained pair: want placed, got %+v", got)
	}
	empty := build.State(build.Topo(), build.Node().Name("n").Times(1))
	plan := runCycle(empty, Corral, scoped)
	if len(plan.Binds) != 1 || plan.Binds[0].Pods[0].Devices[0] != "gpu0" || plan.Binds[0].Pods[0].Devices[1] != "gpu1" {
		t.Errorf("scoped pair on an empty node: %+v", plan)
	}
}

func TestDRAAndExtendedGPUsAreSeparate(t *testing.T) {
	// One node publishes its GPUs through DRA (model prefix "dra:"), the
	// other as the extended resource: each kind of request lands on its own.
	dra := build.Node().Name("dra").Model(placement.DRAModelPrefix + "H100").Obj()
	ext := build.Node().Name("ext").Model("H100").Obj()
	s := build.State(build.Topo(), []cluster.Node{dra, ext})
	claim := build.Job("claim").GPUs(2).Obj()
	claim.PodSets[0].Request.DRA = true
	plain := build.Job("plain").GPUs(2).Obj()
	plan := runCycle(s, Corral, claim, plain)
	if got := outcomeOf(plan, "claim"); !got.Placed || got.Nodes[0] != "dra" {
		t.Errorf("DRA request: %+v", got)
	}
	if got := outcomeOf(plan, "plain"); !got.Placed || got.Nodes[0] != "ext" {
		t.Errorf("extended-resource request: %+v", got)
	}
	// With no DRA GPUs at all, a claim never fits, and says why.
	only := build.State(build.Topo(), []cluster.Node{ext})
	p := runCycle(only, Corral, claim)
	if len(p.Pending) != 1 || p.Pending[0].Reason.Verdict != placement.NeverFits ||
		!strings.Contains(p.Pending[0].Reason.Message, "DRA") {
		t.Errorf("claim on a cluster without DRA GPUs: %+v", p)
	}
}

func TestNodeSelectorIsHonoured(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(2, 2))
	j := build.Job("a").GPUs(8).Obj()
	j.PodSets[0].Request.NodeLabels = map[string]string{build.LabelPrefix + "rack": "r1"}
	if got := outcomeOf(runCycle(s, Corral, j), "a"); !got.Placed || !strings.HasPrefix(got.Nodes[0], "r1-") {
		t.Errorf("selector rack r1: %+v", got)
	}
	j.PodSets[0].Request.NodeLabels = map[string]string{build.LabelPrefix + "rack": "r9"}
	if got := outcomeOf(runCycle(s, Corral, j), "a"); got.Placed || got.Verdict != placement.NeverFits {
		t.Errorf("selector matching no node: %+v", got)
	}
}

func TestPartlyBoundGangThatCanNeverFitIsReported(t *testing.T) {
	// Two of three 8-GPU pods are bound on a two-node cluster: the third
	// would fit an empty node, but the gang as a whole never can.
	s := build.State(build.Topo(), build.Node().Name("n").Times(2))
	occupy(t, s, "n-0", "n-1")
	j := build.Job("g").Pods(3).GPUs(8).Obj()
	snap := &Snapshot{State: s, Pending: []PendingJob{{Job: j, Waiting: []workload.PodRef{{Job: "g", PodSet: 0, Index: 2}}}}}
	plan := New(Config{}).Cycle(snap)
	if len(plan.Pending) != 1 || plan.Pending[0].Reason.Verdict != placement.NeverFits {
		t.Fatalf("want the whole gang reported as never fitting, got %+v", plan)
	}
}

func TestDeviceFiltersAreNotOneShape(t *testing.T) {
	// Two jobs of one shape whose DRA filters allow different devices: the
	// first cannot fit (its device is taken), which must not fail the second
	// through the cycle's failed-shape cache.
	s := build.State(build.Topo(), []cluster.Node{build.Node().Name("dra").Model(placement.DRAModelPrefix + "H100").Obj()})
	if err := s.Allocate(0, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 0, Milli: 1000}}}); err != nil {
		t.Fatal(err)
	}
	only := func(id, dev string) *workload.Job {
		j := build.Job(id).Submit(map[string]int64{"gpu0": 1, "gpu5": 2}[dev]).Obj()
		j.PodSets[0].Request.DRA = true
		j.PodSets[0].Request.Devices = &workload.DeviceFilter{Key: dev, Groups: map[string][][]string{"dra": {{dev}}}}
		return j
	}
	plan := runCycle(s, Corral, only("first", "gpu0"), only("second", "gpu5"))
	if got := outcomeOf(plan, "first"); got.Placed || got.Verdict != placement.WaitFree {
		t.Errorf("first (its one device taken): %+v", got)
	}
	if got := outcomeOf(plan, "second"); !got.Placed {
		t.Errorf("second (its device free): %+v, plan %+v", got, plan.Pending)
	}
}
