package health

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
)

func TestLowestCommon(t *testing.T) {
	s := build.State(build.Topo("block", "rack"), build.Node().Name("a").Block("b0").Rack("r0").Times(2),
		build.Node().Name("b").Block("b0").Rack("r1").Times(2), build.Node().Name("c").Block("b1").Rack("r2").Times(1))
	idx := func(name string) int { n, _ := s.NodeIndex(name); return n }
	name := func(d cluster.DomainID) string { return s.Domain(d).Name }
	cases := map[string]struct {
		nodes []string
		want  string
	}{
		"one rack":         {nodes: []string{"a-0", "a-1"}, want: "r0"},
		"one node: a rack": {nodes: []string{"a-1"}, want: "r0"},
		"two racks":        {nodes: []string{"a-0", "b-1"}, want: "b0"},
		"two blocks":       {nodes: []string{"a-0", "c-0"}, want: "cluster"},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			var ns []int
			for _, x := range tc.nodes {
				ns = append(ns, idx(x))
			}
			if got := name(LowestCommon(s, ns, s.HostLevel()-1)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSparesHoldWholeNodesAndComeBack(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(2, 2))
	want, problems := ExpandSpares(s, []Spare{{Level: "rack", GPUs: 8}, {Level: "rack", Domain: "r9", GPUs: 1}, {Level: "row", GPUs: 1}})
	if diff := cmp.Diff([]string{`spare: no rack named "r9"`, `spare: unknown topology level "row"`}, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	view := s.Clone()
	h := HoldSpares(view, cluster.NewHolds(view), want)
	if h.HeldGPUs() != 16 || view.FreeMilli() != 16000 {
		t.Fatalf("held %d GPUs, %d milli left free; want 16 held, 16000 free", h.HeldGPUs(), view.FreeMilli())
	}
	// The last node of each rack is held whole.
	for _, n := range []string{"r0-n-1", "r1-n-1"} {
		i, _ := view.NodeIndex(n)
		for k, f := range view.GPUFree(i) {
			if f != 0 {
				t.Errorf("%s gpu%d free %d: not held", n, k, f)
			}
		}
	}
	r0 := view.DomainsAt(1)[0]
	released := h.Release(view, r0, "")
	if view.FreeMilli() != 24000 || len(released) != 1 {
		t.Errorf("after releasing r0: %d milli free, %d domains released", view.FreeMilli(), len(released))
	}
	h.Rehold(view, released)
	if h.HeldGPUs() != 16 {
		t.Errorf("held %d GPUs again, want 16", h.HeldGPUs())
	}
}

func TestSuspectsExcludeAtTheLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	s := build.State(build.Topo("rack"), build.Racks(1, 3)).Clone()
	avoid, excluded := Suspects(s, []Suspect{
		{Node: "r0-n-0", Rejections: 1, Until: now.Add(time.Minute)},
		{Node: "r0-n-1", Rejections: 3, Until: now.Add(time.Minute)},
		{Node: "r0-n-2", Rejections: 5, Until: now}, // lapsed
		{Node: "gone", Rejections: 5, Until: now.Add(time.Hour)},
	}, now, 0)
	if diff := cmp.Diff(map[int]bool{0: true}, avoid); diff != "" {
		t.Errorf("avoid (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"r0-n-1"}, excluded); diff != "" {
		t.Errorf("excluded (-want +got):\n%s", diff)
	}
	if s.Schedulable(1) || !s.Schedulable(2) {
		t.Errorf("schedulable: r0-n-1 %v (want false), r0-n-2 %v (want true)", s.Schedulable(1), s.Schedulable(2))
	}
}

// TestQueueSparesServeTheirQueue: a spare kept for one queue is released
// for that queue's replacements only; a spare for any job serves all.
func TestQueueSparesServeTheirQueue(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 3))
	r0 := s.DomainsAt(1)[0]
	for _, tc := range []struct {
		name     string
		spares   []Spare
		queue    string
		freedGPU int
	}{
		{"the queue's own spare", []Spare{{Level: "rack", GPUs: 8, Queue: "team-a"}}, "team-a", 8},
		{"another queue's spare", []Spare{{Level: "rack", GPUs: 8, Queue: "team-a"}}, "team-b", 0},
		{"a spare for any job", []Spare{{Level: "rack", GPUs: 8}}, "team-b", 8},
		{"both kinds, for the queue", []Spare{{Level: "rack", GPUs: 8}, {Level: "rack", GPUs: 8, Queue: "team-a"}}, "team-a", 16},
		{"both kinds, for another queue", []Spare{{Level: "rack", GPUs: 8}, {Level: "rack", GPUs: 8, Queue: "team-a"}}, "team-b", 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, problems := ExpandSpares(s, tc.spares)
			if len(problems) > 0 {
				t.Fatal(problems)
			}
			view := s.Clone()
			h := HoldSpares(view, cluster.NewHolds(view), want)
			before := view.FreeMilli()
			h.Release(view, r0, tc.queue)
			if got := int(view.FreeMilli()-before) / 1000; got != tc.freedGPU {
				t.Errorf("released %d GPUs for %s, want %d", got, tc.queue, tc.freedGPU)
			}
		})
	}
}

func TestParseSpares(t *testing.T) {
	got, err := ParseSpares("rack=8, rack/r07=16,cluster=16@team-a")
	if err != nil {
		t.Fatal(err)
	}
	want := []Spare{{Level: "rack", GPUs: 8}, {Level: "rack", Domain: "r07", GPUs: 16}, {Level: "cluster", GPUs: 16, Queue: "team-a"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spares (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"rack", "rack=0", "rack=-8", "=8", "rack=x", "rack=8@", "rack=8,"} {
		if _, err := ParseSpares(bad); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
	if s, err := ParseSpares(""); s != nil || err != nil {
		t.Errorf("empty: %v %v", s, err)
	}
}
