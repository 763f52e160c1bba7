package backfill

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
)

func TestResolvePools(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(2, 2), build.Node().Name("a100").Model("A100").Rack("r2").Times(2))
	cases := map[string]struct {
		pools        []Pool
		wantNodes    map[string][]string
		wantProblems []string
	}{
		"by label": {pools: []Pool{{Name: "p", Class: "c", NodeLabels: map[string]string{build.LabelPrefix + "rack": "r1"}}},
			wantNodes: map[string][]string{"p": {"r1-n-0", "r1-n-1"}}},
		"by GPU count of a model, whole nodes in topology order": {pools: []Pool{{Name: "p", Class: "c", GPUs: 12, Model: "A100"}},
			wantNodes: map[string][]string{"p": {"a100-0", "a100-1"}}},
		"a pool no node matches is named and left out": {pools: []Pool{{Name: "p", Class: "c", NodeLabels: map[string]string{build.LabelPrefix + "rack": "r9"}},
			{Name: "q", Class: "c", GPUs: 8, Model: "B200"}},
			wantNodes: map[string][]string{}, wantProblems: []string{"pool p: no node matches it", "pool q: no node matches it"}},
		"a pool larger than its model holds what there is, and says so": {pools: []Pool{{Name: "p", Class: "c", GPUs: 24, Model: "A100"}},
			wantNodes:    map[string][]string{"p": {"a100-0", "a100-1"}},
			wantProblems: []string{"pool p: holds 16 of its 24 GPUs (the cluster has no more of the model)"}},
		"bad pools are named and left out": {
			pools: []Pool{{Name: "ok", Class: "c", GPUs: 8}, {Name: "x", GPUs: 8}, {Name: "y", Class: "c"},
				{Name: "z", Class: "c", GPUs: 8, Others: "Sometimes"}},
			wantNodes: map[string][]string{"ok": {"r0-n-0"}},
			wantProblems: []string{`pool x: no class`, `pool y: give node labels or a GPU count`,
				`pool z: others "Sometimes" is neither Closed nor Preemptible`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, problems := Resolve(s, tc.pools)
			nodes := map[string][]string{}
			for _, p := range got {
				for _, n := range p.Nodes {
					nodes[p.Name] = append(nodes[p.Name], s.Node(n).Name)
				}
				if p.Others != PoolClosed {
					t.Errorf("pool %s: default access %q, want Closed", p.Name, p.Others)
				}
			}
			if diff := cmp.Diff(tc.wantNodes, nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantProblems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
