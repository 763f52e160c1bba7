package preempt

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// scenario is a tiny cluster, its running jobs as units, and a waiting gang.
type scenario struct {
	state *cluster.State
	units []Unit
	gang  placement.Gang
}

// randomScenario fills 2 racks × 2 nodes with whole-GPU jobs of 1-8 GPUs
// (some elastic, as two units) and asks for a gang of 1-3 pods.
func randomScenario(rng *rand.Rand) scenario {
	s := build.State(build.Topo("rack"), build.Racks(2, 2))
	var units []Unit
	t0 := time.Unix(0, 0)
	for n := 0; n < s.NumNodes(); n++ {
		free := 8
		for free > 0 && rng.IntN(4) > 0 {
			g := 1 + rng.IntN(free)
			dev := 8 - free
			a := cluster.Alloc{CPUMilli: 1000, MemMiB: 1024}
			for d := dev; d < dev+g; d++ {
				a.Devices = append(a.Devices, cluster.DeviceShare{Device: d, Milli: 1000})
			}
			if err := s.Allocate(n, a); err != nil {
				panic(err)
			}
			free -= g
			id := workload.JobID(fmt.Sprintf("j%d-%d", n, dev))
			u := Unit{Job: id, Pods: []cluster.Placed{{Pod: workload.PodRef{Job: id}, NodeIndex: n, Alloc: a}},
				Cost: float64(g) * float64(1+rng.IntN(60)) * 60, Start: t0.Add(time.Duration(rng.IntN(100)) * time.Minute), Needs: -1}
			units = append(units, u)
		}
	}
	pods := 1 + rng.IntN(3)
	gpus := []int{1, 2, 4, 8}[rng.IntN(4)]
	g := placement.Gang{Required: -1, Preferred: -1}
	for i := 0; i < pods; i++ {
		r := workload.Request{CPUMilli: 1000, MemMiB: 1024, GPUs: gpus}
		pr, _ := placement.Resolve(s, workload.PodRef{Job: "w", Index: i}, r)
		g.Pods = append(g.Pods, pr)
	}
	if rng.IntN(2) == 0 {
		g.Required = s.LevelIndex("rack")
	}
	return scenario{state: s, units: units, gang: g}
}

// fitsWithout places the gang on a copy with the given units evicted.
func fitsWithout(sc scenario, victims []int) bool {
	c := sc.state.Clone()
	for _, u := range victims {
		for _, p := range sc.units[u].Pods {
			c.Release(p.NodeIndex, p.Alloc)
		}
	}
	return placement.NewPlacer(c, placement.MostAllocated(), placement.Interconnect).PlaceGang(sc.gang).Failure == nil
}

// cheapest is the brute-force optimum over every subset (nil if none fits).
func cheapest(sc scenario) (best float64, found bool) {
	n := len(sc.units)
	for mask := 0; mask < 1<<n; mask++ {
		var set []int
		var cost float64
		for u := 0; u < n; u++ {
			if mask&(1<<u) != 0 {
				set = append(set, u)
				cost += sc.units[u].Cost
			}
		}
		if (!found || cost < best) && fitsWithout(sc, set) {
			best, found = cost, true
		}
	}
	return best, found
}

func TestSearchProvesMinimalSets(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var ratioSum float64
	var compared, optimal int
	for i := 0; i < 300; i++ {
		sc := randomScenario(rng)
		if len(sc.units) > 12 || fitsWithout(sc, nil) {
			continue // brute force stays small; a gang that fits needs no victims
		}
		for _, strategy := range []Strategy{LeastLost, LowestPriorityNewest} {
			r := Search(Problem{View: sc.state, Gang: sc.gang, Scorer: placement.MostAllocated(),
				Devices: placement.Interconnect, Units: sc.units, Budget: 10000, Strategy: strategy})
			best, feasible := cheapest(sc)
			if r.Found != feasible {
				t.Fatalf("case %d %v: found=%v, brute force feasible=%v (%s)", i, strategy, r.Found, feasible, r.Why)
			}
			if !r.Found {
				if r.Evaluations != 1 {
					t.Errorf("case %d %v: %d placements tried for a gang that cannot fit", i, strategy, r.Evaluations)
				}
				continue
			}
			if !fitsWithout(sc, r.Victims) {
				t.Fatalf("case %d %v: the victims %v do not make room", i, strategy, r.Victims)
			}
			var cost float64
			for k, u := range r.Victims {
				cost += sc.units[u].Cost
				rest := append(append([]int(nil), r.Victims[:k]...), r.Victims[k+1:]...)
				if fitsWithout(sc, rest) {
					t.Errorf("case %d %v: victim %s is not needed", i, strategy, sc.units[u].Job)
				}
			}
			if cost != r.Cost {
				t.Errorf("case %d %v: cost %v, victims add up to %v", i, strategy, r.Cost, cost)
			}
			if strategy == LeastLost {
				compared++
				ratioSum += r.Cost / best
				if r.Cost == best {
					optimal++
				}
			}
		}
	}
	if compared < 50 {
		t.Fatalf("only %d scenarios needed preemption", compared)
	}
	t.Logf("least-lost: optimal in %d of %d scenarios, mean cost / optimum %.3f", optimal, compared, ratioSum/float64(compared))
}

func TestSearchNeverTakesPartOfAnElasticMinimum(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 2))
	whole := func(n int) cluster.Alloc {
		a := cluster.Alloc{}
		for d := 0; d < 8; d++ {
			a.Devices = append(a.Devices, cluster.DeviceShare{Device: d, Milli: 1000})
		}
		if err := s.Allocate(n, a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	// One elastic job on both nodes: its extra pod (node 1) and its
	// minimum (node 0), which needs the extra pod gone first.
	extra := Unit{Job: "e", Pods: []cluster.Placed{{Pod: workload.PodRef{Job: "e", Index: 1}, NodeIndex: 1, Alloc: whole(1)}}, Cost: 100, Needs: -1}
	minimum := Unit{Job: "e", Pods: []cluster.Placed{{Pod: workload.PodRef{Job: "e", Index: 0}, NodeIndex: 0, Alloc: whole(0)}}, Cost: 1, Needs: 0}
	pod, _ := placement.Resolve(s, workload.PodRef{Job: "w"}, workload.Request{GPUs: 8})
	cases := map[string]struct {
		pods int
		want []int
	}{
		"one node: only the extra pod, although the minimum looks cheaper": {pods: 1, want: []int{0}},
		"two nodes: the whole job": {pods: 2, want: []int{0, 1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := placement.Gang{Required: -1, Preferred: -1}
			for i := 0; i < tc.pods; i++ {
				g.Pods = append(g.Pods, pod)
			}
			r := Search(Problem{View: s, Gang: g, Scorer: placement.MostAllocated(), Devices: placement.Interconnect,
				Units: []Unit{extra, minimum}, Budget: 100})
			if fmt.Sprint(r.Victims) != fmt.Sprint(tc.want) {
				t.Errorf("victims %v, want %v (%s)", r.Victims, tc.want, r.Why)
			}
		})
	}
}
