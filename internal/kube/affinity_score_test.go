package kube

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
)

var spotTaint = corev1.Taint{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}

func preferNode(weight int32, key, value string) corev1.PreferredSchedulingTerm {
	return corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}}
}

// TestPreference pins kube-scheduler's scores for soft constraints:
// NodeAffinity's matched weights normalized to 0..100 (weight 2),
// TaintToleration's count of intolerable PreferNoSchedule taints normalized
// reversed (weight 3), over the nodes the pod may use, as each node's score
// above the least preferred one.
func TestPreference(t *testing.T) {
	other := corev1.Taint{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}
	nodes := []*corev1.Node{
		knode("n0", "a", nil, "disk", "ssd"),
		knode("n1", "a", []corev1.Taint{spotTaint}),
		knode("n2", "b", nil),
		knode("n3", "b", []corev1.Taint{spotTaint, other}),
	}
	cases := map[string]struct {
		nodes     []*corev1.Node
		preferred []corev1.PreferredSchedulingTerm
		tol       []corev1.Toleration
		selector  map[string]string
		want      map[string]int64 // nil: no preference
	}{
		"nothing soft: no preference": {
			nodes: []*corev1.Node{nodes[0], nodes[2]},
		},
		"fewer intolerable PreferNoSchedule taints score higher": {
			// counts 0, 1, 0, 2 -> 100, 50, 100, 0, times 3
			want: map[string]int64{"n0": 300, "n1": 150, "n2": 300},
		},
		"a toleration of any effect tolerates PreferNoSchedule": {
			tol:  []corev1.Toleration{tolerate("spot", corev1.TolerationOpExists, "", "")},
			want: map[string]int64{"n0": 300, "n1": 300, "n2": 300},
		},
		"a NoSchedule toleration does not": {
			tol:  []corev1.Toleration{tolerate("spot", corev1.TolerationOpExists, "", corev1.TaintEffectNoSchedule)},
			want: map[string]int64{"n0": 300, "n1": 150, "n2": 300},
		},
		"preferred node affinity adds its matched weights": {
			// weights 5, 0, 10, 10 -> 50, 0, 100, 100, times 2; plus the taints:
			// 400, 150, 500, 200, above the least (150)
			preferred: []corev1.PreferredSchedulingTerm{preferNode(10, zoneLabel, "b"), preferNode(5, "disk", "ssd")},
			want:      map[string]int64{"n0": 250, "n2": 350, "n3": 50},
		},
		"scored over the nodes the pod may use": {
			// zone b only: taints 0, 2 -> 100, 0; the affinity is 100 on both
			selector:  map[string]string{zoneLabel: "b"},
			preferred: []corev1.PreferredSchedulingTerm{preferNode(10, zoneLabel, "b")},
			want:      map[string]int64{"n2": 300},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := tc.nodes
			if ns == nil {
				ns = nodes
			}
			p := pod("p").gpus(1).obj()
			p.Spec.Tolerations, p.Spec.NodeSelector = tc.tol, tc.selector
			if tc.preferred != nil {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: tc.preferred}}
			}
			c := newEligibility(ns, ns, nil, nil).forPod(p)
			var got map[string]int64
			if c.prefer != nil {
				got = c.prefer.Scores
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreferenceCycle: through the engine, a pod goes to the node it
// prefers among equally good ones, and away from a PreferNoSchedule taint
// it does not tolerate; a gang that fills the cluster still uses the
// tainted node (a preference never filters).
func TestPreferenceCycle(t *testing.T) {
	gpuNode := func(name string, taints ...corev1.Taint) *corev1.Node {
		n := knode(name, "a", taints)
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("512Gi"), "nvidia.com/gpu": resource.MustParse("8")}
		return n
	}
	nodes := []*corev1.Node{gpuNode("a-0", spotTaint), gpuNode("a-1"), gpuNode("a-2")}
	cases := map[string]struct {
		pods int
		edit func(*corev1.Pod)
		want []string
	}{
		"no preference: away from the soft taint, the first other node": {
			pods: 1, want: []string{"a-1"},
		},
		"preferred node affinity picks among equal nodes": {
			pods: 1, want: []string{"a-2"},
			edit: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					preferNode(1, "kubernetes.io/hostname", "a-2")}}}
			},
		},
		"a soft taint filters nothing": {
			pods: 3, want: []string{"a-0", "a-1", "a-2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var model []cluster.Node
			for _, n := range nodes {
				cn, _ := nodeFromObject(n, "nvidia.com/gpu", nil, "gpu.nvidia.com")
				model = append(model, cn)
			}
			state, err := cluster.New(cluster.Topology{}, model)
			if err != nil {
				t.Fatal(err)
			}
			var pods []*corev1.Pod
			for i := 0; i < tc.pods; i++ {
				p := pod("train-" + string(rune('0'+i))).gpus(8).ownedByJob("train").obj()
				if tc.edit != nil {
					tc.edit(p)
				}
				pods = append(pods, p)
			}
			groups := fakeGroups{parallelism: map[string]int{"train": tc.pods}, elig: newEligibility(nodes, nodes, pods, nil)}
			snap := &engine.Snapshot{State: state, Now: time.Unix(1000, 0)}
			for _, kj := range buildJobs(pods, nil, groups, nil, testCfg) {
				snap.Pending = append(snap.Pending, engine.PendingJob{Job: kj.job})
			}
			plan := engine.New(engine.Config{Policy: engine.Corral}).Cycle(snap)
			var bound []string
			for _, b := range plan.Binds {
				for _, p := range b.Pods {
					bound = append(bound, p.Node)
				}
			}
			sort.Strings(bound)
			if diff := cmp.Diff(tc.want, bound); diff != "" {
				t.Errorf("bound (-want +got):\n%s (pending %+v)", diff, plan.Pending)
			}
		})
	}
}
