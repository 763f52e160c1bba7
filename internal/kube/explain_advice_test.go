package kube

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
)

// TestSuggestChecksTheCluster: advice is checked against the cluster's
// state, not given from the reason alone.
func TestSuggestChecksTheCluster(t *testing.T) {
	levels := map[string]string{"rack": "corral.dev/rack"}
	gang := func(n, bound int, ann map[string]string) *kjob {
		var pods []*corev1.Pod
		for i := 0; i < n; i++ {
			b := pod("g-"+itoa(i)).gpus(8).ann(v1alpha1.AnnotationGang, "g")
			for k, v := range ann {
				b.ann(k, v)
			}
			if i < bound {
				b.boundTo("r0-n" + itoa(i))
			}
			pods = append(pods, b.obj())
		}
		return buildJobs(pods, nil, fakeGroups{}, levels, testCfg)[0]
	}
	rack := map[string]string{v1alpha1.AnnotationRequiredTopology: "rack"}
	// Two racks of two 8-GPU nodes; full takes every GPU of the cluster.
	empty := func() *cluster.State { return build.State(build.Topo("rack"), build.Racks(2, 2)) }
	full := func() *cluster.State {
		s := empty()
		for n := 0; n < s.NumNodes(); n++ {
			var a cluster.Alloc
			for k := 0; k < 8; k++ {
				a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
			}
			if err := s.Allocate(n, a); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	waitFree := engine.Reason{Verdict: placement.WaitFree, Level: "rack", Pods: 2}
	cases := map[string]struct {
		st   *cluster.State
		kj   *kjob
		r    engine.Reason
		want []string
	}{
		"never fits in a rack, the cluster could hold it: drop the constraint": {
			st: empty(), kj: gang(3, 0, rack), r: engine.Reason{Verdict: placement.NeverFits, Level: "rack"},
			want: []string{"no domain the job may use could hold it even on an empty cluster: waiting or preempting will not help",
				"remove corral.dev/topology-required (or name a wider level) to let the gang span more than one rack",
				"or ask for fewer pods or fewer GPUs per pod"},
		},
		"never fits, wider than the cluster: no constraint to drop": {
			st: empty(), kj: gang(5, 0, rack), r: engine.Reason{Verdict: placement.NeverFits, Level: "rack"},
			want: []string{"no domain the job may use could hold it even on an empty cluster: waiting or preempting will not help",
				"or ask for fewer pods or fewer GPUs per pod"},
		},
		"a level that does not exist is named, not 'ask for fewer pods'": {
			st: empty(), kj: gang(2, 0, map[string]string{v1alpha1.AnnotationRequiredTopology: "rak"}),
			r:    engine.Reason{Verdict: placement.NeverFits, Level: "rak"},
			want: []string{`corral.dev/topology-required names the level "rak", which the Topology does not define (levels: cluster, rack, host): name one of them`},
		},
		"no GPU free: no 'remove the rack constraint'": {
			st: full(), kj: gang(2, 0, rack), r: waitFree,
			want: []string{"the cluster has 0 GPUs free and the waiting pods need 16: it starts when running work ends or is preempted"},
		},
		"room elsewhere: the constraint is what waits": {
			st: empty(), kj: gang(2, 0, rack), r: waitFree,
			want: []string{"it starts on its own when running work there ends",
				"or remove corral.dev/topology-required to let it span racks now (the cluster has 32 GPUs free)"},
		},
		"the gang's own bound half is named": {
			st: empty(), kj: gang(2, 1, rack), r: waitFree,
			want: []string{"1 of its 2 pods are bound already; the others wait for room beside them",
				"it starts on its own when running work there ends",
				"or remove corral.dev/topology-required to let it span racks now (the cluster has 32 GPUs free)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, suggest(tc.st, tc.kj, tc.r)); diff != "" {
				t.Errorf("suggest (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreferredLevelUnknown: a misspelt preferred level is the engine's
// warning, the job is still placed (no never-fits), as in `corral sim`.
func TestPreferredLevelUnknown(t *testing.T) {
	fc := newFakeCluster(t, rackNode("n1", "a", 8), pod("a").gpus(1).ann(v1alpha1.AnnotationPreferredTopology, "rak").obj())
	e, err := fc.s.Explain(context.Background(), "ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`preferred level "rak" is not a level of the cluster (levels: cluster, rack, host); ignored`}
	if e.State != "would-bind" {
		t.Errorf("state %s (%s), want would-bind", e.State, e.Reason)
	}
	if diff := cmp.Diff(want, e.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	fc.cycle(t)
	if got := fc.podOf(t, "a").Spec.NodeName; got != "n1" {
		t.Errorf("bound to %q, want n1", got)
	}
}
