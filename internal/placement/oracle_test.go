package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// tightestByBruteForce is the plain answer PlaceGang's search must match for
// gangs of identical whole-GPU pods: the deepest level with a domain whose
// nodes, counted one by one, hold every pod.
func tightestByBruteForce(s *cluster.State, pods, gpus int) int {
	for lv := s.HostLevel(); lv >= 0; lv-- {
		for _, d := range s.DomainsAt(lv) {
			dom := s.Domain(d)
			fit := 0
			for n := dom.Lo; n < dom.Hi; n++ {
				free := 0
				for _, f := range s.GPUFree(n) {
					if f == 1000 {
						free++
					}
				}
				fit += free / gpus
			}
			if fit >= pods {
				return lv
			}
		}
	}
	return -1
}

func TestPlaceGangMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 400; trial++ {
		var nodes []cluster.Node
		for b := 0; b < 2; b++ {
			for r := 0; r < 2; r++ {
				rack := fmt.Sprintf("b%d-r%d", b, r)
				nodes = append(nodes, build.Node().Name(rack+"-n").GPUs(4).Block(fmt.Sprintf("b%d", b)).Rack(rack).Times(2)...)
			}
		}
		s := build.State(build.Topo("block", "rack"), nodes)
		for n := 0; n < s.NumNodes(); n++ {
			for k := range s.GPUFree(n) {
				if rng.IntN(3) == 0 {
					_ = s.Allocate(n, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: k, Milli: 1000}}})
				}
			}
		}
		pods, gpus := 1+rng.IntN(5), 1+rng.IntN(4)
		want := tightestByBruteForce(s, pods, gpus)
		var reqs []PodReq
		for i := 0; i < pods; i++ {
			r, _ := Resolve(s, workload.PodRef{Job: "g", Index: i}, workload.Request{GPUs: gpus})
			reqs = append(reqs, r)
		}
		p := NewPlacer(s, MostAllocated(), Interconnect)
		res := p.PlaceGang(Gang{Pods: reqs, Required: -1, Preferred: -1})
		if want < 0 {
			if res.Failure == nil {
				t.Fatalf("trial %d: %d×%d GPUs placed where nothing fits", trial, pods, gpus)
			}
			continue
		}
		if res.Failure != nil {
			t.Fatalf("trial %d: %d×%d GPUs: %s; brute force fits at level %d", trial, pods, gpus, res.Failure.Message, want)
		}
		if res.Level != want {
			t.Fatalf("trial %d: %d×%d GPUs at level %d, brute force %d", trial, pods, gpus, res.Level, want)
		}
		dom := s.Domain(res.Domain)
		for _, a := range res.Assignments {
			if a.Node < dom.Lo || a.Node >= dom.Hi {
				t.Fatalf("trial %d: pod on node %d outside domain %s", trial, a.Node, dom.Name)
			}
		}
	}
}

func TestPickExhaustiveMatchesSpanMinimum(t *testing.T) {
	// On an 8-GPU DGX node with random occupancy, the chosen set spans the
	// fewest PCIe switches any set of that size could.
	rng := rand.New(rand.NewPCG(3, 5))
	node := build.Node().Name("n").Obj()
	for trial := 0; trial < 300; trial++ {
		s := build.State(build.Topo(), []cluster.Node{node})
		for k := 0; k < 8; k++ {
			if rng.IntN(2) == 0 {
				_ = s.Allocate(0, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: k, Milli: 1000}}})
			}
		}
		var cand []int
		for k, f := range s.GPUFree(0) {
			if f == 1000 {
				cand = append(cand, k)
			}
		}
		if len(cand) == 0 {
			continue
		}
		k := 1 + rng.IntN(len(cand))
		got := pickWhole(s, 0, k, cluster.AllModels, Interconnect)
		_, _, _, pcie := Spans(s.Node(0), got)
		// The fewest switches: take switches by free count, largest first.
		per := map[int]int{}
		for _, c := range cand {
			per[c/2]++
		}
		sizes := []int{}
		for _, v := range per {
			sizes = append(sizes, v)
		}
		least, left := 0, k
		for left > 0 {
			bi := 0
			for i := range sizes {
				if sizes[i] > sizes[bi] {
					bi = i
				}
			}
			left -= sizes[bi]
			sizes[bi] = 0
			least++
		}
		if pcie != least {
			t.Fatalf("trial %d: %d GPUs of %v span %d switches, fewest is %d (got %v)", trial, k, cand, pcie, least, got)
		}
	}
}
