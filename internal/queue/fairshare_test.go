package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFairShare(t *testing.T) {
	teams := func(wa, wb float64) []Spec { // the worked example of docs/queues.md
		return specs(
			q("team-a").Guarantee(h100, gpus(16)).Weight(wa),
			q("team-b").Guarantee(h100, gpus(16)).Weight(wb),
		)
	}
	cases := map[string]struct {
		specs    []Spec
		capacity Amounts
		demand   map[string]Amounts
		want     map[string]Amounts
	}{
		"the worked example: guarantees first, the spare 8 split 1:3": {
			specs:    teams(1, 3),
			capacity: Amounts{h100: gpus(40)},
			demand:   map[string]Amounts{"team-a": {h100: gpus(30)}, "team-b": {h100: gpus(30)}},
			want:     map[string]Amounts{"team-a": {h100: gpus(18)}, "team-b": {h100: gpus(22)}},
		},
		"a capped child hands on what it leaves": {
			specs:    teams(1, 3),
			capacity: Amounts{h100: gpus(40)},
			demand:   map[string]Amounts{"team-a": {h100: gpus(30)}, "team-b": {h100: gpus(20)}},
			want:     map[string]Amounts{"team-a": {h100: gpus(20)}, "team-b": {h100: gpus(20)}},
		},
		"unused guarantee is lent": {
			specs:    teams(1, 3),
			capacity: Amounts{h100: gpus(40)},
			demand:   map[string]Amounts{"team-a": {h100: gpus(10)}, "team-b": {h100: gpus(30)}},
			want:     map[string]Amounts{"team-a": {h100: gpus(10)}, "team-b": {h100: gpus(30)}},
		},
		"a limit caps the share and the rest goes to the sibling": {
			specs: specs(
				q("team-a").Guarantee(h100, gpus(16)),
				q("team-b").Guarantee(h100, gpus(16)).Weight(3).Limit(h100, gpus(20)),
			),
			capacity: Amounts{h100: gpus(40)},
			demand:   map[string]Amounts{"team-a": {h100: gpus(30)}, "team-b": {h100: gpus(30)}},
			want:     map[string]Amounts{"team-a": {h100: gpus(20)}, "team-b": {h100: gpus(20)}},
		},
		"what nobody asks for stays unallocated": {
			specs:    teams(1, 1),
			capacity: Amounts{h100: gpus(40)},
			demand:   map[string]Amounts{"team-a": {h100: gpus(10)}},
			want:     map[string]Amounts{"team-a": {h100: gpus(10)}, "team-b": {}},
		},
		"level by level: the org's share is divided among its teams": {
			specs: specs(
				q("org").Guarantee(h100, gpus(24)),
				q("x").Parent("org").Guarantee(h100, gpus(16)),
				q("y").Parent("org").Guarantee(h100, gpus(8)),
				q("other").Guarantee(h100, gpus(8)),
			),
			capacity: Amounts{h100: gpus(48)},
			demand: map[string]Amounts{
				"x": {h100: gpus(30)}, "y": {h100: gpus(10)}, "other": {h100: gpus(30)},
				"org": {h100: gpus(100)}, "nope": {h100: gpus(100)}, // ignored: inner and unknown
			},
			want: map[string]Amounts{
				"org": {h100: gpus(32)}, "x": {h100: gpus(22)}, "y": {h100: gpus(10)},
				"other": {h100: gpus(16)},
			},
		},
		"capacity below the guarantees: divided in proportion to them": {
			specs: specs(
				q("team-a").Guarantee(h100, gpus(24)),
				q("team-b").Guarantee(h100, gpus(8)),
			),
			capacity: Amounts{h100: gpus(16)},
			demand:   map[string]Amounts{"team-a": {h100: gpus(30)}, "team-b": {h100: gpus(30)}},
			want:     map[string]Amounts{"team-a": {h100: gpus(12)}, "team-b": {h100: gpus(4)}},
		},
		"each resource on its own, with its own weights": {
			specs: specs(
				q("team-a").WeightOf(h100, 3),
				q("team-b"),
			),
			capacity: Amounts{h100: gpus(8), CPU: 8000, Memory: 0},
			demand: map[string]Amounts{
				"team-a": {h100: gpus(8), CPU: 8000, Memory: 10},
				"team-b": {h100: gpus(8), CPU: 8000, "example.com/fpga": 1},
			},
			want: map[string]Amounts{
				"team-a": {h100: gpus(6), CPU: 4000},
				"team-b": {h100: gpus(2), CPU: 4000},
			},
		},
		"units rounding leaves go by remainder, then name": {
			specs:    specs(q("c"), q("a"), q("b")),
			capacity: Amounts{"example.com/fpga": 10},
			demand: map[string]Amounts{
				"a": {"example.com/fpga": 10}, "b": {"example.com/fpga": 10}, "c": {"example.com/fpga": 10},
			},
			want: map[string]Amounts{
				"a": {"example.com/fpga": 4}, "b": {"example.com/fpga": 3}, "c": {"example.com/fpga": 3},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tree, problems := Build(tc.specs)
			if len(problems) > 0 {
				t.Fatalf("Build: %v", problems)
			}
			got := tree.FairShare(tc.capacity, tc.demand)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FairShare (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProportional(t *testing.T) {
	cases := map[string]struct {
		total int64
		claim []int64
		want  []int64
	}{
		"exact":                       {total: 16, claim: []int64{24, 8}, want: []int64{12, 4}},
		"remainders, then first":      {total: 10, claim: []int64{5, 5, 5}, want: []int64{4, 3, 3}},
		"largest remainder first":     {total: 5, claim: []int64{1, 2, 4}, want: []int64{1, 1, 3}},
		"nothing to divide":           {total: 0, claim: []int64{3, 4}, want: []int64{0, 0}},
		"no overflow on large values": {total: 1 << 61, claim: []int64{1 << 61, 1 << 61}, want: []int64{1 << 60, 1 << 60}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var sum int64
			for _, c := range tc.claim {
				sum += c
			}
			if diff := cmp.Diff(tc.want, proportional(tc.total, tc.claim, sum)); diff != "" {
				t.Errorf("proportional (-want +got):\n%s", diff)
			}
		})
	}
}
