package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
)

// TestAccountKeepsFailedDevicesOfBoundPods: a pod bound to GPUs of which one
// has since failed still holds all of them in the running view, so that
// remediation finds it on the failed GPU; the failed GPU is not charged to
// the state (it left the capacity already) and nothing is reported as
// overcommitted.
func TestAccountKeepsFailedDevicesOfBoundPods(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{v1alpha1.AnnotationUnhealthyGPUs: "gpu3"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("512Gi"), "nvidia.com/gpu": resource.MustParse("8")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	cn, _ := nodeFromObject(node, "nvidia.com/gpu", nil, "gpu.nvidia.com")
	s, err := cluster.New(cluster.Topology{}, []cluster.Node{cn})
	if err != nil {
		t.Fatal(err)
	}
	if s.DeviceHealthy(0, 3) {
		t.Fatal("gpu3 should be failed by the node's annotation")
	}
	p := pod("train-0").gpus(4).boundTo("n").ann(v1alpha1.AnnotationAssignedGPUs, "gpu2,gpu3,gpu4,gpu5").obj()
	holds, warns := account(s, []*corev1.Pod{p}, map[string]assumedPod{}, nil, nil, adapterConfig{gpuResource: "nvidia.com/gpu"})
	if len(warns) > 0 {
		t.Fatalf("warnings: %v", warns)
	}
	var got []int
	for _, d := range holds[string(p.UID)].alloc.Devices {
		got = append(got, d.Device)
	}
	if diff := cmp.Diff([]int{2, 4, 5, 3}, got); diff != "" {
		t.Errorf("devices held (-want +got):\n%s", diff)
	}
	free := s.GPUFree(0)
	for k, want := range []int32{1000, 1000, 0, 0, 0, 0, 1000, 1000} {
		if free[k] != want {
			t.Errorf("gpu%d free %d, want %d", k, free[k], want)
		}
	}
}

// TestAccountKeepsTaintedClaimDevices: a pod whose ResourceClaim holds a GPU
// the DRA driver has since tainted still holds it in the running view (so
// remediation finds the pod on it), with no warning; the tainted GPU is not
// charged, the claim's healthy GPU is.
func TestAccountKeepsTaintedClaimDevices(t *testing.T) {
	slice := gpuSlice("n", 4, func(i int, d *resourcev1.Device) {
		if i == 1 {
			d.Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		}
	})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("512Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	cn, _ := nodeFromObject(node, "nvidia.com/gpu", []*resourcev1.ResourceSlice{slice}, "gpu.nvidia.com")
	s, err := cluster.New(cluster.Topology{}, []cluster.Node{cn})
	if err != nil {
		t.Fatal(err)
	}
	if s.DeviceHealthy(0, 1) {
		t.Fatal("gpu-1 should be failed by its taint")
	}
	p := pod("train-0").claim("train-0-gpus").boundTo("n").obj()
	claim := claimFor(2, "")
	claim.Name = "train-0-gpus"
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpus", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-0"},
		{Request: "gpus", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-1"}}}}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}
	holds, warns := account(s, []*corev1.Pod{p}, map[string]assumedPod{}, []*resourcev1.ResourceClaim{claim}, nil, testCfg)
	if len(warns) > 0 {
		t.Fatalf("warnings: %v", warns)
	}
	var got []int
	for _, d := range holds[string(p.UID)].alloc.Devices {
		got = append(got, d.Device)
	}
	if diff := cmp.Diff([]int{0, 1}, got); diff != "" {
		t.Errorf("devices held (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int32{0, 0, 1000, 1000}, s.GPUFree(0)); diff != "" {
		t.Errorf("free GPU milli (-want +got):\n%s", diff)
	}
}
