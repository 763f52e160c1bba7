package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNamespaceSelector: a pod (anti-)affinity term's namespaceSelector
// matches running pods by their namespace's labels, as InterPodAffinity
// does with its namespace lister; a namespace corral cannot read has no
// labels, and a running pod's own anti-affinity selects the new pod
// through the new pod's namespace labels.
func TestNamespaceSelector(t *testing.T) {
	namespaces := []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dev", Labels: map[string]string{"env": "dev"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"env": "batch"}}},
	}
	inNS := func(p *corev1.Pod, ns string) *corev1.Pod { p.Namespace = ns; return p }
	db := map[string]string{"app": "db"}
	term := func(env string) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: db},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": env}}}
	}
	running := []*corev1.Pod{
		inNS(runningPod("db-prod", "c0", db, nil), "prod"),
		inNS(runningPod("db-dev", "c1", db, nil), "dev"),
	}
	cases := map[string]struct {
		running []*corev1.Pod
		aff     *corev1.Affinity
		want    []string // eligible nodes; the GPU pool and x0 are tainted
	}{
		"affinity to pods of namespaces labelled env=prod": {
			running: running, aff: podAffinity(term("prod")), want: []string{"c0"},
		},
		"anti-affinity to pods of namespaces labelled env=prod": {
			running: running, aff: antiAffinity(term("prod")), want: []string{"c1"},
		},
		"no namespace has the labels: nothing to be next to": {
			running: running, aff: podAffinity(term("staging")), want: nil,
		},
		"a running pod's anti-affinity selects the pod by its namespace's labels": {
			running: []*corev1.Pod{inNS(runningPod("guard", "c0", nil, antiAffinity(corev1.PodAffinityTerm{
				TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "batch"}}})), "prod")},
			want: []string{"c1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nodes := affinityNodes()
			e := newEligibility(nodes, nodes, tc.running, nil).withNamespaces(namespaces)
			p := pod("p").gpus(1).obj()
			p.Spec.Affinity = tc.aff
			c := e.forPod(p)
			if c.problem != "" {
				t.Fatalf("problem %q", c.problem)
			}
			if c.filter == nil {
				t.Fatalf("no filter: every node eligible")
			}
			var got []string
			got = append(got, c.filter.Nodes...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("eligible nodes (-want +got):\n%s (why: %s)", diff, c.filter.Why())
			}
		})
	}
}
