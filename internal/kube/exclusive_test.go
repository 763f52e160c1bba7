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
	"github.com/corral-dev/corral/internal/workload"
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
	st := build.State(build.Topo("rack"), build.Racks(2, 4))
	leaders := []*corev1.Pod{exLeader("ex-w-0", "u-ex"), exLeader("ex-w-1", "u-ex1")}
	w := &world{state: st, byID: map[workload.JobID]*kjob{}}
	snap := &engine.Snapshot{State: st, Now: now}
	for _, kj := range buildJobs(leaders, nil, groups, levels, testCfg) {
		w.byID[kj.job.ID] = kj
		if kj.waiting != "" || kj.invalid != "" {
			t.Fatalf("job %s: waiting %q, invalid %q", kj.key, kj.waiting, kj.invalid)
		}
		snap.Pending = append(snap.Pending, engine.PendingJob{Job: kj.job})
	}
	plan := eng.Cycle(snap)
	if len(plan.Binds) != 1 || len(plan.Binds[0].Pods) != 8 {
		t.Fatalf("plan: %+v; want the whole JobSet (8 pods) placed in one cycle", plan)
	}
	binds := w.holdLater(plan.Binds, now)
	if len(binds[0].Pods) != 2 {
		t.Fatalf("bound %d pods, want the two leaders", len(binds[0].Pods))
	}
	kj := w.byID[plan.Binds[0].Job]
	racks := map[string]string{} // rack -> child Job
	var bound []*corev1.Pod
	for _, pb := range binds[0].Pods {
		leader := kj.pods[pb.Pod]
		child := controllingOwner(leader, "Job")
		rack, _, _ := strings.Cut(pb.Node, "-")
		if other, ok := racks[rack]; ok {
			t.Fatalf("child Jobs %s and %s share rack %s", other, child, rack)
		}
		racks[rack] = child
		ann := w.bindAnnotations[string(leader.UID)]
		slots, err := parseHeld(ann[v1alpha1.AnnotationHeldRoom])
		if err != nil || len(slots) != 3 {
			t.Fatalf("leader %s holds %v (%v), want its 3 followers' places", leader.Name, slots, err)
		}
		for _, s := range slots {
			if r, _, _ := strings.Cut(s.node, "-"); r != rack {
				t.Errorf("leader %s in rack %s holds a place on %s", leader.Name, rack, s.node)
			}
		}
		b := leader.DeepCopy()
		b.Spec.NodeName = pb.Node
		for k, v := range ann {
			b.Annotations[k] = v
		}
		bound = append(bound, b)
	}

	// The followers of ex-w-1 appear: bound into its leader's rack.
	pods := append([]*corev1.Pod(nil), bound...)
	for _, i := range []string{"1", "2", "3"} {
		p := pod("ex-w-1-"+i).gpus(8).jobSet("ex", "w").ann(jobSetExclusiveKey, "corral.dev/rack").ann(jobCompletionIndexKey, i).obj()
		tr := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "ex-w-1", UID: "u-ex1", Controller: &tr}}
		pods = append(pods, p)
	}
	slotBinds, empty, warns := heldRoom(pods, map[string]assumedPod{}, testCfg, now)
	if len(warns) > 0 {
		t.Fatalf("warnings: %v", warns)
	}
	if len(slotBinds) != 3 || len(empty) != 3 {
		t.Fatalf("%d followers bound into held room, %d places left; want 3 and 3 (ex-w-0's)", len(slotBinds), len(empty))
	}
	for _, sb := range slotBinds {
		if r, _, _ := strings.Cut(sb.node, "-"); racks[r] != "ex-w-1" {
			t.Errorf("follower %s bound to %s, in the rack of %s", sb.pod.Name, sb.node, racks[r])
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
