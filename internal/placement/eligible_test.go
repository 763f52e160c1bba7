package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// placed is where a gang went, by names.
type placed struct {
	Node    string
	Devices []string
}

func TestPlaceGangEligibleDevices(t *testing.T) {
	// Two DGX nodes (gpu0..gpu7, PCIe switches of two, NUMA halves).
	nodes := build.Node().Name("n").Times(2)
	cases := map[string]struct {
		taken  map[string][]int // node -> devices already allocated
		req    workload.Request
		pods   int
		want   []placed
		failed string // the failure message, when the gang does not fit
	}{
		"only eligible devices serve, on the node that has them": {
			req:  workload.Request{GPUs: 2, Devices: filter("f", false, "n-1", "gpu5", "gpu6", "gpu7")},
			pods: 1,
			// gpu6 and gpu7 share a PCIe switch: the interconnect choice inside the set.
			want: []placed{{"n-1", []string{"gpu6", "gpu7"}}},
		},
		"a pod's devices come from one set (matchAttribute), the closest pair first": {
			req: workload.Request{GPUs: 2, Devices: &workload.DeviceFilter{Key: "m", Groups: map[string][][]string{
				"n-0": {{"gpu0", "gpu7"}, {"gpu1", "gpu2", "gpu3"}}}}},
			pods: 1,
			// gpu0 and gpu7 span both NUMA nodes; gpu2 and gpu3 share a switch.
			want: []placed{{"n-0", []string{"gpu2", "gpu3"}}},
		},
		"between equally close choices the smaller set (best fit)": {
			req: workload.Request{GPUs: 2, Devices: &workload.DeviceFilter{Key: "b", Groups: map[string][][]string{
				"n-0": {{"gpu0", "gpu1"}, {"gpu2", "gpu3", "gpu4", "gpu5"}}}}},
			pods: 1,
			want: []placed{{"n-0", []string{"gpu0", "gpu1"}}},
		},
		"allocation mode All takes the whole set": {
			req:  workload.Request{GPUs: 3, Devices: filter("all", true, "n-0", "gpu1", "gpu2", "gpu3")},
			pods: 1,
			want: []placed{{"n-0", []string{"gpu1", "gpu2", "gpu3"}}},
		},
		"allocation mode All waits while one device of the set is taken": {
			taken:  map[string][]int{"n-0": {2}},
			req:    workload.Request{GPUs: 3, Devices: filter("all", true, "n-0", "gpu1", "gpu2", "gpu3")},
			pods:   1,
			failed: "the cluster has no room for 1×[3 GPU, all of one set of the devices its selectors match, 0 CPU, 0 MiB] now (fits 1 of 1 pods, 15 GPUs free); 2 free devices match its selectors and constraints",
		},
		"a gang spreads over the eligible devices of both nodes": {
			req: workload.Request{GPUs: 2, Devices: &workload.DeviceFilter{Key: "g", Groups: map[string][][]string{
				"n-0": {{"gpu0", "gpu1"}}, "n-1": {{"gpu4", "gpu5"}}}}},
			pods: 2,
			want: []placed{{"n-0", []string{"gpu0", "gpu1"}}, {"n-1", []string{"gpu4", "gpu5"}}},
		},
		"no device matches anywhere: never fits, and says so": {
			req:    workload.Request{GPUs: 1, Devices: &workload.DeviceFilter{Key: "none", Groups: map[string][][]string{}}},
			pods:   1,
			failed: "no node could ever hold one pod of 1 GPU, from the devices its selectors match, 0 CPU, 0 MiB: no healthy device matches its selectors and constraints",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(cluster.Topology{}, nodes)
			for node, devs := range tc.taken {
				n, _ := s.NodeIndex(node)
				for _, k := range devs {
					if err := s.Allocate(n, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: k, Milli: 1000}}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			var pods []PodReq
			for i := 0; i < tc.pods; i++ {
				r, _ := Resolve(s, workload.PodRef{Job: "j", Index: i}, tc.req)
				pods = append(pods, r)
			}
			res := NewPlacer(s, MostAllocated(), Interconnect).PlaceGang(Gang{Pods: pods, Required: -1, Preferred: -1})
			if tc.failed != "" {
				if res.Failure == nil {
					t.Fatalf("placed %+v, want failure %q", res.Assignments, tc.failed)
				}
				if diff := cmp.Diff(tc.failed, res.Failure.Message); diff != "" {
					t.Errorf("failure (-want +got):\n%s", diff)
				}
				return
			}
			if res.Failure != nil {
				t.Fatalf("failed: %s", res.Failure.Message)
			}
			var got []placed
			for _, a := range res.Assignments {
				p := placed{Node: s.Node(a.Node).Name}
				for _, d := range a.Alloc.Devices {
					p.Devices = append(p.Devices, s.Node(a.Node).Devices[d.Device].ID)
				}
				got = append(got, p)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("placement (-want +got):\n%s", diff)
			}
		})
	}
}

func filter(key string, all bool, node string, devs ...string) *workload.DeviceFilter {
	return &workload.DeviceFilter{Key: key, All: all, Groups: map[string][][]string{node: {devs}}}
}
