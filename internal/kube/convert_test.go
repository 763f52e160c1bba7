package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// podB builds a pending corral pod.
type podB struct{ p corev1.Pod }

func pod(name string) *podB {
	return &podB{p: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			Annotations: map[string]string{}, Labels: map[string]string{},
			CreationTimestamp: metav1.NewTime(time.Unix(100, 0))},
		Spec: corev1.PodSpec{SchedulerName: "corral", Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}},
	}}
}

func (b *podB) gpus(n int64) *podB {
	b.p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
	return b
}
func (b *podB) ann(k, v string) *podB { b.p.Annotations[k] = v; return b }
func (b *podB) ownedByJob(name string) *podB {
	t := true
	b.p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, Controller: &t}}
	return b
}
func (b *podB) group(name string) *podB {
	b.p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
	return b
}
func (b *podB) claim(name string) *podB {
	b.p.Spec.ResourceClaims = append(b.p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpus", ResourceClaimName: &name})
	return b
}
func (b *podB) boundTo(node string) *podB { b.p.Spec.NodeName = node; return b }
func (b *podB) obj() *corev1.Pod          { p := b.p; return &p }

// fakeGroups answers lookups from maps.
type fakeGroups struct {
	parallelism map[string]int
	groups      map[string][2]any // name -> {minCount, topologyKey}
	claims      map[string]*resourcev1.ResourceClaim
	classes     map[string]bool
	dra         *draView
	elig        *eligibility
}

func (f fakeGroups) jobParallelism(_, name string) (int, bool) {
	v, ok := f.parallelism[name]
	return v, ok
}
func (f fakeGroups) podGroup(_, name string) (int, string, bool) {
	g, ok := f.groups[name]
	if !ok {
		return 0, "", false
	}
	return g[0].(int), g[1].(string), true
}
func (f fakeGroups) claim(_, name string) (*resourcev1.ResourceClaim, bool) {
	c, ok := f.claims[name]
	return c, ok
}
func (f fakeGroups) deviceClass(name string) (*resourcev1.DeviceClass, bool) {
	if !f.classes[name] {
		return nil, false
	}
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}, true
}
func (f fakeGroups) devices() *draView { return f.dra }

func (f fakeGroups) eligibility() *eligibility { return f.elig }

var testCfg = adapterConfig{schedulerName: "corral", gpuResource: "nvidia.com/gpu", draDriver: "gpu.nvidia.com"}

func claimFor(count int64, match string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	c.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: "gpu.nvidia.com", Count: count}}}
	if match != "" {
		q := resourcev1.FullyQualifiedName(match)
		c.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{MatchAttribute: &q}}
	}
	return c
}

// jobView is what a test checks of a converted job.
type jobView struct {
	Key      string
	Pods     int
	Bound    int
	Min      int
	Required string
	Request  workload.Request
	// Eligible is Request.Devices.Groups (the filter's key is left out).
	Eligible map[string][][]string
	Invalid  string
	Waiting  string
}

func view(kj *kjob) jobView {
	v := jobView{Key: kj.key, Pods: len(kj.refs), Bound: len(kj.bound), Min: kj.job.MinMembers,
		Required: kj.job.Topology.Required, Invalid: kj.invalid, Waiting: kj.waiting}
	if len(kj.job.PodSets) > 0 {
		v.Request = kj.job.PodSets[0].Request
		if f := v.Request.Devices; f != nil {
			v.Eligible, v.Request.Devices = f.Groups, nil
		}
	}
	return v
}

