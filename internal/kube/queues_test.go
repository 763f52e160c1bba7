package kube

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// queueB builds a Queue object.
type queueB struct{ q v1alpha1.Queue }

func queueObj(name string) *queueB {
	return &queueB{q: v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

func (b *queueB) parent(p string) *queueB { b.q.Spec.Parent = p; return b }
func (b *queueB) res(name, guaranteed, limit, weight string) *queueB {
	r := v1alpha1.QueueResource{Name: name}
	for _, f := range []struct {
		s   string
		dst **resource.Quantity
	}{{guaranteed, &r.Guaranteed}, {limit, &r.Limit}, {weight, &r.Weight}} {
		if f.s != "" {
			q := resource.MustParse(f.s)
			*f.dst = &q
		}
	}
	b.q.Spec.Resources = append(b.q.Spec.Resources, r)
	return b
}
func (b *queueB) weight(w string) *queueB {
	q := resource.MustParse(w)
	b.q.Spec.Weight = &q
	return b
}
func (b *queueB) namespaces(ns ...string) *queueB { b.q.Spec.Namespaces = ns; return b }
func (b *queueB) defaultFor(ns ...string) *queueB { b.q.Spec.DefaultForNamespaces = ns; return b }
func (b *queueB) reclaim(p v1alpha1.ReclaimPolicy) *queueB {
	b.q.Spec.ReclaimPolicy = p
	return b
}
func (b *queueB) obj() *v1alpha1.Queue { q := b.q; return &q }

func TestQueueSpec(t *testing.T) {
	cases := map[string]struct {
		q      *v1alpha1.Queue
		models []string // the cluster's GPU models
		want   cycle.QueueSpec
		probs  []string
	}{
		"every unit": {
			q: queueObj("a").parent("org").
				res("gpu/H100", "8", "16", "3").res("nvidia.com/gpu", "500m", "", "").
				res("cpu", "4", "8500m", "").res("memory", "1Gi", "1500Mi", "").res("example.com/fpga", "2", "", "").
				weight("2").namespaces("ns-a").reclaim(v1alpha1.ReclaimPreempt).obj(),
			want: cycle.QueueSpec{Name: "a", Parent: "org", Namespaces: []string{"ns-a"}, Reclaim: true,
				Guarantee: cycle.Amounts{"gpu/H100": 8000, "gpu": 500, "cpu": 4000, "memory": 1024, "example.com/fpga": 2},
				Limit:     cycle.Amounts{"gpu/H100": 16000, "cpu": 8500, "memory": 1500},
				Weight:    map[cycle.Resource]float64{"*": 2, "gpu/H100": 3}},
		},
		"reclaimPolicy Strict reclaims, strictly": {
			q:    queueObj("a").reclaim(v1alpha1.ReclaimStrict).obj(),
			want: cycle.QueueSpec{Name: "a", Reclaim: true, StrictReclaim: true},
		},
		"nvidia.com/gpu is the cluster's one model": {
			q:      queueObj("a").res("nvidia.com/gpu", "4", "8", "").obj(),
			models: []string{"A100"},
			want:   cycle.QueueSpec{Name: "a", Guarantee: cycle.Amounts{"gpu/A100": 4000}, Limit: cycle.Amounts{"gpu/A100": 8000}},
		},
		"nvidia.com/gpu with several models": {
			q:      queueObj("a").res("nvidia.com/gpu", "4", "", "").obj(),
			models: []string{"A100", "H100"},
			want:   cycle.QueueSpec{Name: "a"},
			probs:  []string{`resource "nvidia.com/gpu": the cluster has GPUs of 2 models (A100, H100): give the quota per model, as gpu/<model>`},
		},
		"nvidia.com/gpu and its model": {
			q:      queueObj("a").res("nvidia.com/gpu", "4", "", "").res("gpu/H100", "2", "", "").obj(),
			models: []string{"H100"},
			want:   cycle.QueueSpec{Name: "a", Guarantee: cycle.Amounts{"gpu/H100": 4000}},
			probs:  []string{`resources "nvidia.com/gpu" and "gpu/H100" name the same resource`},
		},
		"memory rounds up to MiB": {
			q:    queueObj("a").res("memory", "1M", "", "").obj(),
			want: cycle.QueueSpec{Name: "a", Guarantee: cycle.Amounts{"memory": 1}},
		},
		"no resources": {
			q:    queueObj("a").obj(),
			want: cycle.QueueSpec{Name: "a"},
		},
		"negative guarantee": {
			q:     queueObj("a").res("gpu/H100", "-1", "", "").obj(),
			want:  cycle.QueueSpec{Name: "a"},
			probs: []string{`resource "gpu/H100" guaranteed -1: must not be negative`},
		},
		"zero weight": {
			q:     queueObj("a").res("cpu", "", "", "0").weight("-1").obj(),
			want:  cycle.QueueSpec{Name: "a"},
			probs: []string{"weight: -1 must be a positive number", `resource "cpu" weight: 0 must be a positive number`},
		},
		"fractional device": {
			q:     queueObj("a").res("example.com/fpga", "1500m", "", "").obj(),
			want:  cycle.QueueSpec{Name: "a"},
			probs: []string{`resource "example.com/fpga" guaranteed 1500m: must be a whole number of devices`},
		},
		"huge amount": {
			q:     queueObj("a").res("cpu", "", "1e18", "").obj(),
			want:  cycle.QueueSpec{Name: "a"},
			probs: []string{`resource "cpu" limit 1e18: above the largest supported amount 1e12`},
		},
		"bad names": {
			q:    queueObj("a").res("gpu/", "1", "", "").res("gpu", "1", "", "").res("*", "1", "", "").res("gpu/a/b", "1", "", "").obj(),
			want: cycle.QueueSpec{Name: "a"},
			probs: []string{`resource "gpu/": want gpu/<model>, e.g. gpu/H100`,
				`resource "gpu": GPUs of any model are spelled "nvidia.com/gpu"`,
				`resource "*": not a resource name`,
				`resource "gpu/a/b": want gpu/<model>, e.g. gpu/H100`},
		},
		"self parent and bad policy": {
			q:     queueObj("a").parent("a").reclaim("Sometimes").obj(),
			want:  cycle.QueueSpec{Name: "a", Parent: "a"},
			probs: []string{"a queue cannot be its own parent", `reclaimPolicy "Sometimes": want Never, Preempt or Strict`},
		},
		"default outside namespaces": {
			q:     queueObj("a").namespaces("x").defaultFor("y").obj(),
			want:  cycle.QueueSpec{Name: "a", Namespaces: []string{"x"}},
			probs: []string{`defaultForNamespaces lists "y", which namespaces does not admit`},
		},
		"the same resource twice": {
			q:     queueObj("a").res("cpu", "1", "", "").res("cpu", "2", "", "").obj(),
			want:  cycle.QueueSpec{Name: "a", Guarantee: cycle.Amounts{"cpu": 1000}},
			probs: []string{`resources "cpu" and "cpu" name the same resource`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, probs := queueSpec(tc.q, "nvidia.com/gpu", tc.models)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.probs, probs); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// enginePlan runs one engine cycle over the queues of qs on a one-node
// cluster, with one job of one 1-CPU pod per entry of jobs (its queue
// label and namespace), as the adapter hands them over (world.admit).
func enginePlan(t testing.TB, qs *queueSet, jobs ...[2]string) engine.Plan {
	t.Helper()
	st, err := cluster.New(cluster.Topology{}, []cluster.Node{gpuNode("n1", 8)})
	if err != nil {
		t.Fatal(err)
	}
	snap := &engine.Snapshot{State: st, Queues: qs.specs, Now: time.Unix(1000, 0)}
	for i, lj := range jobs {
		j := &workload.Job{ID: workload.JobID(fmt.Sprint("job-", i)), Namespace: lj[1], Queue: lj[0],
			PodSets: []workload.PodSet{{Name: "p", Count: 1, Request: workload.Request{CPUMilli: 1000, MemMiB: 1}}}}
		if j.Queue == "" && !qs.enabled() {
			j.Queue = "default"
		}
		snap.Pending = append(snap.Pending, engine.PendingJob{Job: j})
	}
	return engine.New(engine.Config{Policy: engine.Corral}).Cycle(snap)
}

// admitted is where the engine put the one job of enginePlan: the leaf
// queue charged with its CPU, or its refusal.
func admitted(t testing.TB, qs *queueSet, label, ns string) (queue, refusal, msg string) {
	t.Helper()
	plan := enginePlan(t, qs, [2]string{label, ns})
	for _, p := range plan.Pending {
		if p.Reason.Verdict == placement.Refused {
			return "", p.Reason.Refusal, p.Reason.Message
		}
		t.Fatalf("job pending, not refused: %+v", p.Reason)
	}
	for _, q := range plan.Queues {
		if q.Leaf && q.Allocated[cycle.CPU] > 0 {
			return q.Name, "", ""
		}
	}
	return "", "", "" // queues off: no queue charged
}

// TestQueueSetProblems: the adapter's conversion problems and the tree's
// own both reach the Queue's status through the engine, once each.
func TestQueueSetProblems(t *testing.T) {
	objs := []*v1alpha1.Queue{
		queueObj("org").res("gpu/H100", "8", "", "").obj(),
		queueObj("team-a").parent("org").res("gpu/H100", "6", "", "").obj(),
		queueObj("team-b").parent("org").res("gpu/H100", "6", "", "").obj(),
		queueObj("broken").res("cpu", "-1", "", "").obj(),
		queueObj("under-broken").parent("broken").obj(),
		queueObj("orphan").parent("nope").obj(),
		queueObj("ok").obj(),
		queueObj("fine").obj(),
	}
	qs := newQueueSet(objs, map[string]string{"ok": "the spec does not decode: bad"}, "nvidia.com/gpu", nil)
	want := map[string]string{
		"broken":       `resource "cpu" guaranteed -1: must not be negative`,
		"under-broken": `left out with its ancestor "broken", which is invalid`,
		"ok":           "the spec does not decode: bad",
		"org":          "children's guarantees of gpu/H100 add up to 12 H100 GPUs (team-a 6 H100 GPUs, team-b 6 H100 GPUs), above its own guarantee of 8 H100 GPUs",
		"orphan":       `unknown parent "nope"`,
		"team-a":       `left out with its ancestor "org", which is invalid`,
		"team-b":       `left out with its ancestor "org", which is invalid`,
		"fine":         "",
	}
	got := map[string]string{}
	for name, st := range queueStatuses(qs, enginePlan(t, qs).Queues, "nvidia.com/gpu") {
		c := st.Conditions[0]
		if c.Status == metav1.ConditionTrue {
			got[name] = ""
			continue
		}
		got[name] = c.Message
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestQueueAdmission: the engine admits the adapter's jobs into their
// queues, with defaultForNamespaces, and names the refusal the pod's
// condition shows.
func TestQueueAdmission(t *testing.T) {
	qs := newQueueSet([]*v1alpha1.Queue{
		queueObj("org").obj(),
		queueObj("team-a").parent("org").namespaces("ns-a", "ns-shared").defaultFor("ns-a").obj(),
		queueObj("team-b").parent("org").defaultFor("ns-b", "ns-both").obj(),
		queueObj("team-c").defaultFor("ns-both").obj(),
		queueObj("default").obj(),
		queueObj("bad").res("cpu", "-1", "", "").obj(),
	}, nil, "nvidia.com/gpu", nil)
	type want struct {
		queue  string
		reason string
		msg    string
	}
	cases := map[string]struct {
		label, ns string
		want      want
	}{
		"label":                  {"team-a", "ns-shared", want{queue: "team-a"}},
		"namespace default":      {"", "ns-a", want{queue: "team-a"}},
		"the default queue":      {"", "ns-other", want{queue: "default"}},
		"unknown":                {"nope", "ns-a", want{reason: "UnknownQueue", msg: `queue "nope" does not exist`}},
		"namespace not admitted": {"team-a", "ns-b", want{reason: "NamespaceDenied", msg: `namespace "ns-b" may not submit to queue "team-a" (it admits namespaces ns-a, ns-shared)`}},
		"inner queue":            {"org", "ns-a", want{reason: "NotLeaf", msg: `queue "org" is not a leaf queue; submit to one of its leaves (team-a, team-b)`}},
		"invalid queue":          {"bad", "ns-a", want{reason: "InvalidQueue", msg: `queue "bad" is invalid: resource "cpu" guaranteed -1: must not be negative`}},
		"two defaults": {"", "ns-both", want{reason: "NoDefault",
			msg: `namespace "ns-both" has no default queue: queues team-b, team-c all list it in defaultForNamespaces; the job must name its queue`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got want
			got.queue, got.reason, got.msg = admitted(t, qs, tc.label, tc.ns)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("admit(%q, %q) (-want +got):\n%s", tc.label, tc.ns, diff)
			}
		})
	}

	// Without a default queue at all, the message says so.
	qs = newQueueSet([]*v1alpha1.Queue{queueObj("team-a").obj()}, nil, "nvidia.com/gpu", nil)
	if _, reason, _ := admitted(t, qs, "", "ns"); reason != "NoDefault" {
		t.Errorf("no default queue: refusal %q", reason)
	}
	// Without Queue objects, queues are off: nothing is refused.
	qs = newQueueSet(nil, nil, "nvidia.com/gpu", nil)
	if plan := enginePlan(t, qs, [2]string{"anything", "ns"}); len(plan.Binds) != 1 {
		t.Errorf("queues off: %+v", plan.Pending)
	}
}

func TestResourceListRoundTrip(t *testing.T) {
	got := resourceList(cycle.Amounts{"gpu/H100": 2500, "gpu": 1000, "cpu": 1500, "memory": 2048, "example.com/fpga": 3, "zero": 0}, "nvidia.com/gpu")
	// nvidia.com/gpu is every model's GPUs: the one model's 2.5 and the 1
	// of any model.
	want := map[corev1.ResourceName]string{"gpu/H100": "2500m", "nvidia.com/gpu": "3500m", "cpu": "1500m", "memory": "2Gi", "example.com/fpga": "3"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for r, s := range want {
		q := got[r]
		if q.Cmp(resource.MustParse(s)) != 0 {
			t.Errorf("%s = %s, want %s", r, q.String(), s)
		}
	}
	if resourceList(nil, "nvidia.com/gpu") != nil {
		t.Error("empty amounts should give no list")
	}
}

func TestQueueStatuses(t *testing.T) {
	qs := newQueueSet([]*v1alpha1.Queue{
		queueObj("a").res("gpu/H100", "8", "", "").obj(),
		queueObj("orphan").parent("nope").obj(),
	}, nil, "nvidia.com/gpu", nil)
	got := queueStatuses(qs, []engine.QueueStatus{{Name: "a", Leaf: true, Allocated: cycle.Amounts{"gpu/H100": 4000}, FairShare: cycle.Amounts{"gpu/H100": 8000}},
		{Name: "orphan", Problem: `unknown parent "nope"`}}, "nvidia.com/gpu")
	a := got["a"]
	if c := a.Conditions[0]; c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.QueueReasonActive {
		t.Errorf("a: condition %+v", c)
	}
	if q := a.Allocated["gpu/H100"]; q.Value() != 4 {
		t.Errorf("a: allocated %v", a.Allocated)
	}
	// kubectl's GPU columns and corral queues read the total.
	if q := a.Allocated["nvidia.com/gpu"]; q.Value() != 4 {
		t.Errorf("a: allocated %v, want nvidia.com/gpu too", a.Allocated)
	}
	if q := a.FairShare["gpu/H100"]; q.Value() != 8 {
		t.Errorf("a: fair share %v", a.FairShare)
	}
	o := got["orphan"].Conditions[0]
	if o.Status != metav1.ConditionFalse || o.Reason != v1alpha1.QueueReasonInvalid || o.Message != `unknown parent "nope"` {
		t.Errorf("orphan: condition %+v", o)
	}
}

func TestRunningJob(t *testing.T) {
	now := time.Unix(10_000, 0)
	at := func(sec int64) metav1.Time { return metav1.NewTime(time.Unix(sec, 0)) }
	s, err := cluster.New(cluster.Topology{}, []cluster.Node{{Name: "n1", CPUMilli: 64000, MemMiB: 1 << 20,
		Devices: []cluster.Device{{ID: "gpu0", Model: "H100"}, {ID: "gpu1", Model: "H100"}}}})
	if err != nil {
		t.Fatal(err)
	}
	p0 := pod("w0").gpus(1).boundTo("n1").ann(v1alpha1.AnnotationLastCheckpoint, time.Unix(9_000, 0).UTC().Format(time.RFC3339)).obj()
	p0.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(5_000)}}
	p1 := pod("w1").gpus(1).boundTo("n1").ann(v1alpha1.AnnotationLastCheckpoint, time.Unix(8_000, 0).UTC().Format(time.RFC3339)).obj()
	p1.Status.StartTime = ptr(at(6_000))
	p2 := pod("w2").gpus(1).ann(v1alpha1.AnnotationLastCheckpoint, "yesterday").obj() // pending
	kj := &kjob{job: &workload.Job{ID: "j"}, pods: map[workload.PodRef]*corev1.Pod{}, bound: map[workload.PodRef]string{}}
	for i, p := range []*corev1.Pod{p0, p1, p2} {
		ref := workload.PodRef{Job: "j", Index: i}
		kj.refs = append(kj.refs, ref)
		kj.pods[ref] = p
		if p.Spec.NodeName != "" {
			kj.bound[ref] = p.Spec.NodeName
		}
	}
	holds := map[string]podHold{
		string(p0.UID): {node: 0, alloc: cluster.Alloc{CPUMilli: 2000, Devices: []cluster.DeviceShare{{Device: 0, Milli: 1000}}}},
		string(p1.UID): {node: 0, alloc: cluster.Alloc{CPUMilli: 2000, Devices: []cluster.DeviceShare{{Device: 1, Milli: 1000}}}},
	}
	rj, warns := runningJob(kj, holds, nil, s, now)
	if !rj.Start.Equal(time.Unix(6_000, 0)) {
		t.Errorf("start = %v, want the last pod's start (6000)", rj.Start.Unix())
	}
	if !rj.Checkpoints.Last().Equal(time.Unix(8_000, 0)) {
		t.Errorf("last checkpoint = %v, want the oldest one reported (8000)", rj.Checkpoints.Last().Unix())
	}
	var devs []string
	for _, pb := range rj.Pods {
		devs = append(devs, pb.Node+":"+pb.Devices[0])
	}
	if diff := cmp.Diff([]string{"n1:gpu0", "n1:gpu1"}, devs); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	if len(warns) != 0 {
		t.Errorf("warnings for a pending pod's annotation: %v", warns)
	}
	// A bound pod's bad annotation is ignored with a warning.
	p1.Annotations[v1alpha1.AnnotationLastCheckpoint] = "yesterday"
	rj, warns = runningJob(kj, holds, nil, s, now)
	if len(warns) != 1 || !rj.Checkpoints.Last().Equal(time.Unix(9_000, 0)) {
		t.Errorf("bad annotation: warnings %v, checkpoint %v", warns, rj.Checkpoints.Last().Unix())
	}
	// Engine cost on what the adapter built: 2 GPUs x (10000-9000 s).
	if got := engine.RestartCost(rj, nil, now); got != 2000 {
		t.Errorf("restart cost = %v GPU-s, want 2000", got)
	}
}

func ptr[T any](v T) *T { return &v }

// TestExampleQueues: the example tree converts and builds without a problem.
func TestExampleQueues(t *testing.T) {
	raw, err := os.ReadFile("../../examples/queues.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var objs []*v1alpha1.Queue
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var q v1alpha1.Queue
		if err := yaml.UnmarshalStrict([]byte(doc), &q); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &q)
	}
	qs := newQueueSet(objs, nil, "nvidia.com/gpu", nil)
	for _, q := range enginePlan(t, qs).Queues {
		if q.Problem != "" {
			t.Errorf("queue %s: %s", q.Name, q.Problem)
		}
	}
	if len(qs.specs) != 4 {
		t.Fatalf("%d specs, want 4", len(qs.specs))
	}
	if q, reason, _ := admitted(t, qs, "", "team-b"); q != "team-b" || reason != "" {
		t.Errorf("team-b's default: %q %s", q, reason)
	}
	if _, reason, _ := admitted(t, qs, "team-a", "team-b"); reason != "NamespaceDenied" {
		t.Errorf("team-b submitting to team-a: %s", reason)
	}
}

func TestQueueMetrics(t *testing.T) {
	m := newQueueMetrics()
	qs := newQueueSet([]*v1alpha1.Queue{queueObj("a").obj(), queueObj("orphan").parent("nope").obj()}, nil, "nvidia.com/gpu", nil)
	m.set(queueStatuses(qs, []engine.QueueStatus{{Name: "a", Leaf: true,
		Allocated: cycle.Amounts{"gpu/H100": 2500, "memory": 1024}, FairShare: cycle.Amounts{"gpu/H100": 8000}},
		{Name: "orphan", Problem: `unknown parent "nope"`}}, "nvidia.com/gpu"))
	for _, c := range []struct {
		g    *prometheus.GaugeVec
		lv   []string
		want float64
	}{
		{m.allocated, []string{"a", "gpu/H100"}, 2.5},
		{m.allocated, []string{"a", "memory"}, 1 << 30},
		{m.fairShare, []string{"a", "gpu/H100"}, 8},
		{m.accepted, []string{"a"}, 1},
		{m.accepted, []string{"orphan"}, 0},
	} {
		var got dto.Metric
		if err := c.g.WithLabelValues(c.lv...).Write(&got); err != nil {
			t.Fatal(err)
		}
		if got.GetGauge().GetValue() != c.want {
			t.Errorf("%v = %v, want %v", c.lv, got.GetGauge().GetValue(), c.want)
		}
	}
	// A queue that is gone leaves the gauges.
	m.set(queueStatuses(newQueueSet(nil, nil, "nvidia.com/gpu", nil), nil, "nvidia.com/gpu"))
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.allocated)
	if fams, err := reg.Gather(); err != nil || len(fams) != 0 {
		t.Errorf("allocated series after the queues went away: %v %v", fams, err)
	}
}
