package placement

import (
	"testing"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// TestMayHoldNeverDeniesWhatPlaceGangPlaces: MayHold is a filter in front
// of the search, so a "no" must mean the search fails too.
func TestMayHoldNeverDeniesWhatPlaceGangPlaces(t *testing.T) {
	cases := map[string]struct {
		busy     []int // nodes taken whole
		pods     int
		gpus     int
		required int
		want     bool
	}{
		"empty cluster":                      {pods: 4, gpus: 8, required: -1, want: true},
		"one node short":                     {busy: []int{0}, pods: 4, gpus: 8, required: -1, want: false},
		"enough GPUs, not one per pod":       {pods: 1, gpus: 16, required: -1, want: false},
		"a rack holds it":                    {busy: []int{0}, pods: 2, gpus: 8, required: 1, want: true},
		"no rack holds it, the cluster does": {busy: []int{0, 2}, pods: 2, gpus: 8, required: 1, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(2, 2))
			for _, n := range tc.busy {
				a := cluster.Alloc{}
				for k := range s.Node(n).Devices {
					a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
				}
				if err := s.Allocate(n, a); err != nil {
					t.Fatal(err)
				}
			}
			g := Gang{Required: tc.required, Preferred: -1}
			for i := 0; i < tc.pods; i++ {
				r, _ := Resolve(s, workload.PodRef{Job: "g", Index: i}, workload.Request{GPUs: tc.gpus, CPUMilli: 1000, MemMiB: 1024})
				g.Pods = append(g.Pods, r)
			}
			got := MayHold(s, g)
			if got != tc.want {
				t.Errorf("MayHold = %v, want %v", got, tc.want)
			}
			placed := NewPlacer(s, MostAllocated(), Interconnect).PlaceGang(g).Failure == nil
			if placed && !got {
				t.Errorf("MayHold said no but PlaceGang placed the gang")
			}
		})
	}
}
