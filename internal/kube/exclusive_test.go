package kube

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/engine"
)

// TestExclusiveJobSetThroughTheEngine follows a JobSet under exclusive
// placement (2 child Jobs × 4 pods of 8 GPUs, on 2 racks of 4 nodes)
// through the real engine: its two leaders arrive, the engine places the
// whole JobSet in one cycle, each child Job in a rack of its own; each
// leader's binding holds its own followers' room in its rack, and the
// followers, once created, are bound there.
func TestExclusiveJobSetThroughTheEngine(t *testing.T) {
	levels := map[string]string{"rack": "corral.dev/rack"}
	ov := &ownerView{
		jobs: store(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ex-w-0", Namespace: "ns", UID: "u-ex"}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ex-w-1", Namespace: "ns", UID: "u-ex1"}}),
		jobSets: store(jobSetObj("ex", map[string]any{"replicatedJobs": []any{rjob("w", 2, 4, 8)}},
			map[string]string{jobSetExclusiveKey: "corral.dev/rack"})),
	}
	groups := ownedGroups{ov: ov}
	now := time.Unix(1000, 0)
	eng := engine.New(engine.Config{})
	leaders := []*corev1.Pod{exLeader("ex-w-0", "u-ex"), exLeader("ex-w-1", "u-ex1")}
	w, plan := heldCycle(t, eng, build.State(build.Topo("rack"), build.Racks(2, 4)), leaders, groups, levels, now)
	if len(plan.Binds) != 1 || len(plan.Binds[0].Pods) != 2 || len(plan.Held) != 1 || plan.Held[0].Pods != 6 {
		t.Fatalf("plan: binds %+v, held %+v; want the two leaders bound and 6 followers' room held", plan.Binds, plan.Held)
	}
	w.annotateHeld(plan.Binds, plan.Held)
	kj := w.byID[plan.Binds[0].Job]
	racks := map[string]string{} // rack -> child Job
	var bound []*corev1.Pod
	for _, pb := range plan.Binds[0].Pods {
		leader := kj.pods[pb.Pod]
		child := controllingOwner(leader, "Job")
		rack, _, _ := strings.Cut(pb.Node, "-")
		if other, ok := racks[rack]; ok {
			t.Fatalf("child Jobs %s and %s share rack %s", other, child, rack)
		}
		racks[rack] = child
		bound = append(bound, bindAt(leader, pb, w.bindAnnotations[string(leader.UID)], now))
	}

	// The next cycle, from the pods alone: each child's followers' room
	// is held in its own leader's rack; a gang asking for a rack finds none.
	other := []*corev1.Pod{pod("o-0").gpus(8).ann(v1alpha1.AnnotationGang, "o").ann(v1alpha1.AnnotationRequiredTopology, "rack").obj()}
	_, plan = heldCycle(t, eng, build.State(build.Topo("rack"), build.Racks(2, 4)), append(append([]*corev1.Pod(nil), bound...), other...), groups, levels, now.Add(time.Minute))
	if len(plan.Binds) != 0 || len(plan.Held) != 1 || plan.Held[0].Pods != 6 || len(plan.Held[0].Nodes) != 6 {
		t.Fatalf("plan: binds %+v, held %+v; want nothing bound and 6 followers held on 6 nodes", plan.Binds, plan.Held)
	}

	// The followers of ex-w-1 appear: bound into its leader's rack.
	pods := append([]*corev1.Pod(nil), bound...)
	for _, i := range []string{"1", "2", "3"} {
		p := pod("ex-w-1-"+i).gpus(8).jobSet("ex", "w").ann(jobSetExclusiveKey, "corral.dev/rack").ann(jobCompletionIndexKey, i).obj()
		tr := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "ex-w-1", UID: "u-ex1", Controller: &tr}}
		pods = append(pods, p)
	}
	_, plan = heldCycle(t, eng, build.State(build.Topo("rack"), build.Racks(2, 4)), pods, groups, levels, now.Add(2*time.Minute))
	if len(plan.Binds) != 1 || len(plan.Binds[0].Pods) != 3 || len(plan.Held) != 1 || plan.Held[0].Pods != 3 {
		t.Fatalf("plan: binds %+v, held %+v; want ex-w-1's 3 followers bound, ex-w-0's 3 held", plan.Binds, plan.Held)
	}
	for _, pb := range plan.Binds[0].Pods {
		if r, _, _ := strings.Cut(pb.Node, "-"); racks[r] != "ex-w-1" {
			t.Errorf("follower %v bound to %s, in the rack of %s", pb.Pod, pb.Node, racks[r])
		}
	}
	for _, n := range plan.Held[0].Nodes {
		if r, _, _ := strings.Cut(n, "-"); racks[r] != "ex-w-0" {
			t.Errorf("ex-w-0's followers held on %s, in the rack of %s", n, racks[r])
		}
	}
}

// TestExclusiveLeadersAffinity: the affinity JobSet's webhook writes on the
// leaders of an exclusive JobSet (to its own job key, against other job
// keys, on the exclusive level) is left to the engine's exclusive
// placement: it neither makes the whole JobSet share one rack nor makes
// the job invalid for anti-affinity between its own pods.
func TestExclusiveLeadersAffinity(t *testing.T) {
	const jobKey = "jobset.sigs.k8s.io/job-key"
	levels := map[string]string{"rack": "corral.dev/rack"}
	nodes := []*corev1.Node{knode("r0-n-0", "a", nil, "corral.dev/rack", "r0"), knode("r1-n-0", "a", nil, "corral.dev/rack", "r1")}
	ov := &ownerView{
		jobs: store(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ex-w-0", Namespace: "ns", UID: "u-ex"}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ex-w-1", Namespace: "ns", UID: "u-ex1"}}),
		jobSets: store(jobSetObj("ex", map[string]any{"replicatedJobs": []any{rjob("w", 2, 4, 8)}},
			map[string]string{jobSetExclusiveKey: "corral.dev/rack"})),
	}
	var leaders []*corev1.Pod
	for _, c := range []struct{ job, uid string }{{"ex-w-0", "u-ex"}, {"ex-w-1", "u-ex1"}} {
		p := exLeader(c.job, types.UID(c.uid))
		p.Labels[jobKey] = "key-" + c.job
		p.Spec.Affinity = &corev1.Affinity{
			PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: "corral.dev/rack", LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: jobKey, Operator: metav1.LabelSelectorOpIn, Values: []string{"key-" + c.job}}}}}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: "corral.dev/rack", LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: jobKey, Operator: metav1.LabelSelectorOpExists},
					{Key: jobKey, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"key-" + c.job}}}}}}},
		}
		leaders = append(leaders, p)
	}
	groups := ownedGroups{fakeGroups: fakeGroups{elig: newEligibility(nodes, nodes, nil, nil)}, ov: ov}
	jobs := buildJobs(leaders, nil, groups, levels, testCfg)
	if len(jobs) != 1 {
		t.Fatalf("%d jobs, want the JobSet as one", len(jobs))
	}
	j := jobs[0]
	if j.invalid != "" || j.job.Topology.Required != "" || j.job.Topology.Exclusive != "rack" {
		t.Errorf("invalid %q, required %q, exclusive %q; want valid, no required level, exclusive rack",
			j.invalid, j.job.Topology.Required, j.job.Topology.Exclusive)
	}
}
