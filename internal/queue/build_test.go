package queue

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuild(t *testing.T) {
	cases := map[string]struct {
		specs  []Spec
		want   []Problem
		queues []string // Queues() of the tree: what survived
		leaves []string
	}{
		"a valid tree": {
			specs: specs(
				q("org").Guarantee(h100, gpus(16)),
				q("b").Parent("org").Guarantee(h100, gpus(8)),
				q("a").Parent("org").Guarantee(h100, gpus(8)).Limit(h100, gpus(20)),
				q("c").Parent("root"),
			),
			queues: []string{"c", "org", "a", "b"},
			leaves: []string{"c", "a", "b"},
		},
		"unknown parent, with its subtree": {
			specs: specs(q("a").Parent("nope"), q("x").Parent("a"), q("ok")),
			want: []Problem{
				{"a", `unknown parent "nope"`},
				{"x", `left out with its ancestor "a", which is invalid`},
			},
			queues: []string{"ok"},
		},
		"a cycle names every queue on it": {
			specs: specs(q("b").Parent("c"), q("c").Parent("a"), q("a").Parent("b"), q("d").Parent("a"), q("ok")),
			want: []Problem{
				{"a", "parent cycle: a -> b -> c -> a"},
				{"b", "parent cycle: a -> b -> c -> a"},
				{"c", "parent cycle: a -> b -> c -> a"},
				{"d", `left out with its ancestor "a", which is invalid`},
			},
			queues: []string{"ok"},
		},
		"a queue hanging off a cycle": {
			specs: specs(q("a").Parent("z"), q("z").Parent("y"), q("y").Parent("z")),
			want: []Problem{
				{"a", `left out with its ancestor "z", which is invalid`},
				{"y", "parent cycle: y -> z -> y"},
				{"z", "parent cycle: y -> z -> y"},
			},
		},
		"a queue that is its own parent": {
			specs:  specs(q("a").Parent("a"), q("ok")),
			want:   []Problem{{"a", "parent cycle: a -> a"}},
			queues: []string{"ok"},
		},
		"duplicate names: every copy is left out": {
			specs: specs(q("a").Guarantee(h100, 1), q("a"), q("x").Parent("a"), q("ok")),
			want: []Problem{
				{"a", "defined 2 times"},
				{"x", `left out with its ancestor "a", which is invalid`},
			},
			queues: []string{"ok"},
		},
		"negative amounts": {
			specs: specs(q("a").Guarantee(h100, -1000).Limit(CPU, -5), q("ok")),
			want: []Problem{
				{"a", "negative guarantee of gpu/H100: -1 H100 GPUs"},
				{"a", "negative limit of cpu: -5m CPU"},
			},
			queues: []string{"ok"},
		},
		"limit below guarantee": {
			specs:  specs(q("a").Guarantee(h100, gpus(8)).Limit(h100, gpus(4)), q("ok")),
			want:   []Problem{{"a", "limit of gpu/H100 (4 H100 GPUs) is below its guarantee (8 H100 GPUs)"}},
			queues: []string{"ok"},
		},
		"limit below guarantee: GPUs of any model, a million cores, memory in GiB when whole": {
			specs: specs(q("a").Guarantee("gpu", gpus(8)).Limit("gpu", 4500),
				q("b").Guarantee(CPU, 2_000_000_000).Limit(CPU, 1_000_000_000),
				q("c").Guarantee(Memory, 128*1024).Limit(Memory, 64*1024+512), q("ok")),
			want: []Problem{
				{"a", "limit of gpu (4.5 GPUs) is below its guarantee (8 GPUs)"},
				{"b", "limit of cpu (1000000 CPU) is below its guarantee (2000000 CPU)"},
				{"c", "limit of memory (66048 MiB) is below its guarantee (128 GiB)"},
			},
			queues: []string{"ok"},
		},
		"children's guarantees above the parent's": {
			specs: specs(
				q("org").Guarantee(h100, gpus(10)),
				q("a").Parent("org").Guarantee(h100, gpus(8)),
				q("b").Parent("org").Guarantee(h100, gpus(8)).Guarantee(CPU, 1),
				q("ok"),
			),
			want: []Problem{
				{"a", `left out with its ancestor "org", which is invalid`},
				{"b", `left out with its ancestor "org", which is invalid`},
				{"org", "children's guarantees of cpu add up to 1m CPU (b 1m CPU), above its own guarantee of 0 CPU; " +
					"children's guarantees of gpu/H100 add up to 16 H100 GPUs (a 8 H100 GPUs, b 8 H100 GPUs), above its own guarantee of 10 H100 GPUs"},
			},
			queues: []string{"ok"},
		},
		"an overcommitted queue deeper down keeps its valid ancestors": {
			specs: specs(
				q("org").Guarantee(h100, gpus(16)),
				q("team").Parent("org").Guarantee(h100, gpus(4)),
				q("x").Parent("team").Guarantee(h100, gpus(8)),
				q("y").Parent("org").Guarantee(h100, gpus(8)),
			),
			want: []Problem{
				{"team", "children's guarantees of gpu/H100 add up to 8 H100 GPUs (x 8 H100 GPUs), above its own guarantee of 4 H100 GPUs"},
				{"x", `left out with its ancestor "team", which is invalid`},
			},
			queues: []string{"org", "y"},
			leaves: []string{"y"},
		},
		"inner queues take no namespaces or priority": {
			specs: specs(
				q("org").Namespaces("ns-a"),
				q("a").Parent("org"),
				q("org2").Priority(5),
				q("b").Parent("org2"),
			),
			want: []Problem{
				{"a", `left out with its ancestor "org", which is invalid`},
				{"b", `left out with its ancestor "org2", which is invalid`},
				{"org", "an inner queue cannot list namespaces: only leaf queues take jobs"},
				{"org2", "an inner queue cannot set priority (5): priority orders leaf queues"},
			},
		},
		"names: empty and reserved": {
			specs: specs(q(""), q("root"), q("x").Parent("root")),
			want: []Problem{
				{"", `a queue needs a name (parent "root")`},
				{"root", `the name "root" is reserved for the implicit root`},
			},
			queues: []string{"x"},
		},
		"bad weights and resource names": {
			specs: specs(
				q("a").WeightOf(h100, 0),
				q("b").WeightOf(CPU, math.NaN()),
				q("c").Guarantee(AllResources, 1),
				q("d").Limit("", 1),
				q("ok").Weight(3),
			),
			want: []Problem{
				{"a", "weight gpu/H100=0 must be a positive finite number"},
				{"b", "weight cpu=NaN must be a positive finite number"},
				{"c", `"*" is only a weight key, not a guarantee resource`},
				{"d", "limit names an empty resource"},
			},
			queues: []string{"ok"},
		},
		"an inner queue whose children are all invalid stays inner": {
			specs:  specs(q("org"), q("a").Parent("org").Guarantee(h100, -1)),
			want:   []Problem{{"a", "negative guarantee of gpu/H100: -0.001 H100 GPUs"}},
			queues: []string{"org"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tree, got := Build(tc.specs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.queues, tree.Queues()); diff != "" {
				t.Errorf("queues (-want +got):\n%s", diff)
			}
			if tc.leaves != nil {
				if diff := cmp.Diff(tc.leaves, tree.Leaves()); diff != "" {
					t.Errorf("leaves (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestBuildCopiesSpecs(t *testing.T) {
	in := specs(q("a").Guarantee(h100, gpus(8)).Namespaces("ns"))
	tree, _ := Build(in)
	in[0].Guarantee[h100] = 1
	in[0].Namespaces[0] = "other"
	s, _ := tree.Spec("a")
	if s.Guarantee[h100] != gpus(8) || s.Namespaces[0] != "ns" || s.Parent != RootName {
		t.Errorf("tree changed with its input: %+v", s)
	}
}

func TestReclaims(t *testing.T) {
	strictOnly := q("solo") // StrictReclaim alone implies Reclaim
	strictOnly.s.StrictReclaim = true
	tree, _ := Build(specs(q("org").Reclaim(), q("a").Parent("org"), q("b"), q("lab").Strict(), q("c").Parent("lab"), strictOnly))
	for queue, want := range map[string][2]bool{ // Reclaims, StrictReclaim
		"org": {true, false}, "a": {true, false}, "b": {false, false},
		"lab": {true, true}, "c": {true, true}, "solo": {true, true}, "nope": {false, false},
	} {
		if got := [2]bool{tree.Reclaims(queue), tree.StrictReclaim(queue)}; got != want {
			t.Errorf("%q: Reclaims, StrictReclaim = %v, want %v", queue, got, want)
		}
	}
}
