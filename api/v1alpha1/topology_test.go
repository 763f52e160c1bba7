package v1alpha1

import (
	"fmt"
	"strings"
	"testing"
)

// topo builds a Topology from name=label pairs.
func topo(pairs ...string) *Topology {
	t := &Topology{}
	for _, p := range pairs {
		name, label, _ := strings.Cut(p, "=")
		t.Spec.Levels = append(t.Spec.Levels, TopologyLevel{Name: name, NodeLabel: label})
	}
	return t
}

func levels(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("l%d=corral.dev/l%d", i, i)
	}
	return out
}

func TestTopologyValidate(t *testing.T) {
	cases := map[string]struct {
		topo *Topology
		want []string // substrings of the error, in any order; none: valid
	}{
		"block and rack":       {topo: topo("block=corral.dev/block", "rack=corral.dev/rack")},
		"nvlink domain":        {topo: topo("rack=corral.dev/rack", "nvlink-domain=nvidia.com/gpu.clique")},
		"label without prefix": {topo: topo("zone=zone")},
		"eight levels":         {topo: topo(levels(8)...)},
		"no levels":            {topo: topo(), want: []string{"spec.levels: Required value"}},
		"nine levels":          {topo: topo(levels(9)...), want: []string{"spec.levels: Too many: 9: must have at most 8 items"}},
		"cluster is reserved":  {topo: topo("cluster=corral.dev/c"), want: []string{`spec.levels[0].name: Invalid value: "cluster": the level names cluster and host are reserved`}},
		"host is reserved":     {topo: topo("rack=corral.dev/rack", "host=kubernetes.io/hostname"), want: []string{`spec.levels[1].name: Invalid value: "host"`}},
		"upper case name":      {topo: topo("Rack=corral.dev/rack"), want: []string{`spec.levels[0].name: Invalid value: "Rack"`}},
		"name too long":        {topo: topo(strings.Repeat("a", 64) + "=corral.dev/rack"), want: []string{"spec.levels[0].name", "must be no more than 63"}},
		"empty name":           {topo: topo("=corral.dev/rack"), want: []string{"spec.levels[0].name: Required value"}},
		"empty label":          {topo: topo("rack="), want: []string{"spec.levels[0].nodeLabel: Required value"}},
		"label with space":     {topo: topo("rack=corral.dev/my rack"), want: []string{`spec.levels[0].nodeLabel: Invalid value: "corral.dev/my rack"`}},
		"bad label prefix":     {topo: topo("rack=-corral.dev/rack"), want: []string{`spec.levels[0].nodeLabel: Invalid value: "-corral.dev/rack"`}},
		"label name too long":  {topo: topo("rack=corral.dev/" + strings.Repeat("r", 64)), want: []string{"spec.levels[0].nodeLabel", "must be no more than 63"}},
		"duplicate name": {
			topo: topo("rack=corral.dev/rack", "rack=corral.dev/rack2"),
			want: []string{`spec.levels[1].name: Duplicate value: "rack"`},
		},
		"duplicate label": {
			topo: topo("rack=corral.dev/rack", "row=corral.dev/rack"),
			want: []string{`spec.levels[1].nodeLabel: Duplicate value: "corral.dev/rack"`},
		},
		"every problem is listed": {
			topo: topo("host=", "host=a b"),
			want: []string{"spec.levels[0].name", "spec.levels[0].nodeLabel: Required", "spec.levels[1].nodeLabel: Invalid", "Duplicate"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.topo.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
