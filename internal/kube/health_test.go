package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

func TestSuspectsFromAdmissionRejections(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	rejected := func(node string, ago time.Duration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-ago))},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: v1alpha1.ReasonUnexpectedAdmissionError}}
	}
	other := rejected("n3", time.Minute)
	other.Status.Reason = "Evicted"
	pods := []*corev1.Pod{
		rejected("n1", 10*time.Minute), rejected("n1", 2*time.Minute), rejected("n1", time.Minute),
		rejected("n2", 3*time.Minute),
		rejected("n4", 2*time.Hour), // outside the window
		other,
	}
	want := []cycle.Suspect{
		{Node: "n1", Rejections: 3, Until: now.Add(-time.Minute + 20*time.Minute)},
		{Node: "n2", Rejections: 1, Until: now.Add(-3*time.Minute + 5*time.Minute)},
	}
	if diff := cmp.Diff(want, suspectsOf(pods, now)); diff != "" {
		t.Errorf("suspects (-want +got):\n%s", diff)
	}
}

func TestNodeFailure(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))
	cases := map[string]struct {
		conds  []corev1.NodeCondition
		failed bool
		reason string
	}{
		"ready":     {conds: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		"not ready": {conds: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", LastTransitionTime: at}}, failed: true, reason: "NotReady NodeStatusUnknown"},
		"GPU condition false": {conds: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			{Type: v1alpha1.ConditionGPUHealthy, Status: corev1.ConditionFalse, Message: "XID 79 on gpu2", LastTransitionTime: at}},
			failed: true, reason: "corral.dev/GPUHealthy=False XID 79 on gpu2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Conditions: tc.conds}}
			f, failed := nodeFailure(n)
			if failed != tc.failed || f.Reason != tc.reason {
				t.Errorf("got %v %q, want %v %q", failed, f.Reason, tc.failed, tc.reason)
			}
			if failed && !f.Since.Equal(at.Time) {
				t.Errorf("since %v, want the condition's transition %v", f.Since, at.Time)
			}
		})
	}
}

func TestRemediationAnnotations(t *testing.T) {
	var j workload.Job
	if p := remediationFromAnnotations(&j, map[string]string{v1alpha1.AnnotationRemediation: "WaitForRepair",
		v1alpha1.AnnotationRepairWait: "45m"}); len(p) != 0 || j.Remediation != workload.WaitForRepair || j.RepairWait != 45*time.Minute {
		t.Errorf("got %v %+v", p, j)
	}
	if p := remediationFromAnnotations(&j, map[string]string{v1alpha1.AnnotationRemediation: "Reboot",
		v1alpha1.AnnotationRepairWait: "soon"}); len(p) != 2 {
		t.Errorf("bad values gave problems %v, want 2", p)
	}
}

// TestLeavingOnFailures: corral's pods already terminating on a failed
// device or node, which corral did not evict (Kubernetes evicted them for a
// NoExecute DRA taint, or a user deleted them), are found with what failed
// under them; a terminating pod on healthy devices, one corral already
// dealt with, a running pod and another scheduler's pod are not.
func TestLeavingOnFailures(t *testing.T) {
	gpus := []cluster.Device{{ID: "gpu-0", Model: "H100"}, {ID: "gpu-1", Model: "H100"}}
	s, err := cluster.New(cluster.Topology{}, []cluster.Node{{Name: "n", CPUMilli: 64000, MemMiB: 1 << 20, Devices: gpus},
		{Name: "dead", CPUMilli: 64000, MemMiB: 1 << 20, Devices: gpus}})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := s.NodeIndex("n")
	s.SetDeviceHealth(n, 1, false)
	taint := cycle.Failure{Node: "n", Device: "gpu-1", Reason: "DRA taint gpu.nvidia.com/xid=79:NoExecute"}
	down := cycle.Failure{Node: "dead", Reason: "NotReady KubeletNotReady"}
	w := &world{state: s, snap: &engine.Snapshot{Failures: []cycle.Failure{taint, down}}, holds: map[string]podHold{}}
	deleted := metav1.NewTime(time.Unix(2_000, 0))
	var pods []*corev1.Pod
	on := func(name, node string, gpu int, terminating bool) *corev1.Pod {
		p := pod(name).gpus(1).boundTo(node).obj()
		if terminating {
			p.DeletionTimestamp = &deleted
		}
		n, _ := s.NodeIndex(node)
		w.holds[string(p.UID)] = podHold{node: n, alloc: cluster.Alloc{Devices: []cluster.DeviceShare{{Device: gpu, Milli: 1000}}}}
		pods = append(pods, p)
		return p
	}
	on("on-taint", "n", 1, true)
	on("on-dead-node", "dead", 0, true)
	on("healthy-gpu", "n", 0, true)
	on("running", "n", 1, false)
	on("evicted-by-corral", "n", 1, true)
	on("other-scheduler", "n", 1, true).Spec.SchedulerName = "default-scheduler"

	got := map[string][]cycle.Failure{}
	for _, lp := range leavingOnFailures(pods, w, map[string]bool{"dead": true}, map[types.UID]bool{"uid-evicted-by-corral": true}, "corral") {
		got[lp.pod.Name] = lp.failures
	}
	want := map[string][]cycle.Failure{"on-taint": {taint}, "on-dead-node": {down}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("leaving pods (-want +got):\n%s", diff)
	}
}
