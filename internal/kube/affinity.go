package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Node eligibility: taints and tolerations, node affinity (nodeSelector
// included) and required pod affinity / anti-affinity, matched as
// kube-scheduler's TaintToleration, NodeAffinity and InterPodAffinity
// filters match them, with the helpers those plugins use
// (k8s.io/component-helpers and k8s.io/kube-scheduler/framework). The
// engine never sees a Kubernetes object: each pod gets the names of the
// nodes it may use (workload.NodeFilter), computed once per distinct set of
// constraints and shared by every pod that has it, so a cycle costs
// O(distinct constraints × nodes), not O(pods × nodes).
//
// What pod affinity supports, and what it does not:
//   - Terms are matched against the pods bound (or being bound) when the
//     cycle starts, of every scheduler, on every node.
//   - Required anti-affinity between pods of one job whose term selects
//     the pod itself (replicas, one per node / zone / rack) is handed to
//     the engine as workload.Apart and honoured inside the gang's placement.
//   - Required affinity whose term selects the pod itself and no running
//     pod (the first pods of a co-located group) co-locates the gang: its
//     topology key must be kubernetes.io/hostname or a level of the
//     cluster's Topology, which becomes the job's required level.
//   - A term's namespaceSelector matches namespaces by their labels, read
//     from a Namespace informer (InterPodAffinity's namespace lister); a
//     namespace corral cannot read has no labels, as in the scheduler.
//   - Not supported, and reported as the job's pending reason: an
//     anti-affinity term that selects pods of the same job that do not
//     carry it. Pods of two different jobs placed in the same cycle are not
//     checked against each other; the next cycle sees them as running.
//   - Preferred node affinity and PreferNoSchedule taints are scored as
//     kube-scheduler scores them (affinity_score.go) and break ties between
//     nodes corral's placement scores the same. Preferred pod
//     (anti-)affinity terms are ignored.

// untoleratedEffect is kube-scheduler's TaintToleration filter: only
// NoSchedule and NoExecute taints keep a pod off a node; PreferNoSchedule
// is a score.
func untoleratedEffect(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// comparisonOperators is the TaintTolerationComparisonOperators feature
// gate (Gt/Lt tolerations): alpha and off by default in Kubernetes 1.36.
const comparisonOperators = false

// eligibility is one cycle's matcher: the nodes corral manages, the pods
// already placed, and what it has worked out for each pod and each
// distinct constraint.
type eligibility struct {
	nodes []*corev1.Node // managed nodes, by name
	// nodeOf maps every node's name (managed or not) to its object: a
	// running pod's topology comes from its node's labels.
	nodeOf  map[string]*corev1.Node
	running []*corev1.Pod // non-terminal pods on a node, with the node in nodeName
	// antiRunning is the required anti-affinity terms of running pods, with
	// the node each pod is on (kube-scheduler's symmetric check).
	antiRunning []runningTerm
	byUID       map[string]*podConstraints
	byKey       map[string]*podConstraints
	// nsLabels are the labels of each namespace, for terms that select
	// namespaces by label; nil before withNamespaces.
	nsLabels map[string]labels.Set
	logger   klog.Logger
}

// withNamespaces gives the matcher the cluster's namespaces, whose labels a
// term's namespaceSelector matches. Call it before the first forPod.
func (e *eligibility) withNamespaces(namespaces []*corev1.Namespace) *eligibility {
	e.nsLabels = make(map[string]labels.Set, len(namespaces))
	for _, ns := range namespaces {
		e.nsLabels[ns.Name] = labels.Set(ns.Labels)
	}
	return e
}

// matches is InterPodAffinity's term match: pod q is in one of the term's
// namespaces, or its namespace's labels match the term's namespaceSelector,
// and its labels match the term's selector.
func (e *eligibility) matches(t *fwk.AffinityTerm, q *corev1.Pod) bool {
	return t.Matches(q, e.nsLabels[q.Namespace])
}

type runningTerm struct {
	term fwk.AffinityTerm
	node *corev1.Node
}

// podConstraints is what one pod's constraints come to on this cycle's
// nodes.
type podConstraints struct {
	// filter is nil when every managed node is eligible.
	filter *workload.NodeFilter
	// prefer is the pod's soft preferences among those nodes
	// (affinity_score.go); nil when it prefers none.
	prefer *workload.NodePreference
	// apart is its anti-affinity between pods of its job.
	apart []workload.Apart
	// antiTerms are its required anti-affinity terms, each with the Apart it
	// was given ("" Term when it does not select the pod itself).
	antiTerms []antiTerm
	// together is the topology keys of self-selecting affinity terms no
	// running pod matches: the job's pods must share one domain of each.
	together []string
	// problem says why corral cannot honour the pod's constraints.
	problem string
}

type antiTerm struct {
	term  fwk.AffinityTerm
	apart workload.Apart
}

// newEligibility indexes the cycle's nodes and placed pods. managed is in
// name order; all is every node the informer shows; nodeOfPod gives the
// node of each placed pod (spec.nodeName or a binding in flight).
func newEligibility(managed, all []*corev1.Node, pods []*corev1.Pod, nodeOfPod map[string]string) *eligibility {
	e := &eligibility{nodes: managed, nodeOf: map[string]*corev1.Node{}, byUID: map[string]*podConstraints{},
		byKey: map[string]*podConstraints{}, logger: klog.Background()}
	for _, n := range all {
		e.nodeOf[n.Name] = n
	}
	for _, p := range pods {
		if terminal(p) {
			continue
		}
		node := p.Spec.NodeName
		if a, ok := nodeOfPod[string(p.UID)]; ok && node == "" {
			node = a
		}
		n, ok := e.nodeOf[node]
		if !ok {
			continue
		}
		placed := p
		if p.Spec.NodeName == "" {
			placed = p.DeepCopy()
			placed.Spec.NodeName = node
		}
		e.running = append(e.running, placed)
		if terms := fwk.GetPodAntiAffinityTerms(p.Spec.Affinity); len(terms) > 0 {
			parsed, err := fwk.GetAffinityTerms(p, terms)
			if err != nil {
				continue // the API server validates selectors; nothing to match
			}
			for _, t := range parsed {
				e.antiRunning = append(e.antiRunning, runningTerm{term: t, node: n})
			}
		}
	}
	return e
}

// forPod returns the pod's constraints, computing them on first use.
func (e *eligibility) forPod(p *corev1.Pod) *podConstraints {
	if c, ok := e.byUID[string(p.UID)]; ok && p.UID != "" {
		return c
	}
	c := e.compute(p)
	if p.UID != "" {
		e.byUID[string(p.UID)] = c
	}
	return c
}

// constraintKey is what decides a pod's eligibility. Pod labels enter only
// as the answers that depend on them (which of its own terms select it,
// which running pods' anti-affinity rejects it): pods of one job differ in
// labels such as the completion index and must still share one filter.
type constraintKey struct {
	Namespace    string              `json:"ns"`
	NodeSelector map[string]string   `json:"sel,omitempty"`
	Affinity     *corev1.Affinity    `json:"aff,omitempty"`
	Tolerations  []corev1.Toleration `json:"tol,omitempty"`
	SelfAffinity bool                `json:"self,omitempty"`
	SelfAnti     []bool              `json:"anti,omitempty"`
	Rejected     []int               `json:"rej,omitempty"`
}

func (e *eligibility) compute(p *corev1.Pod) *podConstraints {
	aff, err := fwk.GetAffinityTerms(p, fwk.GetPodAffinityTerms(p.Spec.Affinity))
	if err != nil {
		return &podConstraints{problem: fmt.Sprintf("pod affinity: %v", err)}
	}
	anti, err := fwk.GetAffinityTerms(p, fwk.GetPodAntiAffinityTerms(p.Spec.Affinity))
	if err != nil {
		return &podConstraints{problem: fmt.Sprintf("pod anti-affinity: %v", err)}
	}
	key := constraintKey{Namespace: p.Namespace, NodeSelector: p.Spec.NodeSelector, Affinity: p.Spec.Affinity,
		Tolerations: p.Spec.Tolerations, SelfAffinity: len(aff) > 0 && e.matchesAll(aff, p)}
	for i := range anti {
		key.SelfAnti = append(key.SelfAnti, e.matches(&anti[i], p))
	}
	for i := range e.antiRunning {
		if e.matches(&e.antiRunning[i].term, p) {
			key.Rejected = append(key.Rejected, i)
		}
	}
	raw, err := json.Marshal(key)
	if err != nil {
		return &podConstraints{problem: fmt.Sprintf("reading its constraints: %v", err)}
	}
	sum := sha256.Sum256(raw)
	k := hex.EncodeToString(sum[:16])
	if c, ok := e.byKey[k]; ok {
		return c
	}
	var ids []string
	for _, t := range fwk.GetPodAntiAffinityTerms(p.Spec.Affinity) {
		ids = append(ids, termID(p.Namespace, t))
	}
	c := e.evaluate(p, k, key, aff, anti, ids)
	e.byKey[k] = c
	return c
}

// evaluate matches one distinct constraint against every managed node.
func (e *eligibility) evaluate(p *corev1.Pod, key string, ck constraintKey, aff, anti []fwk.AffinityTerm, antiIDs []string) *podConstraints {
	c := &podConstraints{}
	required := nodeaffinity.GetRequiredNodeAffinity(p)

	// Pod affinity: the topology values holding a running pod that matches
	// every term (InterPodAffinity's affinityCounts).
	affValues := make([]map[string]bool, len(aff))
	anyAffinity := false
	if len(aff) > 0 {
		for i := range affValues {
			affValues[i] = map[string]bool{}
		}
		for _, rp := range e.running {
			if !e.matchesAll(aff, rp) {
				continue
			}
			labels := e.nodeOf[rp.Spec.NodeName].Labels
			for i, t := range aff {
				if v, ok := labels[t.TopologyKey]; ok {
					affValues[i][v] = true
					anyAffinity = true
				}
			}
		}
		if !anyAffinity && ck.SelfAffinity {
			// The first pods of a group with affinity to themselves may go
			// anywhere the topology keys exist; the job's own pods must then
			// share each domain.
			for _, t := range aff {
				c.together = append(c.together, t.TopologyKey)
			}
		}
	}
	// Pod anti-affinity: the topology values holding a running pod each term
	// selects, and whether the term binds the job's own pods.
	antiValues := make([]map[string]bool, len(anti))
	for i, t := range anti {
		antiValues[i] = map[string]bool{}
		for _, rp := range e.running {
			if e.matches(&t, rp) {
				if v, ok := e.nodeOf[rp.Spec.NodeName].Labels[t.TopologyKey]; ok {
					antiValues[i][v] = true
				}
			}
		}
		at := antiTerm{term: t}
		if ck.SelfAnti[i] {
			at.apart = workload.Apart{Key: t.TopologyKey, Term: antiIDs[i]}
			c.apart = append(c.apart, at.apart)
		}
		c.antiTerms = append(c.antiTerms, at)
	}

	counts := map[string]int{}
	var names []string
	var feasible []*corev1.Node
	for _, n := range e.nodes {
		if !nodeSchedulable(n) {
			// Cordoned or not Ready: no pod may use it (cluster.Node's
			// Unschedulable), so its taints (node.kubernetes.io/unschedulable,
			// not-ready) must not turn every pod into a constrained one.
			names = append(names, n.Name)
			continue
		}
		if cause := e.excludes(p, n, required, aff, affValues, anyAffinity, ck.SelfAffinity, anti, antiValues, ck.Rejected); cause != "" {
			counts[cause]++
			continue
		}
		names = append(names, n.Name)
		feasible = append(feasible, n)
	}
	c.prefer = e.preference(p, key, feasible)
	if len(counts) == 0 {
		return c // every node: no filter, the engine's fast path
	}
	f := &workload.NodeFilter{Key: key, Nodes: names}
	for cause, n := range counts {
		f.Excluded = append(f.Excluded, workload.Exclusion{Nodes: n, Cause: cause})
	}
	sort.Slice(f.Excluded, func(i, j int) bool {
		a, b := f.Excluded[i], f.Excluded[j]
		if a.Nodes != b.Nodes {
			return a.Nodes > b.Nodes
		}
		return a.Cause < b.Cause
	})
	c.filter = f
	return c
}

// excludes is why pod p may not use node n, or "": the first of
// kube-scheduler's filters it fails, in the order the scheduler runs them.
func (e *eligibility) excludes(p *corev1.Pod, n *corev1.Node, required nodeaffinity.RequiredNodeAffinity,
	aff []fwk.AffinityTerm, affValues []map[string]bool, anyAffinity, selfAffinity bool,
	anti []fwk.AffinityTerm, antiValues []map[string]bool, rejected []int) string {
	if ok, _ := required.Match(n); !ok {
		// Parse errors in a term make it match nothing, as in the scheduler.
		return "do not match its node selector or node affinity"
	}
	if t, bad := v1helper.FindMatchingUntoleratedTaint(e.logger, n.Spec.Taints, p.Spec.Tolerations, untoleratedEffect, comparisonOperators); bad {
		return fmt.Sprintf("have taint %s that the pod does not tolerate", taintText(t))
	}
	for i, t := range aff {
		v, ok := n.Labels[t.TopologyKey]
		if !ok {
			return fmt.Sprintf("lack the label %s its pod affinity uses as topology key", t.TopologyKey)
		}
		// With no running match anywhere, only a pod its own terms select
		// may start the group (satisfyPodAffinity's first-pod rule).
		if (anyAffinity && !affValues[i][v]) || (!anyAffinity && !selfAffinity) {
			return fmt.Sprintf("have no running pod its pod affinity selects in their %s", shortKey(t.TopologyKey))
		}
	}
	for i, t := range anti {
		if v, ok := n.Labels[t.TopologyKey]; ok && antiValues[i][v] {
			return fmt.Sprintf("have a running pod its pod anti-affinity selects in their %s", shortKey(t.TopologyKey))
		}
	}
	for _, r := range rejected {
		rt := e.antiRunning[r]
		k := rt.term.TopologyKey
		if v, ok := rt.node.Labels[k]; ok {
			if w, has := n.Labels[k]; has && w == v {
				return fmt.Sprintf("have a running pod in their %s whose anti-affinity rejects it", shortKey(k))
			}
		}
	}
	return ""
}

// matchesAll reports whether pod q matches every term (namespaces and
// selector), as kube-scheduler counts pods for affinity.
func (e *eligibility) matchesAll(terms []fwk.AffinityTerm, q *corev1.Pod) bool {
	for i := range terms {
		if !e.matches(&terms[i], q) {
			return false
		}
	}
	return true
}

// taintText renders a taint as kubectl does: key=value:Effect.
func taintText(t corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// shortKey names a topology key in a message: "zone" for
// topology.kubernetes.io/zone, "node" for the hostname.
func shortKey(k string) string {
	if k == placement.HostnameLabel {
		return "node"
	}
	if i := strings.LastIndexByte(k, '/'); i >= 0 {
		return k[i+1:]
	}
	return k
}

// termID names an anti-affinity term for workload.Apart: pods of one job
// with the same term (and namespace) keep apart from each other, whatever
// else their constraints say.
func termID(namespace string, t corev1.PodAffinityTerm) string {
	raw, _ := json.Marshal(t) // a plain struct: never fails
	sum := sha256.Sum256(append([]byte(namespace+"\x00"), raw...))
	return hex.EncodeToString(sum[:12])
}

// gangAffinity checks a job's pods against each other's pod (anti-)affinity
// and returns the topology keys the whole job must share (self-affinity
// with no running match) and what corral cannot honour.
func gangAffinity(members []*corev1.Pod, e *eligibility, exclusiveKey string) (together []string, problems []string) {
	if e == nil {
		return nil, nil
	}
	seen := map[string]bool{}
	checked := map[*podConstraints]bool{}
	for _, p := range members {
		c := e.forPod(p)
		if checked[c] {
			// Pods sharing constraints share terms: one check covers them
			// all, so a job costs O(distinct constraints × pods).
			continue
		}
		checked[c] = true
		for _, k := range c.together {
			if k == exclusiveKey {
				continue // the engine's exclusive placement keeps each part together
			}
			if !seen[k] {
				seen[k] = true
				together = append(together, k)
			}
		}
		for _, at := range c.antiTerms {
			if exclusiveKey != "" && at.term.TopologyKey == exclusiveKey {
				// JobSet's exclusive term between its child Jobs: the
				// engine gives each child Job a domain of its own.
				continue
			}
			// A replica the term selects but that does not carry the term
			// would be checked only one way round; corral keeps terms
			// symmetric between pods of one job.
			for _, q := range members {
				if q == p || !e.matches(&at.term, q) {
					continue
				}
				if at.apart.Term == "" || !hasApart(e.forPod(q).apart, at.apart) {
					problems = append(problems, fmt.Sprintf("pod %s: its pod anti-affinity (topology key %s) selects pod %s of the same job, which does not carry the same term; corral supports anti-affinity between replicas that share it",
						p.Name, at.term.TopologyKey, q.Name))
					return together, problems
				}
			}
		}
	}
	sort.Strings(together)
	return together, problems
}

func hasApart(list []workload.Apart, a workload.Apart) bool {
	for _, b := range list {
		if b == a {
			return true
		}
	}
	return false
}

// coLocate applies the job's own pod (anti-)affinity to its gang: a
// self-selecting affinity term no running pod matches becomes the job's
// required topology level (kubernetes.io/hostname: one node). It returns
// what corral cannot honour. Under exclusive placement (JobSet's
// exclusive-topology) the terms JobSet writes for it on the exclusive
// level are the engine's to honour (Topology.Exclusive), not a level the
// whole gang shares.
func coLocate(j *workload.Job, members []*corev1.Pod, e *eligibility, levels map[string]string) []string {
	together, problems := gangAffinity(members, e, levels[j.Topology.Exclusive])
	if len(members) < 2 {
		return problems
	}
	for _, key := range together {
		lv, ok := "", false
		if key == placement.HostnameLabel {
			lv, ok = cluster.LevelHost, true
		} else {
			lv, ok = levelByLabel(levels, key)
		}
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("its pod affinity keeps the job's pods in one domain of %s, which is not a level of the cluster's Topology", key))
		case j.Topology.Required == "" || j.Topology.Required == lv:
			j.Topology.Required = lv
		default:
			problems = append(problems, fmt.Sprintf("its pod affinity keeps the job's pods in one %s but the job requires one %s; ask for one of them", lv, j.Topology.Required))
		}
	}
	return problems
}
