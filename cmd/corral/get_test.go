package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/corral-dev/corral/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files of the listing commands")

// getT0 is when the test cluster's pods were created; the listings run ten
// minutes later.
var getT0 = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

func gpuNodeObj(name, rack string, gpus int64, edit func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"corral.dev/rack": rack,
		v1alpha1.LabelGPUModel: "H100"}, Annotations: map[string]string{}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("96"),
			v1alpha1.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if edit != nil {
		edit(n)
	}
	return n
}

type testPod struct{ p corev1.Pod }

func newTestPod(ns, name string, gpus int64) *testPod {
	return &testPod{p: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}, Annotations: map[string]string{},
			CreationTimestamp: metav1.NewTime(getT0)},
		Spec: corev1.PodSpec{SchedulerName: "corral", Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{v1alpha1.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}}
}
func (b *testPod) job(name string) *testPod {
	t := true
	b.p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, Controller: &t}}
	return b
}
func (b *testPod) queue(q string) *testPod { b.p.Labels[v1alpha1.LabelQueue] = q; return b }
func (b *testPod) boundAt(node string, after time.Duration, phase corev1.PodPhase) *testPod {
	b.p.Spec.NodeName = node
	b.p.Status.Phase = phase
	b.p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(getT0.Add(after))}}
	return b
}
func (b *testPod) waiting(reason, msg string) *testPod {
	b.p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: msg}}
	return b
}
func (b *testPod) obj() *corev1.Pod { p := b.p; return &p }

func toUnstructured(t *testing.T, o runtime.Object, kind string) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind(kind)
	return u
}

func queueObj(name, parent string, guaranteed, limit string, status v1alpha1.QueueStatus, accepted metav1.ConditionStatus, reason string) *v1alpha1.Queue {
	q := &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.QueueSpec{Parent: parent}, Status: status}
	qr := v1alpha1.QueueResource{Name: v1alpha1.ResourceGPU}
	if guaranteed != "" {
		g := resource.MustParse(guaranteed)
		qr.Guaranteed = &g
	}
	if limit != "" {
		l := resource.MustParse(limit)
		qr.Limit = &l
	}
	q.Spec.Resources = []v1alpha1.QueueResource{qr}
	q.Status.Conditions = []metav1.Condition{{Type: v1alpha1.QueueConditionAccepted, Status: accepted, Reason: reason}}
	return q
}

// withReclaim sets the queue's reclaim policy; a queue without one shows
// the scheduler's default, Never.
func withReclaim(q *v1alpha1.Queue, p v1alpha1.ReclaimPolicy) *v1alpha1.Queue {
	q.Spec.ReclaimPolicy = p
	return q
}

func gpus(n string) corev1.ResourceList {
	return corev1.ResourceList{v1alpha1.ResourceGPU: resource.MustParse(n)}
}

// testCluster is a small GPU cluster: two racks, three nodes (one cordoned
// with a failed GPU), a running training job, a blocked 16-GPU job with a
// reservation, a notebook its queue refuses, and three queues (one
// reclaiming by preemption, one strictly, one with no policy written).
func testCluster(t *testing.T) (kubernetes.Interface, dynamic.Interface) {
	nodes := []runtime.Object{
		gpuNodeObj("n1", "r1", 8, nil),
		gpuNodeObj("n2", "r1", 8, nil),
		gpuNodeObj("n3", "r2", 8, func(n *corev1.Node) {
			n.Spec.Unschedulable = true
			n.Annotations[v1alpha1.AnnotationUnhealthyGPUs] = "gpu3"
		}),
		// A CPU node is not listed.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-0"}},
	}
	reserved := "rack r1 reserved, expected start in ~3.0 h; no rack holds 2 pods of 8 GPUs now"
	pods := []runtime.Object{
		newTestPod("team-a", "train-0", 4).job("train").queue("team-a").boundAt("n1", 90*time.Second, corev1.PodRunning).obj(),
		newTestPod("team-a", "train-1", 4).job("train").queue("team-a").boundAt("n1", 90*time.Second, corev1.PodRunning).obj(),
		newTestPod("team-a", "big-0", 8).job("big").queue("team-a").waiting("Unschedulable", reserved).obj(),
		newTestPod("team-a", "big-1", 8).job("big").queue("team-a").waiting("Unschedulable", reserved).obj(),
		newTestPod("team-b", "notebook", 1).queue("team-b").waiting("QueueRefused", `queue "team-b" is not accepted`).obj(),
		// Another scheduler's pod and a finished pod of corral's are not jobs.
		func() *corev1.Pod {
			p := newTestPod("team-a", "web", 0).boundAt("n2", 0, corev1.PodRunning).obj()
			p.Spec.SchedulerName = "default-scheduler"
			return p
		}(),
		newTestPod("team-a", "done", 2).boundAt("n2", 0, corev1.PodSucceeded).obj(),
	}
	client := fake.NewClientset(append(nodes, pods...)...)

	scheme := runtime.NewScheme()
	topo := &v1alpha1.Topology{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:   v1alpha1.TopologySpec{Levels: []v1alpha1.TopologyLevel{{Name: "rack", NodeLabel: "corral.dev/rack"}}},
		Status: v1alpha1.TopologyStatus{Conditions: []metav1.Condition{{Type: v1alpha1.TopologyConditionAccepted, Status: metav1.ConditionTrue, Reason: "InUse"}}}}
	objs := []*unstructured.Unstructured{
		toUnstructured(t, topo, "Topology"),
		toUnstructured(t, withReclaim(queueObj("research", "", "16", "", v1alpha1.QueueStatus{Allocated: gpus("8"), FairShare: gpus("16"), Pending: gpus("16")},
			metav1.ConditionTrue, "Active"), v1alpha1.ReclaimPreempt), "Queue"),
		toUnstructured(t, queueObj("team-a", "research", "8", "16", v1alpha1.QueueStatus{Allocated: gpus("8"), FairShare: gpus("12500m"), Pending: gpus("16"), Borrowed: gpus("0")},
			metav1.ConditionTrue, "Active"), "Queue"),
		toUnstructured(t, withReclaim(queueObj("team-b", "nope", "", "", v1alpha1.QueueStatus{}, metav1.ConditionFalse, "Invalid"),
			v1alpha1.ReclaimStrict), "Queue"),
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		queueGVR: "QueueList", topologyGVR: "TopologyList"})
	// Created through the resource, not passed to the constructor: the
	// fake would file them under the plural it guesses from the kind
	// ("queues"), not corral's.
	for _, o := range objs {
		gvr := queueGVR
		if o.GetKind() == "Topology" {
			gvr = topologyGVR
		}
		if _, err := dyn.Resource(gvr).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return client, dyn
}

