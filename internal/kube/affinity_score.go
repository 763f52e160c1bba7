package kube

import (
	corev1 "k8s.io/api/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/corral-dev/corral/internal/workload"
)

// Soft node preferences, scored as kube-scheduler 1.36's default profile
// scores them (pkg/scheduler/framework/plugins):
//
//   - NodeAffinity.Score: the sum of the weights of the pod's preferred
//     node-affinity terms a node matches (nodeaffinity.PreferredSchedulingTerms
//     from k8s.io/component-helpers, the type the plugin uses), normalized
//     to 0..100 over the nodes (helper.DefaultNormalizeScore);
//   - TaintToleration.Score: the count of the node's PreferNoSchedule taints
//     the pod's tolerations (those with effect PreferNoSchedule or none) do
//     not tolerate (v1helper.TolerationsTolerateTaint), normalized reversed:
//     fewer is better;
//   - combined with the profile's weights, TaintToleration 3, NodeAffinity 2.
//
// The scores are normalized over the nodes the pod may use (the scheduler
// normalizes over the nodes that pass its filters for that pod). The engine
// gets them as workload.NodePreference and uses them only among nodes its
// own score ties: corral's placement (fragmentation, topology) comes first.
const (
	taintTolerationWeight = 3
	nodeAffinityWeight    = 2
	maxNodeScore          = 100 // fwk.MaxNodeScore
)

// preference scores the nodes the pod may use, or nil when it prefers none
// over another. key names the pod's distinct constraints.
func (e *eligibility) preference(p *corev1.Pod, key string, nodes []*corev1.Node) *workload.NodePreference {
	var terms []corev1.PreferredSchedulingTerm
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		terms = a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	}
	preferred, err := nodeaffinity.NewPreferredSchedulingTerms(terms)
	if err != nil {
		// The API server validates the terms; one that still does not parse
		// is left out, as the scheduler's PreScore would refuse to score it.
		preferred = nil
	}
	tolerations := preferNoScheduleTolerations(p.Spec.Tolerations)
	affinity := make([]int64, len(nodes))
	taints := make([]int64, len(nodes))
	for i, n := range nodes {
		if preferred != nil {
			affinity[i] = preferred.Score(n)
		}
		taints[i] = e.intolerablePreferNoSchedule(n.Spec.Taints, tolerations)
	}
	normalizeScores(affinity, false)
	normalizeScores(taints, true)
	total := make([]int64, len(nodes))
	least := int64(-1)
	for i := range nodes {
		total[i] = nodeAffinityWeight*affinity[i] + taintTolerationWeight*taints[i]
		if least < 0 || total[i] < least {
			least = total[i]
		}
	}
	scores := map[string]int64{}
	for i, n := range nodes {
		if v := total[i] - least; v > 0 {
			scores[n.Name] = v
		}
	}
	if len(scores) == 0 {
		return nil
	}
	return &workload.NodePreference{Key: key, Scores: scores}
}

// preferNoScheduleTolerations is TaintToleration's
// getAllTolerationPreferNoSchedule: an empty effect tolerates every effect.
func preferNoScheduleTolerations(ts []corev1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range ts {
		if t.Effect == "" || t.Effect == corev1.TaintEffectPreferNoSchedule {
			out = append(out, t)
		}
	}
	return out
}

// intolerablePreferNoSchedule is TaintToleration's
// countIntolerableTaintsPreferNoSchedule.
func (e *eligibility) intolerablePreferNoSchedule(taints []corev1.Taint, tolerations []corev1.Toleration) int64 {
	var n int64
	for i := range taints {
		if taints[i].Effect != corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !v1helper.TolerationsTolerateTaint(e.logger, tolerations, &taints[i], comparisonOperators) {
			n++
		}
	}
	return n
}

// normalizeScores is the scheduler's helper.DefaultNormalizeScore: scale to
// 0..maxNodeScore by the highest score; reversed, higher raw scores become
// lower. All zeros stay zero, or become the maximum when reversed.
func normalizeScores(scores []int64, reverse bool) {
	var top int64
	for _, s := range scores {
		top = max(top, s)
	}
	for i, s := range scores {
		if top > 0 {
			s = maxNodeScore * s / top
		}
		if reverse {
			s = maxNodeScore - s
		}
		scores[i] = s
	}
}
