package kube

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/internal/build"
)

var reportT0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

// reportingPod is a pod on node whose container reports one resource's
// devices, created at the given offset from reportT0.
func reportingPod(name, node string, after time.Duration, resource string, health map[string]corev1.ResourceHealthStatus) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(reportT0.Add(after))}}
	p.Spec.NodeName = node
	rs := corev1.ResourceStatus{Name: corev1.ResourceName(resource)}
	for _, id := range slices.Sorted(maps.Keys(health)) {
		rs.Resources = append(rs.Resources, corev1.ResourceHealth{ResourceID: corev1.ResourceID(id), Health: health[id]})
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", AllocatedResourcesStatus: []corev1.ResourceStatus{rs}}}
	return p
}

func TestPodDeviceReports(t *testing.T) {
	st := build.State(build.Topo("rack"), build.Racks(1, 2)) // devices gpu0..gpu7
	const bad, good = corev1.ResourceHealthStatusUnhealthy, corev1.ResourceHealthStatusHealthy
	type got struct {
		Node, Device string
		Healthy      bool
	}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want []got
	}{
		{"a device plugin id equal to corral's", []*corev1.Pod{reportingPod("a", "r0-n-0", 0, "nvidia.com/gpu", map[string]corev1.ResourceHealthStatus{"gpu3": bad, "gpu4": good})},
			[]got{{"r0-n-0", "gpu3", false}, {"r0-n-0", "gpu4", true}}},
		{"an index id", []*corev1.Pod{reportingPod("a", "r0-n-1", 0, "nvidia.com/gpu", map[string]corev1.ResourceHealthStatus{"5": bad})},
			[]got{{"r0-n-1", "gpu5", false}}},
		{"a DRA device of corral's driver", []*corev1.Pod{reportingPod("a", "r0-n-0", 0, "claim:train-gpus/gpu", map[string]corev1.ResourceHealthStatus{"gpu.nvidia.com/r0-n-0/pool/gpu2": bad})},
			[]got{{"r0-n-0", "gpu2", false}}},
		{"another driver, another resource, unknown ids and Unknown health are ignored", []*corev1.Pod{
			reportingPod("a", "r0-n-0", 0, "claim:c/r", map[string]corev1.ResourceHealthStatus{"other.example.com/p/gpu2": bad}),
			reportingPod("b", "r0-n-0", 0, "example.com/fpga", map[string]corev1.ResourceHealthStatus{"gpu1": bad}),
			reportingPod("c", "r0-n-0", 0, "nvidia.com/gpu", map[string]corev1.ResourceHealthStatus{"GPU-1234": bad, "gpu6": corev1.ResourceHealthStatusUnknown}),
			reportingPod("d", "gone", 0, "nvidia.com/gpu", map[string]corev1.ResourceHealthStatus{"gpu1": bad}),
		}, []got{}},
		{"the newest pod's report wins", []*corev1.Pod{
			reportingPod("old", "r0-n-0", 0, "nvidia.com/gpu", map[string]corev1.ResourceHealthStatus{"gpu1": bad}),
			reportingPod("new", "r0-n-0", time.Minute, "nvidia.com/gpu", map[string]corev1.ResourceHealthStatus{"gpu1": good}),
		}, []got{{"r0-n-0", "gpu1", true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := []got{}
			for _, r := range podDeviceReports(tc.pods, st, "nvidia.com/gpu", "gpu.nvidia.com") {
				out = append(out, got{r.node, r.device, r.healthy})
			}
			if diff := cmp.Diff(tc.want, out); diff != "" {
				t.Errorf("reports (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPodHealthOutlivesThePod: a device a pod reported unhealthy stays
// failed after corral evicted the pod, until a newer healthy report or the
// hold runs out.
func TestPodHealthOutlivesThePod(t *testing.T) {
	st := build.State(build.Topo("rack"), build.Racks(1, 1))
	bad := reportingPod("a", "r0-n-0", 0, "nvidia.com/gpu", map[string]corev1.ResourceHealthStatus{"gpu3": corev1.ResourceHealthStatusUnhealthy})
	var h podHealth
	failed := func(pods []*corev1.Pod, now time.Time) []string {
		var out []string
		for _, r := range h.update(podDeviceReports(pods, st, "nvidia.com/gpu", ""), now) {
			out = append(out, r.node+"/"+r.device)
		}
		return out
	}
	steps := []struct {
		what string
		pods []*corev1.Pod
		at   time.Duration
		want []string
	}{
		{"reported", []*corev1.Pod{bad}, time.Minute, []string{"r0-n-0/gpu3"}},
		{"the pod is gone", nil, 30 * time.Minute, []string{"r0-n-0/gpu3"}},
		{"the hold ran out", nil, time.Minute + podDeviceHealthHold + time.Second, nil},
		{"reported again", []*corev1.Pod{bad}, 3 * time.Hour, []string{"r0-n-0/gpu3"}},
		{"a newer pod says healthy", []*corev1.Pod{reportingPod("b", "r0-n-0", 3*time.Hour, "nvidia.com/gpu",
			map[string]corev1.ResourceHealthStatus{"gpu3": corev1.ResourceHealthStatusHealthy})}, 3*time.Hour + time.Minute, nil},
	}
	for _, s := range steps {
		if diff := cmp.Diff(s.want, failed(s.pods, reportT0.Add(s.at))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.what, diff)
		}
	}
}