// TestListingGolden runs corral jobs / queues / nodes against the test
// cluster and compares with testdata/get/*.golden (go test -update rewrites
// them; review the diff).
func TestListingGolden(t *testing.T) {
	client, dyn := testCluster(t)
	saved := newClients
	t.Cleanup(func() { newClients = saved })
	newClients = func(f *getFlags) (kubernetes.Interface, dynamic.Interface, string, error) {
		ns := f.namespace
		if ns == "" && !f.allNamespaces {
			ns = "default"
		}
		return client, dyn, ns, nil
	}
	now := func() time.Time { return getT0.Add(10 * time.Minute) }
	cases := map[string][]string{
		"jobs":             {"jobs", "-A"},
		"jobs-wide":        {"jobs", "-A", "-o", "wide"},
		"jobs-team-a-json": {"jobs", "-n", "team-a", "-o", "json"},
		"jobs-empty":       {"jobs", "-n", "nobody"},
		"queues":           {"queues"},
		"queues-wide":      {"queues", "-o", "wide"},
		"queues-yaml":      {"queues", "-o", "yaml"},
		"nodes":            {"nodes"},
		"nodes-wide":       {"nodes", "-o", "wide"},
		"nodes-by-rack":    {"nodes", "--by", "rack"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			root := &cobra.Command{Use: "corral", SilenceUsage: true, SilenceErrors: true}
			root.AddCommand(newJobsCmd(now), newQueuesCmd(), newNodesCmd())
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs(args)
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "get", name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), out.String()); diff != "" {
				t.Errorf("corral %s (-want +got):\n%s", strings.Join(args, " "), diff)
			}
		})
	}
}

// TestListingErrors: bad flags get a clear error before any request.
func TestListingErrors(t *testing.T) {
	client, dyn := testCluster(t)
	saved := newClients
	t.Cleanup(func() { newClients = saved })
	newClients = func(*getFlags) (kubernetes.Interface, dynamic.Interface, string, error) { return client, dyn, "", nil }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"jobs", "-o", "table"}, `-o "table": want wide, json or yaml`},
		{[]string{"nodes", "--by", "spine"}, `--by "spine": the Topology has no such level (levels: rack)`},
		{[]string{"jobs", "--gpu-resource", ""}, `--gpu-resource: must not be empty (default nvidia.com/gpu)`},
		{[]string{"nodes", "--scheduler-name", ""}, `--scheduler-name: must not be empty (default corral)`},
		{[]string{"queues", "--resource", ""}, `--resource: must not be empty (default nvidia.com/gpu)`},
	} {
		root := &cobra.Command{Use: "corral", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(newJobsCmd(time.Now), newQueuesCmd(), newNodesCmd())
		root.SetOut(&bytes.Buffer{})
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || err.Error() != tc.want {
			t.Errorf("corral %s: error %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestQueueQuantity: GPUs and other devices read as plain numbers (the
// status holds 12.5 GPUs as 12500m), CPU and memory as Kubernetes writes
// them.
func TestQueueQuantity(t *testing.T) {
	for _, tc := range []struct {
		name corev1.ResourceName
		q    string
		want string
	}{
		{v1alpha1.ResourceGPU, "12500m", "12.5"},
		{v1alpha1.ResourceGPU, "16", "16"},
		{"gpu/H100", "500m", "0.5"},
		{corev1.ResourceCPU, "2500m", "2500m"},
		{corev1.ResourceMemory, "64Gi", "64Gi"},
	} {
		q := resource.MustParse(tc.q)
		if got := quantity(tc.name, &q); got != tc.want {
			t.Errorf("quantity(%s, %s) = %q, want %q", tc.name, tc.q, got, tc.want)
		}
	}
}
