package kube

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

const zoneLabel = "topology.kubernetes.io/zone"

// knode builds a Ready node with a hostname, a zone and extra labels.
func knode(name, zone string, taints []corev1.Taint, kv ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"kubernetes.io/hostname": name, zoneLabel: zone}},
		Spec:   corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

var gpuTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// affinityNodes: a tainted GPU pool of four nodes over two zones, two plain
// CPU nodes (one tainted PreferNoSchedule, which filters nothing), one node
// under a NoExecute taint.
func affinityNodes() []*corev1.Node {
	gpu := []corev1.Taint{gpuTaint}
	return []*corev1.Node{
		knode("c0", "a", nil),
		knode("c1", "b", []corev1.Taint{{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}}),
		knode("g0", "a", gpu, "pool", "gpu", "gpus", "8"),
		knode("g1", "a", gpu, "pool", "gpu", "gpus", "8"),
		knode("g2", "b", gpu, "pool", "gpu", "gpus", "4"),
		knode("g3", "b", gpu, "pool", "gpu", "gpus", "4"),
		knode("x0", "b", []corev1.Taint{{Key: "maintenance", Value: "true", Effect: corev1.TaintEffectNoExecute}}),
	}
}

func tolerate(key string, op corev1.TolerationOperator, value string, effect corev1.TaintEffect) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect}
}

func nodeAffinity(reqs ...corev1.NodeSelectorRequirement) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}}}}
}

func podTerm(key string, labels map[string]string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}
}

func antiAffinity(terms ...corev1.PodAffinityTerm) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
}

func podAffinity(terms ...corev1.PodAffinityTerm) *corev1.Affinity {
	return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
}

// runningPod is a pod of any scheduler on a node.
func runningPod(name, node string, labels map[string]string, aff *corev1.Affinity) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("run-" + name), Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Affinity: aff}}
}

