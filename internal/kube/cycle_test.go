package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/engine"
)

// fakeCluster is a Scheduler on the client-go fake clientset, its
// informers running on it. Bindings set the pod's node in the fake's
// tracker and evictions delete the pod, as the API server would; both are
// recorded in call order.
type fakeCluster struct {
	client *fake.Clientset
	s      *Scheduler
	mu     sync.Mutex
	binds  []string // "pod->node"
	evicts []string // pod names
	// terminate: an eviction marks the pod for deletion instead of
	// deleting it.
	terminate bool
	// owners are LeaderWorkerSets the dynamic client serves.
	owners []*unstructured.Unstructured
}

func newFakeCluster(t *testing.T, objs ...runtime.Object) *fakeCluster {
	t.Helper()
	return startScheduler(t, &fakeCluster{client: fake.NewClientset(objs...)})
}

// startScheduler puts a new Scheduler on fc's clientset (a restart, when
// fc had one).
func startScheduler(t *testing.T, fc *fakeCluster) *fakeCluster {
	t.Helper()
	calls := 0
	bindingAPI(fc.client, nil, &calls)
	fc.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetSubresource() {
		case "binding":
			fc.mu.Lock()
			b := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
			fc.binds = append(fc.binds, b.Name+"->"+b.Target.Name)
			fc.mu.Unlock()
		case "eviction":
			name := a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
			fc.mu.Lock()
			fc.evicts = append(fc.evicts, name)
			terminate := fc.terminate
			fc.mu.Unlock()
			if terminate {
				// The pod terminates, as a kubelet's would: marked for
				// deletion, still there.
				obj, err := fc.client.Tracker().Get(podsGVR, a.GetNamespace(), name)
				if err != nil {
					return true, nil, err
				}
				p := obj.(*corev1.Pod).DeepCopy()
				at, grace := metav1.NewTime(fakeNow.Add(30*time.Second)), int64(30)
				p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &at, &grace
				return true, nil, fc.client.Tracker().Update(podsGVR, p, p.Namespace)
			}
			return true, nil, fc.client.Tracker().Delete(podsGVR, a.GetNamespace(), name)
		}
		return false, nil, nil // the binding reactor, or the tracker
	})
	// The Topology CRD is served, with one level: rack (corral.dev/rack).
	fc.client.Resources = []*metav1.APIResourceList{{GroupVersion: "corral.dev/v1alpha1",
		APIResources: []metav1.APIResource{{Name: v1alpha1.TopologyPlural, Kind: "Topology"}}}}
	listKinds := map[schema.GroupVersionResource]string{topologyGVR: "TopologyList"}
	if len(fc.owners) > 0 {
		fc.client.Resources = append(fc.client.Resources, &metav1.APIResourceList{GroupVersion: lwsGVR.GroupVersion().String(),
			APIResources: []metav1.APIResource{{Name: lwsGVR.Resource, Kind: "LeaderWorkerSet", Namespaced: true}}})
		listKinds[lwsGVR] = "LeaderWorkerSetList"
	}
	topo := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "corral.dev/v1alpha1", "kind": "Topology",
		"metadata": map[string]any{"name": "default"},
		"spec":     map[string]any{"levels": []any{map[string]any{"name": "rack", "nodeLabel": "corral.dev/rack"}}}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	if err := dyn.Tracker().Create(topologyGVR, topo, ""); err != nil {
		t.Fatal(err)
	}
	for _, o := range fc.owners {
		if err := dyn.Tracker().Create(lwsGVR, o, o.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(fc.client, dyn, Options{
		Logger: slog.New(slog.DiscardHandler), Clock: func() time.Time { return fakeNow }})
	if err != nil {
		t.Fatal(err)
	}
	fc.s = s
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := s.cache.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return fc
}

// cycle runs one cycle on what the API server holds and waits until the
// informers show its writes.
func (fc *fakeCluster) cycle(t *testing.T) CycleResult {
	t.Helper()
	fc.settle(t) // writes made outside a cycle, by the test
	res, err := fc.s.Cycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fc.settle(t)
	return res
}

// settle waits until the informers show what the fake API server holds.
func (fc *fakeCluster) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !fc.informersCaughtUp() {
		if time.Now().After(deadline) {
			t.Fatal("the informers did not show the API server's pods")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (fc *fakeCluster) informersCaughtUp() bool {
	objs, err := fc.client.Tracker().List(podsGVR, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "ns")
	if err != nil {
		return false
	}
	// What a cycle writes: bindings, evictions, annotations.
	state := func(p *corev1.Pod) string {
		return fmt.Sprint(p.Spec.NodeName, p.DeletionTimestamp != nil, p.Annotations[v1alpha1.AnnotationEvictedFor])
	}
	want := map[string]string{}
	for i := range objs.(*corev1.PodList).Items {
		p := &objs.(*corev1.PodList).Items[i]
		want[p.Name] = state(p)
	}
	cached := fc.s.cache.pods.GetStore().List()
	if len(cached) != len(want) {
		return false
	}
	for _, o := range cached {
		p := o.(*corev1.Pod)
		if st, ok := want[p.Name]; !ok || st != state(p) {
			return false
		}
	}
	return true
}

// podOf reads a pod back from the fake API server.
func (fc *fakeCluster) podOf(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := fc.client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeNow is the fake cluster's clock.
var fakeNow = time.Unix(10_000, 0)

// cutOffGang is a 3-member gang with two members bound at boundAt and the
// third pending, on three 8-GPU nodes of which busy holds the last.
func cutOffGang(boundAt time.Time) []runtime.Object {
	return []runtime.Object{rackNode("a-0", "a", 8), rackNode("a-1", "a", 8), rackNode("b-0", "b", 8),
		pod("busy").gpus(8).ann(v1alpha1.AnnotationPreemptible, "false").
			ann(v1alpha1.AnnotationAssignedGPUs, "gpu0,gpu1,gpu2,gpu3,gpu4,gpu5,gpu6,gpu7").boundTo("b-0").scheduledAt(boundAt).obj(),
		gangMember("g-0", "g", 8).boundTo("a-0").scheduledAt(boundAt).obj(),
		gangMember("g-1", "g", 8).boundTo("a-1").scheduledAt(boundAt).obj(),
		gangMember("g-2", "g", 8).obj()}
}

func (b *podB) priority(v int32) *podB { b.p.Spec.Priority = &v; return b }

func gangMember(name, gang string, gpus int64) *podB {
	return pod(name).gpus(gpus).ann(v1alpha1.AnnotationGang, gang)
}

func TestCycleOnFakeClientset(t *testing.T) {
	type want struct {
		binds     []string          // "pod->node", sorted
		evicts    []string          // sorted
		condition map[string]string // pod -> part of its PodScheduled=False message
		reason    string            // the condition's reason, where condition is set
	}
	cases := map[string]struct {
		objs []runtime.Object
		want want
	}{
		"a gang is bound whole": {
			objs: []runtime.Object{rackNode("a-0", "a", 8), rackNode("b-0", "b", 8),
				gangMember("g-0", "g", 8).obj(), gangMember("g-1", "g", 8).obj()},
			want: want{binds: []string{"g-0->a-0", "g-1->b-0"}},
		},
		"a gang that requires one rack is bound whole inside it": {
			objs: []runtime.Object{rackNode("a-0", "a", 8), rackNode("b-0", "b", 8), rackNode("b-1", "b", 8),
				gangMember("g-0", "g", 8).ann(v1alpha1.AnnotationRequiredTopology, "rack").obj(),
				gangMember("g-1", "g", 8).ann(v1alpha1.AnnotationRequiredTopology, "rack").obj()},
			want: want{binds: []string{"g-0->b-0", "g-1->b-1"}},
		},
		"a gang that requires one rack binds nothing where no rack holds it": {
			objs: []runtime.Object{rackNode("a-0", "a", 8), rackNode("b-0", "b", 8),
				gangMember("g-0", "g", 8).ann(v1alpha1.AnnotationRequiredTopology, "rack").obj(),
				gangMember("g-1", "g", 8).ann(v1alpha1.AnnotationRequiredTopology, "rack").obj()},
			want: want{condition: map[string]string{"g-0": "never fits", "g-1": "never fits"}, reason: ReasonUnschedulable},
		},
		"a gang that cannot fit binds nothing and says why on every pod": {
			objs: []runtime.Object{rackNode("a-0", "a", 8), rackNode("a-1", "a", 8),
				gangMember("g-0", "g", 8).obj(), gangMember("g-1", "g", 8).obj(), gangMember("g-2", "g", 8).obj()},
			want: want{condition: map[string]string{"g-0": "never fits", "g-1": "never fits", "g-2": "never fits"},
				reason: ReasonUnschedulable},
		},
		"a gang waits whole for room held by running work": {
			objs: []runtime.Object{rackNode("a-0", "a", 8), rackNode("a-1", "a", 8),
				pod("busy").gpus(8).ann(v1alpha1.AnnotationPreemptible, "false").
					ann(v1alpha1.AnnotationAssignedGPUs, "gpu0,gpu1,gpu2,gpu3,gpu4,gpu5,gpu6,gpu7").boundTo("a-1").obj(),
				gangMember("g-0", "g", 8).obj(), gangMember("g-1", "g", 8).obj()},
			want: want{condition: map[string]string{"g-0": "no room for 2×[8 GPU", "g-1": "no room for 2×[8 GPU"},
				reason: ReasonUnschedulable},
		},
		"a higher priority gang evicts its victim through the Eviction API": {
			objs: []runtime.Object{rackNode("a-0", "a", 8),
				pod("low").gpus(8).priority(1).ann(v1alpha1.AnnotationAssignedGPUs, "gpu0,gpu1,gpu2,gpu3,gpu4,gpu5,gpu6,gpu7").
					boundTo("a-0").obj(),
				gangMember("hi-0", "hi", 8).priority(100).obj()},
			want: want{evicts: []string{"low"}, condition: map[string]string{"hi-0": "waiting for 1 preempted pods to terminate"},
				reason: ReasonUnschedulable},
		},
		// Cut off mid-bind: two of three members bound, the third finds
		// no room (busy holds b-0). The engine rolls the gang back once it
		// has run below its minimum for engine.CutOffGrace, read from the
		// pods' binding times (restart-safe), through the Eviction API.
		"a gang cut off mid-bind waits out the grace": {
			objs: cutOffGang(fakeNow.Add(-engine.CutOffGrace / 2)),
			want: want{condition: map[string]string{"g-2": "no room"}, reason: ReasonUnschedulable},
		},
		"a gang cut off mid-bind is rolled back after the grace": {
			objs: cutOffGang(fakeNow.Add(-engine.CutOffGrace)),
			want: want{evicts: []string{"g-0", "g-1"}},
		},
		"a partly bound gang whose rest can never fit is rolled back at once": {
			objs: []runtime.Object{rackNode("a-0", "a", 8), rackNode("a-1", "a", 8),
				gangMember("g-0", "g", 8).boundTo("a-0").scheduledAt(fakeNow).obj(),
				gangMember("g-1", "g", 8).boundTo("a-1").scheduledAt(fakeNow).obj(),
				gangMember("g-2", "g", 8).obj()},
			want: want{evicts: []string{"g-0", "g-1"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fc := newFakeCluster(t, tc.objs...)
			fc.cycle(t)
			sort.Strings(fc.binds)
			sort.Strings(fc.evicts)
			if strings.Join(fc.binds, " ") != strings.Join(tc.want.binds, " ") {
				t.Errorf("bindings %v, want %v", fc.binds, tc.want.binds)
			}
			if strings.Join(fc.evicts, " ") != strings.Join(tc.want.evicts, " ") {
				t.Errorf("evictions %v, want %v", fc.evicts, tc.want.evicts)
			}
			for podName, part := range tc.want.condition {
				reason, msg := scheduledCondition(fc.podOf(t, podName))
				if reason != tc.want.reason || !strings.Contains(msg, part) {
					t.Errorf("pod %s: PodScheduled=False %s %q, want %s with %q", podName, reason, msg, tc.want.reason, part)
				}
			}
		})
	}
}

// TestPreemptorWaitsForItsVictimsAcrossARestart: the job a pod was evicted
// for waits while the pod terminates, with the engine's reason, also after
// the scheduler restarted (the pod carries AnnotationEvictedFor), and binds
// once the pod is gone.
func TestPreemptorWaitsForItsVictimsAcrossARestart(t *testing.T) {
	fc := newFakeCluster(t, rackNode("a-0", "a", 8),
		pod("low").gpus(8).priority(1).ann(v1alpha1.AnnotationAssignedGPUs, "gpu0,gpu1,gpu2,gpu3,gpu4,gpu5,gpu6,gpu7").
			boundTo("a-0").obj(),
		gangMember("hi-0", "hi", 8).priority(100).obj())
	fc.terminate = true
	fc.cycle(t)
	if strings.Join(fc.evicts, " ") != "low" {
		t.Fatalf("evictions %v, want low", fc.evicts)
	}
	if got := fc.podOf(t, "low").Annotations[v1alpha1.AnnotationEvictedFor]; got != "gang/ns/hi" {
		t.Fatalf("victim's %s = %q, want gang/ns/hi", v1alpha1.AnnotationEvictedFor, got)
	}
	want := "waiting for 1 preempted pods to terminate (ns/low)"
	for _, restart := range []bool{false, true} {
		if restart {
			fc = startScheduler(t, &fakeCluster{client: fc.client, terminate: true})
		}
		res := fc.cycle(t)
		if len(fc.binds) != 0 || len(fc.evicts) > 1 {
			t.Fatalf("restart=%v: binds %v, evictions %v while the victim terminates", restart, fc.binds, fc.evicts)
		}
		var reason engine.Reason
		for _, p := range res.Plan.Pending {
			reason = p.Reason
		}
		if reason.Level != engine.LevelPreemption || reason.Message != want {
			t.Errorf("restart=%v: reason %+v, want %q", restart, reason, want)
		}
		if _, msg := scheduledCondition(fc.podOf(t, "hi-0")); msg != want {
			t.Errorf("restart=%v: condition %q, want %q", restart, msg, want)
		}
	}
	must(t, fc.client.Tracker().Delete(podsGVR, "ns", "low"))
	fc.cycle(t)
	if strings.Join(fc.binds, " ") != "hi-0->a-0" {
		t.Errorf("binds %v once the victim is gone, want hi-0->a-0", fc.binds)
	}
}

// TestLeaderReadyOnFakeClientset: an LWS group under LeaderReady (size 2)
// on two racks of two 8-GPU nodes, b-0 busy. The leader is bound with its
// worker's room held in its rack, written on its binding from the plan; a
// restarted scheduler, from the pods alone, keeps a 2-pod gang out of that
// room, and binds the worker into it once LWS creates it.
func TestLeaderReadyOnFakeClientset(t *testing.T) {
	leader := pod("serve-0").gpus(8).lws("serve", "0", "0", 2).ann(v1alpha1.AnnotationRequiredTopology, "rack").obj()
	fc := &fakeCluster{client: fake.NewClientset(rackNode("a-0", "a", 8), rackNode("a-1", "a", 8),
		rackNode("b-0", "b", 8), rackNode("b-1", "b", 8),
		pod("busy").gpus(8).ann(v1alpha1.AnnotationPreemptible, "false").
			ann(v1alpha1.AnnotationAssignedGPUs, "gpu0,gpu1,gpu2,gpu3,gpu4,gpu5,gpu6,gpu7").boundTo("b-0").obj(),
		leader),
		owners: []*unstructured.Unstructured{lwsObj("serve", "LeaderReady", 2)}}
	startScheduler(t, fc)
	fc.cycle(t)
	if len(fc.binds) != 1 || !strings.HasPrefix(fc.binds[0], "serve-0->a-") {
		t.Fatalf("bindings %v, want the leader alone in rack a", fc.binds)
	}
	if ann := fc.podOf(t, "serve-0").Annotations; !strings.Contains(ann[v1alpha1.AnnotationHeldRoom], "room held for 1 members") {
		t.Errorf("the leader's binding says %q, want the worker's room held", ann[v1alpha1.AnnotationHeldRoom])
	}
	held := "a-1"
	if fc.binds[0] == "serve-0->a-1" {
		held = "a-0"
	}
	// The API server dates the binding (the fake one does not).
	bound := fc.podOf(t, "serve-0")
	bound.Status.Conditions = append(bound.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
		Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(fakeNow)})
	if err := fc.client.Tracker().Update(podsGVR, bound, "ns"); err != nil {
		t.Fatal(err)
	}

	// A restart; then a 2-pod gang that only fits with the held node.
	startScheduler(t, fc)
	for _, p := range []*corev1.Pod{gangMember("o-0", "o", 8).obj(), gangMember("o-1", "o", 8).obj()} {
		if _, err := fc.client.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fc.binds = nil
	fc.cycle(t)
	if len(fc.binds) != 0 {
		t.Fatalf("bindings %v: the gang took the room held for the worker", fc.binds)
	}
	if _, msg := scheduledCondition(fc.podOf(t, "o-0")); !strings.Contains(msg, "no room") {
		t.Errorf("o-0 waits with %q", msg)
	}

	// LWS creates the worker: bound into the held room.
	worker := pod("serve-0-1").gpus(8).lws("serve", "0", "1", 2).ann(v1alpha1.AnnotationRequiredTopology, "rack").obj()
	if _, err := fc.client.CoreV1().Pods("ns").Create(context.Background(), worker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fc.cycle(t)
	if strings.Join(fc.binds, " ") != "serve-0-1->"+held {
		t.Errorf("bindings %v, want the worker on %s", fc.binds, held)
	}
}

// TestBindDetail: a Scheduled event lists the pod's GPUs as the
// assigned-gpus annotation does, not as a Go slice.
func TestBindDetail(t *testing.T) {
	gb := engine.GangBind{Level: "rack", Domain: "r01"}
	for _, tc := range []struct {
		devices []string
		capped  string
		want    string
	}{
		{[]string{"gpu0", "gpu1"}, "", " (GPUs gpu0,gpu1; rack r01)"},
		{nil, "", ""},
		{[]string{"gpu3"}, "gang minimum 4 capped at 2", " (GPUs gpu3; rack r01); gang minimum 4 capped at 2"},
	} {
		if got := bindDetail(gb, engine.PodBind{Node: "n1", Devices: tc.devices}, tc.capped); got != tc.want {
			t.Errorf("bindDetail(%v, %q) = %q, want %q", tc.devices, tc.capped, got, tc.want)
		}
	}
}
