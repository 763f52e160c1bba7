package placement

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

func TestPlaceGangNodeEligibility(t *testing.T) {
	taint := workload.Exclusion{Nodes: 6, Cause: "have taint nvidia.com/gpu=present:NoSchedule that the pod does not tolerate"}
	names := func(prefix string, idx ...int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, prefix+"-n-"+string(rune('0'+i)))
		}
		return out
	}
	cat := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	cases := map[string]struct {
		job *workload.Job
		// want: the nodes used (sorted) and the domain holding the gang.
		want       []string
		wantDomain string
		failed     string
	}{
		"a gang spans racks over eligible nodes only": {
			job:  build.Job("a").Pods(6).GPUs(8).Nodes("f", cat(names("r0", 0, 1), names("r2", 0, 1, 2, 3)), taint).Obj(),
			want: cat(names("r0", 0, 1), names("r2", 0, 1, 2, 3)), wantDomain: "cluster",
		},
		"the tightest rack counts eligible nodes, not free GPUs": {
			// r0 is first in topology order and as free as r1, but only two
			// of its nodes are eligible.
			job:  build.Job("b").Pods(3).GPUs(8).Nodes("f", cat(names("r0", 0, 1), names("r1", 0, 1, 2, 3)), taint).Obj(),
			want: names("r1", 0, 1, 2), wantDomain: "r1",
		},
		"an unconstrained gang takes the first rack": {
			job:  build.Job("c").Pods(3).GPUs(8).Obj(),
			want: names("r0", 0, 1, 2), wantDomain: "r0",
		},
		"a required rack with too few eligible nodes never fits, and says why": {
			job: build.Job("d").Pods(3).GPUs(8).Required("rack").
				Nodes("f", cat(names("r0", 0, 1), names("r1", 0, 1)), workload.Exclusion{Nodes: 8, Cause: taint.Cause}).Obj(),
			failed: "any rack could never hold 3×[8 GPU on 4 eligible nodes, 1 CPU, 1 GiB]: the largest rack (r0) holds 2 of 3 pods when empty; " +
				"8 nodes have taint nvidia.com/gpu=present:NoSchedule that the pod does not tolerate",
		},
		"no eligible node names the taint": {
			job: build.Job("e").Pods(1).GPUs(1).Nodes("none", nil, workload.Exclusion{Nodes: 12, Cause: taint.Cause}).Obj(),
			failed: "no node could ever hold one pod of 1 GPU on 0 eligible nodes, 1 CPU, 1 GiB: " +
				"12 nodes have taint nvidia.com/gpu=present:NoSchedule that the pod does not tolerate",
		},
		"hostname anti-affinity: one replica per node, packed in one rack": {
			job:  build.Job("f").Pods(4).GPUs(2).Apart(HostnameLabel).Obj(),
			want: names("r0", 0, 1, 2, 3), wantDomain: "r0",
		},
		"rack anti-affinity: one replica per rack": {
			job:  build.Job("g").Pods(3).GPUs(1).Apart(build.LabelPrefix + "rack").Obj(),
			want: []string{"r0-n-0", "r1-n-0", "r2-n-0"}, wantDomain: "cluster",
		},
		"rack anti-affinity over eligible nodes only": {
			job: build.Job("h").Pods(2).GPUs(1).Apart(build.LabelPrefix+"rack").
				Nodes("f", cat(names("r1", 3), names("r2", 2)), taint).Obj(),
			want: []string{"r1-n-3", "r2-n-2"}, wantDomain: "cluster",
		},
		"more replicas than racks never fits": {
			job:    build.Job("i").Pods(4).GPUs(1).Apart(build.LabelPrefix + "rack").Obj(),
			failed: "4×[1 GPU, one per corral.dev/rack, 1 CPU, 1 GiB] could never be placed: its pod anti-affinity puts 4 pods on distinct values of corral.dev/rack, but the nodes it may use have 3",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nodes := build.Racks(3, 4)
			for i := range nodes {
				nodes[i].Labels[HostnameLabel] = nodes[i].Name
			}
			s := build.State(build.Topo("rack"), nodes)
			g := Gang{Required: -1, Preferred: -1}
			if tc.job.Topology.Required != "" {
				g.Required = s.LevelIndex(tc.job.Topology.Required)
			}
			tc.job.EachPod(func(ref workload.PodRef, r workload.Request) {
				pr, _ := Resolve(s, ref, r)
				g.Pods = append(g.Pods, pr)
			})
			res := NewPlacer(s, MostAllocated(), Interconnect).PlaceGang(g)
			if tc.failed != "" {
				if res.Failure == nil {
					t.Fatalf("placed %+v, want failure", res.Assignments)
				}
				if diff := cmp.Diff(tc.failed, res.Failure.Message); diff != "" {
					t.Errorf("failure (-want +got):\n%s", diff)
				}
				if res.Failure.Verdict != NeverFits {
					t.Errorf("verdict %v, want NeverFits", res.Failure.Verdict)
				}
				return
			}
			if res.Failure != nil {
				t.Fatalf("failed: %s", res.Failure.Message)
			}
			var got []string
			for _, a := range res.Assignments {
				got = append(got, s.Node(a.Node).Name)
			}
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			domain := cluster.LevelCluster
			if res.Level > 0 {
				domain = s.Domain(res.Domain).Name
			}
			if domain != tc.wantDomain {
				t.Errorf("domain %s, want %s", domain, tc.wantDomain)
			}
		})
	}
}