func TestEligibility(t *testing.T) {
	gpuTol := tolerate("nvidia.com/gpu", corev1.TolerationOpExists, "", "")
	taintWhy := "4 nodes have taint nvidia.com/gpu=present:NoSchedule that the pod does not tolerate"
	noExecWhy := "1 node has taint maintenance=true:NoExecute that the pod does not tolerate"
	cases := map[string]struct {
		tol      []corev1.Toleration
		selector map[string]string
		aff      *corev1.Affinity
		labels   map[string]string
		running  []*corev1.Pod
		// want is the eligible nodes, nil for "every node" (no filter).
		want    []string
		why     string
		apart   []string // keys of the Apart terms
		problem string
	}{
		"no toleration: the tainted pool is out, PreferNoSchedule is only a score": {
			want: []string{"c0", "c1"}, why: taintWhy + "; " + noExecWhy,
		},
		"Exists on the key tolerates the pool": {
			tol:  []corev1.Toleration{gpuTol},
			want: []string{"c0", "c1", "g0", "g1", "g2", "g3"}, why: noExecWhy,
		},
		"Equal with the taint's value and effect": {
			tol:  []corev1.Toleration{tolerate("nvidia.com/gpu", corev1.TolerationOpEqual, "present", corev1.TaintEffectNoSchedule)},
			want: []string{"c0", "c1", "g0", "g1", "g2", "g3"}, why: noExecWhy,
		},
		"Equal with another value does not": {
			tol:  []corev1.Toleration{tolerate("nvidia.com/gpu", corev1.TolerationOpEqual, "absent", "")},
			want: []string{"c0", "c1"}, why: taintWhy + "; " + noExecWhy,
		},
		"a toleration for another effect does not": {
			tol:  []corev1.Toleration{tolerate("nvidia.com/gpu", corev1.TolerationOpExists, "", corev1.TaintEffectNoExecute)},
			want: []string{"c0", "c1"}, why: taintWhy + "; " + noExecWhy,
		},
		"an empty key with Exists tolerates every taint": {
			tol: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
		"node affinity In": {
			tol:  []corev1.Toleration{gpuTol},
			aff:  nodeAffinity(corev1.NodeSelectorRequirement{Key: zoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}),
			want: []string{"c0", "g0", "g1"},
			why:  "4 nodes do not match its node selector or node affinity",
		},
		"node affinity NotIn": {
			tol:  []corev1.Toleration{gpuTol},
			aff:  nodeAffinity(corev1.NodeSelectorRequirement{Key: "pool", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"gpu"}}),
			want: []string{"c0", "c1"}, why: "4 nodes do not match its node selector or node affinity; " + noExecWhy,
		},
		"node affinity Exists": {
			tol:  []corev1.Toleration{gpuTol},
			aff:  nodeAffinity(corev1.NodeSelectorRequirement{Key: "pool", Operator: corev1.NodeSelectorOpExists}),
			want: []string{"g0", "g1", "g2", "g3"}, why: "3 nodes do not match its node selector or node affinity",
		},
		"node affinity Gt": {
			tol:  []corev1.Toleration{gpuTol},
			aff:  nodeAffinity(corev1.NodeSelectorRequirement{Key: "gpus", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}),
			want: []string{"g0", "g1"}, why: "5 nodes do not match its node selector or node affinity",
		},
		"nodeSelector and node affinity both apply": {
			tol:      []corev1.Toleration{gpuTol},
			selector: map[string]string{"pool": "gpu"},
			aff:      nodeAffinity(corev1.NodeSelectorRequirement{Key: zoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}),
			want:     []string{"g2", "g3"}, why: "5 nodes do not match its node selector or node affinity",
		},
		"hostname anti-affinity keeps off a running replica's node and binds the job's replicas": {
			tol:     []corev1.Toleration{gpuTol},
			labels:  map[string]string{"app": "train"},
			aff:     antiAffinity(podTerm("kubernetes.io/hostname", map[string]string{"app": "train"})),
			running: []*corev1.Pod{runningPod("old", "g1", map[string]string{"app": "train"}, nil)},
			want:    []string{"c0", "c1", "g0", "g2", "g3"},
			why:     "1 node has a running pod its pod anti-affinity selects in their node; " + noExecWhy,
			apart:   []string{"kubernetes.io/hostname"},
		},
		"zone anti-affinity keeps off the whole zone": {
			tol:     []corev1.Toleration{gpuTol},
			aff:     antiAffinity(podTerm(zoneLabel, map[string]string{"app": "db"})),
			running: []*corev1.Pod{runningPod("db", "c0", map[string]string{"app": "db"}, nil)},
			want:    []string{"c1", "g2", "g3"},
			why:     "3 nodes have a running pod its pod anti-affinity selects in their zone; " + noExecWhy,
		},
		"affinity co-locates with a labelled running pod": {
			tol:     []corev1.Toleration{gpuTol},
			aff:     podAffinity(podTerm("kubernetes.io/hostname", map[string]string{"app": "cache"})),
			running: []*corev1.Pod{runningPod("cache", "g2", map[string]string{"app": "cache"}, nil)},
			want:    []string{"g2"},
			why:     "5 nodes have no running pod its pod affinity selects in their node; " + noExecWhy,
		},
		"affinity to pods that do not run, not selecting itself: no node": {
			tol:  []corev1.Toleration{gpuTol},
			aff:  podAffinity(podTerm(zoneLabel, map[string]string{"app": "cache"})),
			want: []string{},
			why:  "6 nodes have no running pod its pod affinity selects in their zone; " + noExecWhy,
		},
		"a running pod's anti-affinity rejects the pod (symmetry)": {
			tol:    []corev1.Toleration{gpuTol},
			labels: map[string]string{"team": "x"},
			running: []*corev1.Pod{runningPod("loner", "g0", nil,
				antiAffinity(podTerm(zoneLabel, map[string]string{"team": "x"})))},
			want: []string{"c1", "g2", "g3"},
			why:  "3 nodes have a running pod in their zone whose anti-affinity rejects it; " + noExecWhy,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nodes := affinityNodes()
			e := newEligibility(nodes, nodes, tc.running, nil)
			p := pod("p").gpus(1).obj()
			p.Spec.Tolerations, p.Spec.NodeSelector, p.Spec.Affinity = tc.tol, tc.selector, tc.aff
			for k, v := range tc.labels {
				p.Labels[k] = v
			}
			c := e.forPod(p)
			if diff := cmp.Diff(tc.problem, c.problem); diff != "" {
				t.Fatalf("problem (-want +got):\n%s", diff)
			}
			var got []string
			why := ""
			if c.filter != nil {
				got, why = append([]string{}, c.filter.Nodes...), c.filter.Why()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("eligible nodes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.why, why); diff != "" {
				t.Errorf("why (-want +got):\n%s", diff)
			}
			var keys []string
			for _, a := range c.apart {
				keys = append(keys, a.Key)
			}
			if diff := cmp.Diff(tc.apart, keys); diff != "" {
				t.Errorf("apart (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEligibilityCordoned: a cordoned node's taint filters nothing: the
// node is out for every pod already, and one cordon must not make every
// pod a constrained one.
func TestEligibilityCordoned(t *testing.T) {
	n := knode("c0", "a", []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}})
	n.Spec.Unschedulable = true
	nodes := []*corev1.Node{n, knode("c1", "a", nil)}
	if c := newEligibility(nodes, nodes, nil, nil).forPod(pod("p").obj()); c.filter != nil {
		t.Errorf("filter %+v, want none", c.filter)
	}
}

// TestEligibilityShared: pods that differ only in labels no term reads (an
// indexed Job's completion index) share one filter and one pod set.
func TestEligibilityShared(t *testing.T) {
	nodes := affinityNodes()
	e := newEligibility(nodes, nodes, nil, nil)
	groups := fakeGroups{parallelism: map[string]int{"train": 3}, elig: e}
	var pods []*corev1.Pod
	for i, name := range []string{"t-0", "t-1", "t-2"} {
		p := pod(name).gpus(8).ownedByJob("train").obj()
		p.Labels["batch.kubernetes.io/job-completion-index"] = string(rune('0' + i))
		p.Labels["app"] = "train"
		p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
		p.Spec.Affinity = antiAffinity(podTerm("kubernetes.io/hostname", map[string]string{"app": "train"}))
		pods = append(pods, p)
	}
	jobs := buildJobs(pods, nil, groups, nil, testCfg)
	if len(jobs) != 1 || jobs[0].invalid != "" || len(jobs[0].job.PodSets) != 1 {
		t.Fatalf("want one valid job with one pod set, got %d jobs: %+v", len(jobs), jobs[0])
	}
	r := jobs[0].job.PodSets[0].Request
	if r.Nodes == nil || len(r.Nodes.Nodes) != 6 || len(r.Apart) != 1 || r.Apart[0].Key != "kubernetes.io/hostname" {
		t.Errorf("request %s: want 6 eligible nodes and hostname anti-affinity", r)
	}
	if len(e.byKey) != 1 {
		t.Errorf("%d distinct constraints evaluated, want 1", len(e.byKey))
	}
}

func TestGangAffinity(t *testing.T) {
	levels := map[string]string{"zone": zoneLabel}
	member := func(name string, labels map[string]string, aff *corev1.Affinity) *corev1.Pod {
		p := pod(name).gpus(1).ann("corral.dev/gang", "g").obj()
		for k, v := range labels {
			p.Labels[k] = v
		}
		p.Spec.Affinity = aff
		return p
	}
	self := map[string]string{"app": "g"}
	cases := map[string]struct {
		pods     []*corev1.Pod
		required string
		invalid  string
	}{
		"self-affinity on a Topology level becomes the required level": {
			pods: []*corev1.Pod{member("a", self, podAffinity(podTerm(zoneLabel, self))),
				member("b", self, podAffinity(podTerm(zoneLabel, self)))},
			required: "zone",
		},
		"self-affinity on the hostname puts the gang on one node": {
			pods: []*corev1.Pod{member("a", self, podAffinity(podTerm("kubernetes.io/hostname", self))),
				member("b", self, podAffinity(podTerm("kubernetes.io/hostname", self)))},
			required: "host",
		},
		"self-affinity on a key that is no level cannot be honoured": {
			pods: []*corev1.Pod{member("a", self, podAffinity(podTerm("rack.example/id", self))),
				member("b", self, podAffinity(podTerm("rack.example/id", self)))},
			invalid: "its pod affinity keeps the job's pods in one domain of rack.example/id, which is not a level of the cluster's Topology",
		},
		"anti-affinity selecting a replica without the term is not supported": {
			pods:    []*corev1.Pod{member("a", self, antiAffinity(podTerm("kubernetes.io/hostname", self))), member("b", self, nil)},
			invalid: "pod a: its pod anti-affinity (topology key kubernetes.io/hostname) selects pod b of the same job, which does not carry the same term; corral supports anti-affinity between replicas that share it",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nodes := affinityNodes()
			groups := fakeGroups{elig: newEligibility(nodes, nodes, nil, nil)}
			jobs := buildJobs(tc.pods, nil, groups, levels, testCfg)
			if len(jobs) != 1 {
				t.Fatalf("%d jobs, want 1", len(jobs))
			}
			if diff := cmp.Diff(tc.invalid, jobs[0].invalid); diff != "" {
				t.Errorf("invalid (-want +got):\n%s", diff)
			}
			if tc.invalid == "" && jobs[0].job.Topology.Required != tc.required {
				t.Errorf("required %q, want %q", jobs[0].job.Topology.Required, tc.required)
			}
		})
	}
}

var _ = workload.Apart{}

// TestTaintedPoolCycle runs the adapter's request building and one engine
// cycle over real Node and Pod objects: a managed GPU pool tainted
// nvidia.com/gpu=present:NoSchedule is used by a gang that tolerates it,
// never by one that does not, which is told which taint kept it out.
func TestTaintedPoolCycle(t *testing.T) {
	gpuNode := func(name string, taints ...corev1.Taint) *corev1.Node {
		n := knode(name, "a", taints)
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("512Gi"), "nvidia.com/gpu": resource.MustParse("8")}
		return n
	}
	nodes := []*corev1.Node{gpuNode("plain-0")}
	for _, name := range []string{"pool-0", "pool-1", "pool-2", "pool-3"} {
		nodes = append(nodes, gpuNode(name, gpuTaint))
	}
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
	for i := 0; i < 3; i++ {
		p := pod(fmt.Sprintf("tolerant-%d", i)).gpus(8).ownedByJob("tolerant").obj()
		p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
		pods = append(pods, p)
	}
	for i := 0; i < 2; i++ {
		pods = append(pods, pod(fmt.Sprintf("intolerant-%d", i)).gpus(8).ownedByJob("intolerant").obj())
	}
	groups := fakeGroups{parallelism: map[string]int{"tolerant": 3, "intolerant": 2}, elig: newEligibility(nodes, nodes, pods, nil)}
	snap := &engine.Snapshot{State: state, Now: time.Unix(1000, 0)}
	for _, kj := range buildJobs(pods, nil, groups, nil, testCfg) {
		if kj.invalid != "" || kj.waiting != "" {
			t.Fatalf("job %s: invalid %q waiting %q", kj.key, kj.invalid, kj.waiting)
		}
		snap.Pending = append(snap.Pending, engine.PendingJob{Job: kj.job})
	}
	plan := engine.New(engine.Config{Policy: engine.Corral}).Cycle(snap)
	var bound []string
	for _, b := range plan.Binds {
		for _, p := range b.Pods {
			if b.Job != "job/ns/tolerant" {
				t.Errorf("job %s bound to %s", b.Job, p.Node)
			}
			bound = append(bound, p.Node)
		}
	}
	sort.Strings(bound)
	// A toleration allows the pool; it does not require it: the untainted
	// node is as good for the tolerant gang.
	if diff := cmp.Diff([]string{"plain-0", "pool-0", "pool-1"}, bound); diff != "" {
		t.Errorf("tolerant pods bound (-want +got):\n%s", diff)
	}
	want := "the cluster could never hold 2×[8 GPU on 1 eligible nodes, 2 CPU, 4 GiB]: the largest cluster (cluster) holds 1 of 2 pods when empty; " +
		"4 nodes have taint nvidia.com/gpu=present:NoSchedule that the pod does not tolerate"
	if len(plan.Pending) != 1 || plan.Pending[0].Job != "job/ns/intolerant" {
		t.Fatalf("pending %+v, want the intolerant job", plan.Pending)
	}
	if diff := cmp.Diff(want, plan.Pending[0].Reason.Message); diff != "" {
		t.Errorf("reason (-want +got):\n%s", diff)
	}
}