func TestBuildJobs(t *testing.T) {
	groups := fakeGroups{
		parallelism: map[string]int{"train": 4},
		groups:      map[string][2]any{"pg": {2, "corral.dev/rack"}},
		claims:      map[string]*resourcev1.ResourceClaim{"pair": claimFor(2, attrPCIeRoot), "bad": claimFor(1, "")},
		classes:     map[string]bool{"gpu.nvidia.com": true},
	}
	groups.claims["bad"].Spec.Devices.Requests[0].Exactly.DeviceClassName = "nope"
	groups.claims["pair"].Name, groups.claims["bad"].Name = "pair", "bad"
	groups.dra = testDRAView(t, groups, gpuSlice("n1", 4, nil))
	levels := map[string]string{"rack": "corral.dev/rack"}
	req := func(cpu, mem int64, gpus int) workload.Request {
		return workload.Request{CPUMilli: cpu, MemMiB: mem, GPUs: gpus}
	}
	cases := map[string]struct {
		pods []*corev1.Pod
		want []jobView
	}{
		"a Job's pods form one gang with the Job's parallelism as minimum": {
			pods: []*corev1.Pod{pod("t-0").gpus(8).ownedByJob("train").obj(), pod("t-1").gpus(8).ownedByJob("train").obj(),
				pod("t-2").gpus(8).ownedByJob("train").obj(), pod("t-3").gpus(8).ownedByJob("train").boundTo("n1").obj()},
			want: []jobView{{Key: "job/ns/train", Pods: 4, Bound: 1, Min: 4, Request: req(2000, 4096, 8)}},
		},
		"a gang waits until all its pods exist": {
			pods: []*corev1.Pod{pod("t-0").gpus(8).ownedByJob("train").obj()},
			want: []jobView{{Key: "job/ns/train", Pods: 1, Min: 4, Request: req(2000, 4096, 8), Waiting: "gang waits for its pods: 1 of 4 pods exist"}},
		},
		"a PodGroup gives the minimum and the required level": {
			pods: []*corev1.Pod{pod("a").gpus(1).group("pg").obj(), pod("b").gpus(1).group("pg").obj()},
			want: []jobView{{Key: "podgroup/ns/pg", Pods: 2, Min: 2, Required: "rack", Request: req(2000, 4096, 1)}},
		},
		"annotations name a gang and its topology": {
			pods: []*corev1.Pod{pod("a").gpus(2).ann(v1alpha1.AnnotationGang, "g").ann(v1alpha1.AnnotationRequiredTopology, "rack").obj(),
				pod("b").gpus(2).ann(v1alpha1.AnnotationGang, "g").obj()},
			want: []jobView{{Key: "gang/ns/g", Pods: 2, Required: "rack", Request: req(2000, 4096, 2)}},
		},
		"a fraction by annotation": {
			pods: []*corev1.Pod{pod("a").ann(v1alpha1.AnnotationGPUMilli, "250").obj()},
			want: []jobView{{Key: "pod/ns/a", Pods: 1, Request: workload.Request{CPUMilli: 2000, MemMiB: 4096, GPUs: 1, GPUMilli: 250}}},
		},
		"a DRA claim with matchAttribute pcieRoot": {
			pods: []*corev1.Pod{pod("a").claim("pair").obj()},
			want: []jobView{{Key: "pod/ns/a", Pods: 1, Request: workload.Request{CPUMilli: 2000, MemMiB: 4096, GPUs: 2, Scope: workload.ScopePCIe, DRA: true},
				Eligible: map[string][][]string{"n1": {{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}}}}},
		},
		"a claim with an unknown DeviceClass is invalid": {
			pods: []*corev1.Pod{pod("a").claim("bad").obj()},
			want: []jobView{{Key: "pod/ns/a", Pods: 1, Request: req(2000, 4096, 0), Invalid: `pod a: ResourceClaim bad request "gpus": DeviceClass "nope" does not exist`}},
		},
		"a whole GPU by the fraction annotation is invalid": {
			pods: []*corev1.Pod{pod("a").ann(v1alpha1.AnnotationGPUMilli, "1000").obj()},
			want: []jobView{{Key: "pod/ns/a", Pods: 1, Request: req(2000, 4096, 0), Invalid: `pod a: annotation corral.dev/gpu-milli="1000": want 1-999 milli of one GPU`}},
		},
		"a nodeSelector becomes a node-label requirement": {
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := pod("a").gpus(1).obj()
				p.Spec.NodeSelector = map[string]string{"corral.dev/rack": "r4"}
				return p
			}()},
			want: []jobView{{Key: "pod/ns/a", Pods: 1, Request: workload.Request{CPUMilli: 2000, MemMiB: 4096, GPUs: 1,
				NodeLabels: map[string]string{"corral.dev/rack": "r4"}}}},
		},
		"a malformed annotation is invalid, other pods unaffected": {
			pods: []*corev1.Pod{pod("a").gpus(1).ann(v1alpha1.AnnotationMinMembers, "many").obj(), pod("b").gpus(1).obj()},
			want: []jobView{
				{Key: "pod/ns/a", Pods: 1, Request: req(2000, 4096, 1), Invalid: `annotation corral.dev/min-members="many": want a positive integer`},
				{Key: "pod/ns/b", Pods: 1, Request: req(2000, 4096, 1)},
			},
		},
		"pods of other schedulers and finished pods are not corral's": {
			pods: func() []*corev1.Pod {
				other := pod("x").gpus(1).obj()
				other.Spec.SchedulerName = "default-scheduler"
				done := pod("y").gpus(1).obj()
				done.Status.Phase = corev1.PodSucceeded
				return []*corev1.Pod{other, done}
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []jobView
			for _, kj := range buildJobs(tc.pods, nil, groups, levels, testCfg) {
				got = append(got, view(kj))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeFromObject(t *testing.T) {
	node := func(gpus int64, ann map[string]string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: ann, Labels: map[string]string{v1alpha1.LabelGPUModel: "H100"}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
					"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
	}
	t.Run("eight GPUs get the DGX layout", func(t *testing.T) {
		n, warns := nodeFromObject(node(8, nil), "nvidia.com/gpu", nil, "gpu.nvidia.com")
		if len(warns) > 0 || len(n.Devices) != 8 || n.Devices[3].PCIeSwitch != 1 || n.Devices[5].NUMA != 1 || n.Devices[0].Model != "H100" {
			t.Errorf("got %+v %v", n.Devices, warns)
		}
		if n.CPUMilli != 64000 || n.MemMiB != 512*1024 {
			t.Errorf("capacity %d CPU %d MiB", n.CPUMilli, n.MemMiB)
		}
	})
	t.Run("unhealthy GPUs from the annotation", func(t *testing.T) {
		n, _ := nodeFromObject(node(8, map[string]string{v1alpha1.AnnotationUnhealthyGPUs: "gpu2, gpu7"}), "nvidia.com/gpu", nil, "gpu.nvidia.com")
		var bad []string
		for _, d := range n.Devices {
			if d.Unhealthy {
				bad = append(bad, d.ID)
			}
		}
		if diff := cmp.Diff([]string{"gpu2", "gpu7"}, bad); diff != "" {
			t.Error(diff)
		}
	})
	t.Run("a malformed topology annotation falls back with a warning", func(t *testing.T) {
		n, warns := nodeFromObject(node(4, map[string]string{v1alpha1.AnnotationGPUTopology: "{not json"}), "nvidia.com/gpu", nil, "gpu.nvidia.com")
		if len(n.Devices) != 4 || len(warns) != 1 || !strings.Contains(warns[0], "default layout") {
			t.Errorf("devices %d warnings %v", len(n.Devices), warns)
		}
	})
	t.Run("DRA devices with PCIe roots", func(t *testing.T) {
		name := "n"
		str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
		slice := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: &name,
			Pool: resourcev1.ResourcePool{Name: "n", Generation: 1, ResourceSliceCount: 1}}}
		for i, root := range []string{"pci0000:15", "pci0000:15", "pci0000:26", "pci0000:26"} {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: "gpu-" + string(rune('0'+i)),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"type": str("gpu"), "productName": str("NVIDIA H100 80GB HBM3"), attrPCIeRoot: str(root)}})
		}
		n, _ := nodeFromObject(node(0, nil), "nvidia.com/gpu", []*resourcev1.ResourceSlice{slice}, "gpu.nvidia.com")
		var got []cluster.Device
		for _, d := range n.Devices {
			got = append(got, cluster.Device{ID: d.ID, Model: d.Model, PCIeSwitch: d.PCIeSwitch, NVLink: d.NVLink})
		}
		want := []cluster.Device{{ID: "gpu-0", Model: "dra:H100", PCIeSwitch: 0, NVLink: -1}, {ID: "gpu-1", Model: "dra:H100", PCIeSwitch: 0, NVLink: -1},
			{ID: "gpu-2", Model: "dra:H100", PCIeSwitch: 1, NVLink: -1}, {ID: "gpu-3", Model: "dra:H100", PCIeSwitch: 1, NVLink: -1}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Error(diff)
		}
	})
	t.Run("a NotReady node takes no new pods", func(t *testing.T) {
		n := node(8, nil)
		n.Status.Conditions[0].Status = corev1.ConditionFalse
		if got, _ := nodeFromObject(n, "nvidia.com/gpu", nil, "gpu.nvidia.com"); !got.Unschedulable {
			t.Error("NotReady node is schedulable")
		}
	})
	t.Run("a tainted node keeps its taints and stays in the model", func(t *testing.T) {
		// Which pods may use it is each pod's tolerations' business (affinity.go).
		n := node(8, nil)
		n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
		got, _ := nodeFromObject(n, "nvidia.com/gpu", nil, "gpu.nvidia.com")
		if got.Unschedulable {
			t.Error("tainted node is unschedulable for every pod")
		}
		if diff := cmp.Diff([]cluster.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}}, got.Taints); diff != "" {
			t.Errorf("taints (-want +got):\n%s", diff)
		}
	})
}
