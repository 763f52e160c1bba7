package placement

import (
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// exclusiveGang builds a gang whose parts hold pods of gpus GPUs each:
// parts[i] is the number of pods of part i.
func exclusiveGang(s *cluster.State, job string, gpus int, parts ...int) Gang {
	g := Gang{Required: -1, Preferred: -1, Exclusive: s.LevelIndex("rack")}
	for part, n := range parts {
		for i := 0; i < n; i++ {
			r, _ := Resolve(s, workload.PodRef{Job: workload.JobID(job), PodSet: part, Index: i},
				workload.Request{GPUs: gpus, CPUMilli: 1000, MemMiB: 1024})
			g.Pods = append(g.Pods, r)
			g.PartOf = append(g.PartOf, part)
		}
	}
	return g
}

// TestPlaceExclusive: every part of an exclusive gang goes whole into a
// rack of its own that no other exclusive gang holds, all parts or none,
// and the reason tells never from not now.
func TestPlaceExclusive(t *testing.T) {
	cases := map[string]struct {
		busy    []string // nodes taken whole by non-exclusive work
		held    []string // racks running exclusive jobs hold
		before  [][]int  // exclusive gangs placed and committed first (their parts)
		gpus    int
		parts   []int
		verdict Verdict // 0: placed
		message string  // part of the failure's message
	}{
		"two children of two pods: one rack each":   {gpus: 8, parts: []int{2, 2}},
		"two small children still take a rack each": {gpus: 1, parts: []int{1, 1}},
		"a rack with other (non-exclusive) work still serves a child": {
			busy: []string{"r0-n-0"}, gpus: 8, parts: []int{1, 2},
		},
		"three children in two racks never fit": {
			gpus: 1, parts: []int{1, 1, 1}, verdict: NeverFits,
			message: "exclusive placement needs 3 racks, one to each part, and 2 exist",
		},
		"a child larger than any rack never fits": {
			gpus: 8, parts: []int{3}, verdict: NeverFits, message: "part 1 of 1 of the exclusive gang: any rack could never hold",
		},
		"a rack held by a running exclusive job is skipped": {held: []string{"r0"}, gpus: 8, parts: []int{2}},
		"two children wait while a running exclusive job holds a rack": {
			held: []string{"r1"}, gpus: 1, parts: []int{1, 1}, verdict: WaitFree,
			message: "exclusive placement needs 2 racks to itself; 1 of the 2 are held by other exclusive jobs",
		},
		"a gang placed earlier in the cycle holds its rack": {
			before: [][]int{{1}}, gpus: 1, parts: []int{1, 1}, verdict: WaitFree,
			message: "1 of the 2 are held by other exclusive jobs",
		},
		"no two free racks with room now: nothing is placed": {
			busy: []string{"r1-n-0"}, gpus: 8, parts: []int{2, 2}, verdict: WaitFree,
			message: "exclusive placement needs 2 racks with room for one part each now",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(2, 2))
			rack := s.LevelIndex("rack")
			for _, name := range tc.busy {
				n, _ := s.NodeIndex(name)
				a := cluster.Alloc{}
				for k := range s.Node(n).Devices {
					a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
				}
				if err := s.Allocate(n, a); err != nil {
					t.Fatal(err)
				}
			}
			p := NewPlacer(s, MostAllocated(), Interconnect)
			for _, r := range tc.held {
				n, _ := s.NodeIndex(r + "-n-0")
				p.ClaimExclusive(s.NodeDomain(n, rack))
			}
			for i, parts := range tc.before {
				if res := p.PlaceGang(exclusiveGang(s, "before"+itoa(i), tc.gpus, parts...)); res.Failure != nil {
					t.Fatalf("gang placed before: %s", res.Failure.Message)
				}
				p.Commit()
			}
			free := totalFree(s)
			g := exclusiveGang(s, "g", tc.gpus, tc.parts...)
			res := p.PlaceGang(g)
			if tc.verdict != 0 {
				if res.Failure == nil {
					t.Fatalf("placed %d pods, want %v", len(res.Assignments), tc.verdict)
				}
				if res.Failure.Verdict != tc.verdict || !strings.Contains(res.Failure.Message, tc.message) {
					t.Fatalf("failure %v %q, want %v containing %q", res.Failure.Verdict, res.Failure.Message, tc.verdict, tc.message)
				}
				if got := totalFree(s); got != free {
					t.Fatalf("a failed gang left %d GPUs taken", free-got)
				}
				if never := CheckNeverFits(s, g) != nil; never != (tc.verdict == NeverFits) {
					t.Errorf("CheckNeverFits says never = %v, want %v", never, tc.verdict == NeverFits)
				}
				return
			}
			if res.Failure != nil {
				t.Fatalf("not placed: %s", res.Failure.Message)
			}
			if len(res.Assignments) != len(g.Pods) {
				t.Fatalf("placed %d of %d pods", len(res.Assignments), len(g.Pods))
			}
			rackOf := map[int]cluster.DomainID{} // part -> rack
			owner := map[cluster.DomainID]int{}  // rack -> part
			for _, r := range tc.held {
				n, _ := s.NodeIndex(r + "-n-0")
				owner[s.NodeDomain(n, rack)] = -1
			}
			for _, a := range res.Assignments {
				part, d := a.Pod.PodSet, s.NodeDomain(a.Node, rack)
				if prev, ok := rackOf[part]; ok && prev != d {
					t.Errorf("part %d spans racks %s and %s", part, s.Domain(prev).Name, s.Domain(d).Name)
				}
				if o, ok := owner[d]; ok && o != part {
					t.Errorf("rack %s holds part %d and part %d (-1: a running exclusive job)", s.Domain(d).Name, part, o)
				}
				rackOf[part], owner[d] = d, part
			}
		})
	}
}

// TestExclusiveClaimsRollBack: a gang undone gives its racks back; a
// committed one keeps them.
func TestExclusiveClaimsRollBack(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(2, 2))
	p := NewPlacer(s, MostAllocated(), Interconnect)
	if res := p.PlaceGang(exclusiveGang(s, "a", 1, 1, 1)); res.Failure != nil {
		t.Fatal(res.Failure.Message)
	}
	p.Undo()
	if res := p.PlaceGang(exclusiveGang(s, "b", 1, 1, 1)); res.Failure != nil {
		t.Fatalf("after Undo: %s", res.Failure.Message)
	}
	p.Commit()
	if res := p.PlaceGang(exclusiveGang(s, "c", 1, 1)); res.Failure == nil || res.Failure.Verdict != WaitFree {
		t.Fatalf("after Commit another exclusive gang was placed or never fits: %+v", res.Failure)
	}
}

func totalFree(s *cluster.State) int {
	free := 0
	for n := 0; n < s.NumNodes(); n++ {
		for _, f := range s.GPUFree(n) {
			free += int(f)
		}
	}
	return free
}

func itoa(i int) string { return string(rune('0' + i)) }