// TestEligibilityOracle places random constrained gangs on small clusters
// and checks every placement against the filter and the anti-affinity, and
// every "never" against a count of what the eligible nodes hold.
func TestEligibilityOracle(t *testing.T) {
	nodes := build.Racks(3, 3)
	for i := range nodes {
		nodes[i].Labels[HostnameLabel] = nodes[i].Name
	}
	for seed := 0; seed < 300; seed++ {
		s := build.State(build.Topo("rack"), nodes)
		var eligible []string
		for i, n := range nodes {
			if (seed>>uint(i%9))&1 == 1 || (seed*7+i)%5 == 0 {
				eligible = append(eligible, n.Name)
			}
		}
		pods, gpus := 1+seed%5, 1<<uint(seed%4)
		jb := build.Job("j").Pods(pods).GPUs(gpus).Nodes(strings.Join(eligible, ","), eligible)
		if seed%3 == 0 {
			jb.Apart(HostnameLabel)
		}
		job := jb.Obj()
		g := Gang{Required: -1, Preferred: -1}
		job.EachPod(func(ref workload.PodRef, r workload.Request) {
			pr, _ := Resolve(s, ref, r)
			g.Pods = append(g.Pods, pr)
		})
		res := NewPlacer(s, MostAllocated(), Interconnect).PlaceGang(g)
		ok := map[string]bool{}
		for _, n := range eligible {
			ok[n] = true
		}
		// What the eligible nodes could hold: 8 GPUs each, one pod each
		// with hostname anti-affinity.
		perNode := 8 / gpus
		if seed%3 == 0 {
			perNode = 1
		}
		fits := len(eligible)*perNode >= pods
		if res.Failure != nil {
			if fits {
				t.Errorf("seed %d: %d pods of %d GPUs on %d eligible nodes failed: %s", seed, pods, gpus, len(eligible), res.Failure.Message)
			}
			continue
		}
		if !fits {
			t.Errorf("seed %d: placed more than the eligible nodes hold", seed)
		}
		used := map[string]bool{}
		for _, a := range res.Assignments {
			name := s.Node(a.Node).Name
			if !ok[name] {
				t.Errorf("seed %d: pod on ineligible node %s", seed, name)
			}
			if seed%3 == 0 && used[name] {
				t.Errorf("seed %d: two replicas on %s despite anti-affinity", seed, name)
			}
			used[name] = true
		}
	}
}

// BenchmarkPlaceGangEligible: one 16×8-GPU gang on 1,024 DGX nodes (32
// racks of 32, half of each rack busy), without a filter, with a filter
// whose racks are wholly in or out (a tainted pool), and with a filter that
// takes every other node (every rack partly eligible: the node walk).
func BenchmarkPlaceGangEligible(b *testing.B) {
	nodes := build.Racks(32, 32)
	var pool, alternate []string
	for i, n := range nodes {
		n.Labels[HostnameLabel] = n.Name
		if i/32%2 == 0 {
			pool = append(pool, n.Name)
		}
		if i%2 == 0 {
			alternate = append(alternate, n.Name)
		}
	}
	s := build.State(build.Topo("rack"), nodes)
	for n := 0; n < s.NumNodes(); n++ {
		if n%32 >= 16 {
			all := cluster.Alloc{}
			for k := 0; k < 8; k++ {
				all.Devices = append(all.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
			}
			if err := s.Allocate(n, all); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, bc := range []struct {
		name string
		job  *workload.Job
	}{
		{"none", build.Job("j").Pods(16).GPUs(8).Obj()},
		{"whole-racks", build.Job("j").Pods(16).GPUs(8).Nodes("pool", pool).Obj()},
		{"every-other-node", build.Job("j").Pods(16).GPUs(8).Nodes("alt", alternate).Obj()},
		{"hostname-apart", build.Job("j").Pods(16).GPUs(1).Apart(HostnameLabel).Obj()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				g := Gang{Required: -1, Preferred: -1}
				bc.job.EachPod(func(ref workload.PodRef, r workload.Request) {
					pr, _ := Resolve(s, ref, r)
					g.Pods = append(g.Pods, pr)
				})
				p := NewPlacer(s, MostAllocated(), Interconnect)
				if res := p.PlaceGang(g); res.Failure != nil {
					b.Fatal(res.Failure.Message)
				}
				p.Undo() // the next round starts from the same state
			}
		})
	}
}
