package placement

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// TestPreferencesBreakTies: a pod's node preferences (Request.Prefer) pick
// among nodes placement scores the same, on the gang path and on the
// pod-by-pod path; they never overrule a better placement score.
func TestPreferencesBreakTies(t *testing.T) {
	cases := map[string]struct {
		busy   string // node already running a 4-GPU pod, "" for none
		job    *workload.Job
		scorer Scorer
		want   []string
	}{
		"no preference: the first of equal nodes": {
			job: build.Job("a").GPUs(8).Obj(), want: []string{"n-0"},
		},
		"the preferred of equal nodes": {
			job:  build.Job("a").GPUs(8).Prefer("p", map[string]int64{"n-2": 300, "n-1": 500}).Obj(),
			want: []string{"n-1"},
		},
		"a gang on one node goes to the preferred one": {
			job:  build.Job("a").Pods(2).GPUs(4).Prefer("p", map[string]int64{"n-3": 200}).Obj(),
			want: []string{"n-3", "n-3"},
		},
		"a better score wins over the preference": {
			busy: "n-0",
			job:  build.Job("a").GPUs(4).Prefer("p", map[string]int64{"n-1": 500}).Obj(),
			want: []string{"n-0"}, // most allocated: finishes n-0
		},
		"kube's least allocated with a preference: the preferred empty node": {
			busy: "n-0", scorer: LeastAllocated(),
			job:  build.Job("a").GPUs(4).Prefer("p", map[string]int64{"n-2": 100}).Obj(),
			want: []string{"n-2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(cluster.Topology{}, build.Node().Times(4))
			if tc.busy != "" {
				n, _ := s.NodeIndex(tc.busy)
				if err := s.Allocate(n, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 0, Milli: 1000}, {Device: 1, Milli: 1000},
					{Device: 2, Milli: 1000}, {Device: 3, Milli: 1000}}}); err != nil {
					t.Fatal(err)
				}
			}
			scorer := tc.scorer
			if scorer == nil {
				scorer = MostAllocated()
			}
			var pods []PodReq
			tc.job.EachPod(func(ref workload.PodRef, r workload.Request) {
				pr, _ := Resolve(s, ref, r)
				pods = append(pods, pr)
			})
			var got []string
			if len(pods) == 1 {
				// Pod by pod, as the kube baselines place.
				a, ok := NewPlacer(s.Clone(), scorer, Interconnect).PlacePod(&pods[0], 0)
				if !ok {
					t.Fatal("PlacePod placed nothing")
				}
				if diff := cmp.Diff(tc.want, []string{s.Node(a.Node).Name}); diff != "" {
					t.Errorf("PlacePod (-want +got):\n%s", diff)
				}
			}
			res := NewPlacer(s, scorer, Interconnect).PlaceGang(Gang{Pods: pods, Required: -1, Preferred: -1})
			if res.Failure != nil {
				t.Fatal(res.Failure.Message)
			}
			for _, a := range res.Assignments {
				got = append(got, s.Node(a.Node).Name)
			}
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PlaceGang (-want +got):\n%s", diff)
			}
		})
	}
}
