package cluster_test

import (
	"math/rand/v2"
	"testing"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
)

// recount computes a domain's figures from its nodes, the slow way.
func recount(s *cluster.State, d cluster.DomainID) (cpu int64, milli int64, whole int, fit2 int) {
	dom := s.Domain(d)
	for n := dom.Lo; n < dom.Hi; n++ {
		if !s.Schedulable(n) {
			continue
		}
		cpu += s.FreeCPU(n)
		w := 0
		for _, f := range s.GPUFree(n) {
			milli += int64(f)
			if f == 1000 {
				w++
			}
		}
		whole += w
		fit2 += w / 2
	}
	return
}

func TestAggregatesMatchNodes(t *testing.T) {
	nodes := append(build.Racks(3, 4), build.Node().Name("a100").Model("A100").GPUs(4).Rack("r9").Times(2)...)
	s := build.State(build.Topo("block", "rack"), nodes)
	rng := rand.New(rand.NewPCG(1, 2))
	type held struct {
		node  int
		alloc cluster.Alloc
	}
	var live []held
	for step := 0; step < 2000; step++ {
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			s.Release(live[i].node, live[i].alloc)
			live = append(live[:i], live[i+1:]...)
		} else {
			n := rng.IntN(s.NumNodes())
			free := s.GPUFree(n)
			k := rng.IntN(len(free))
			a := cluster.Alloc{CPUMilli: int64(rng.IntN(4000)), MemMiB: int64(rng.IntN(4096))}
			if m := int32(rng.IntN(1000) + 1); m <= free[k] {
				a.Devices = []cluster.DeviceShare{{Device: k, Milli: m}}
			}
			if s.Allocate(n, a) == nil {
				live = append(live, held{n, a})
			}
		}
		if step%97 != 0 {
			continue
		}
		for d := cluster.DomainID(0); int(d) < s.NumDomains(); d++ {
			cpu, milli, whole, fit2 := recount(s, d)
			got := []int64{s.DomainFreeCPU(d), s.DomainFreeMilli(d, cluster.AllModels),
				int64(s.DomainFreeGPUs(d, cluster.AllModels)), int64(s.FitCount(d, cluster.AllModels, 2))}
			want := []int64{cpu, milli, int64(whole), int64(fit2)}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("step %d domain %s (level %d) figure %d: got %d want %d",
						step, s.Domain(d).Name, s.Domain(d).Level, i, got[i], want[i])
				}
			}
		}
	}
}

func TestCloneIsIndependent(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 2))
	c := s.Clone()
	if err := c.Allocate(0, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 0, Milli: 1000}}}); err != nil {
		t.Fatal(err)
	}
	if got := s.DomainFreeGPUs(0, cluster.AllModels); got != 16 {
		t.Errorf("original changed: %d free GPUs, want 16", got)
	}
	if got := c.DomainFreeGPUs(0, cluster.AllModels); got != 15 {
		t.Errorf("clone: %d free GPUs, want 15", got)
	}
}

func TestBadInput(t *testing.T) {
	cases := map[string]struct {
		topo  cluster.Topology
		nodes []cluster.Node
	}{
		"duplicate node":   {nodes: append(build.Node().Name("x").Times(1), build.Node().Name("x").Times(1)...)},
		"negative CPU":     {nodes: []cluster.Node{build.Node().Name("x").CPU(-1).Obj()}},
		"level named host": {topo: build.Topo("host")},
		"level twice":      {topo: build.Topo("rack", "rack")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := cluster.New(tc.topo, tc.nodes); err == nil {
				t.Errorf("want an error")
			}
		})
	}
	s := build.State(build.Topo(), build.Node().Name("x").Times(1))
	if err := s.Allocate(0, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 99, Milli: 1}}}); err == nil {
		t.Error("allocating a missing device: want an error")
	}
	if err := s.Allocate(0, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 0, Milli: 1001}}}); err == nil {
		t.Error("allocating more than a GPU: want an error")
	}
}

func TestHealthChangesCapacity(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 2))
	s.SetDeviceHealth(0, 3, false)
	if got := s.DomainFreeGPUs(0, cluster.AllModels); got != 15 {
		t.Errorf("free GPUs after a failure: %d, want 15", got)
	}
	if got := s.DomainCapacityGPUs(0, cluster.AllModels); got != 15 {
		t.Errorf("capacity after a failure: %d, want 15", got)
	}
	if err := s.Allocate(0, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 3, Milli: 1}}}); err == nil {
		t.Error("allocated on a failed GPU")
	}
	s.SetDeviceHealth(0, 3, true)
	s.SetSchedulable(1, false)
	if got := s.DomainFreeGPUs(0, cluster.AllModels); got != 8 {
		t.Errorf("free GPUs with node 1 cordoned: %d, want 8", got)
	}
	if got := s.FitCount(0, cluster.AllModels, 8); got != 1 {
		t.Errorf("8-GPU pods that fit with node 1 cordoned: %d, want 1", got)
	}
	s.SetSchedulable(1, true)
	if got := s.FitCount(0, cluster.AllModels, 8); got != 2 {
		t.Errorf("8-GPU pods that fit after uncordon: %d, want 2", got)
	}
}
