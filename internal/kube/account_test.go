package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
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
