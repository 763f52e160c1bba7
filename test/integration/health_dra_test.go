package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// TestDRADeviceTaintReplacesTheRank: a DRA driver taints one GPU under a
// running 2-node gang whose pods hold their GPUs through ResourceClaims.
// corral removes only the rank holding that GPU, says why, and allocates the
// recreated pod's claim on healthy GPUs of the same rack, never the tainted
// one.
//
// With NoSchedule, Kubernetes leaves the running pod alone and corral
// evicts it. With NoExecute, kube-controller-manager's device taint eviction
// deletes it within milliseconds, often before corral's next cycle; the
// test makes that order certain by stopping corral while Kubernetes evicts.
// corral must then still say why and keep the replacement in the rack.
func TestDRADeviceTaintReplacesTheRank(t *testing.T) {
	for _, effect := range []resourcev1.DeviceTaintEffect{resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute} {
		t.Run(string(effect), func(t *testing.T) { draTaintReplacesTheRank(t, effect) })
	}
}

// terminatingHold is a finalizer the test puts on the rank that will fail:
// it keeps the pod Terminating after its deletion, as a real kubelet does
// for the pod's grace period (kwok removes deleted pods at once).
const terminatingHold = "test.corral.dev/terminating"

func draTaintReplacesTheRank(t *testing.T, effect resourcev1.DeviceTaintEffect) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Rack r0 has three nodes of 4 GPUs, r1 one: the gang (rack required,
	// 4 GPUs per pod) fits only in r0 and leaves one node of it free, while
	// r1-n0 tempts a replacement placed anywhere.
	for _, n := range []string{"r0-n0", "r0-n1", "r0-n2", "r1-n0"} {
		rack, _, _ := strings.Cut(n, "-")
		if _, err := c.AddGPUNode(ctx, framework.NodeSpec{Name: n, Labels: map[string]string{"corral.dev/rack": rack}}); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitNodeReady(ctx, n); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AddGPUResourceSlice(ctx, n, framework.GPUSliceSpec{GPUs: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateGPUDeviceClass(ctx, ""); err != nil {
		t.Fatal(err)
	}
	ns := kit.Namespace(t, c, "taint-")
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "four-gpus", Namespace: ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: framework.GPUDriver, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 4}}}}}}}
	if _, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stopCorral := startCorralStoppable(t, c)

	pods := runGang(t, c, ns, "train", func(int) corev1.PodSpec { return draPodSpec(tmpl.Name) })
	victim, survivor := pods[0], pods[1]
	claim := waitAllocated(t, c, ns, victim.Name)
	tainted := claim.Status.Allocation.Devices.Results[0]
	failedNode := victim.Spec.NodeName
	spare := freeNodeOfRack(pods, "r0", 3)
	hold := fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, terminatingHold)
	if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, victim.Name, types.MergePatchType, []byte(hold), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if effect == resourcev1.DeviceTaintEffectNoExecute {
		stopCorral()
	}

	// The driver taints the GPU in a new generation of its pool.
	eventually(t, 10*time.Second, "the device tainted", func() (bool, string) {
		s, err := c.Client.ResourceV1().ResourceSlices().Get(ctx, failedNode+"-"+framework.GPUDriver, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s.Spec.Pool.Generation++
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == tainted.Device {
				s.Spec.Devices[i].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79",
					Effect: effect, TimeAdded: ptr(metav1.Now())}}
			}
		}
		_, err = c.Client.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	taintedAt := time.Now()
	eventually(t, 30*time.Second, "the rank on the tainted device deleted", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.DeletionTimestamp != nil, "pod " + p.Name + " not deleted"
	})
	t.Logf("the rank on the tainted device was deleted %.1fs after the taint", time.Since(taintedAt).Seconds())
	onPod := "replacing 1 of 2 pods in rack r0"
	if effect == resourcev1.DeviceTaintEffectNoExecute {
		startCorral(t, c)
		onPod = "already being deleted (DeletionByDeviceTaintManager); its replacement is placed in rack r0, with the healthy ranks"
	}
	expectFailureEvents(t, c, victim.Name, failedNode, tainted.Device, "DRA taint gpu.nvidia.com/xid=79:"+string(effect), onPod)

	// The kubelet has stopped the pod: it goes.
	if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, victim.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted rank gone", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != victim.UID) {
			return true, ""
		}
		return false, fmt.Sprint(err)
	})
	expectUndisturbed(t, c, survivor)

	// Its owner recreates the pod, as a Job or JobSet controller would;
	// the resource claim controller gives it a new claim from the template.
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, gangMember(ns, "train", 0, draPodSpec(tmpl.Name)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newClaim := waitAllocated(t, c, ns, victim.Name)
	if newClaim.UID == claim.UID {
		t.Fatalf("the replacement reuses the evicted pod's claim %s", claim.Name)
	}
	replacement := waitBound(t, c, ns, victim.Name)
	if replacement.Spec.NodeName != spare {
		t.Errorf("replacement on %s, want %s (the free node of rack r0)", replacement.Spec.NodeName, spare)
	}
	for _, r := range newClaim.Status.Allocation.Devices.Results {
		if r.Pool != spare {
			t.Errorf("replacement claim holds %s/%s, want devices of %s", r.Pool, r.Device, spare)
		}
	}

	// No live claim holds the tainted device.
	claims, err := c.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range claims.Items {
		if cl.Status.Allocation == nil || cl.DeletionTimestamp != nil || len(cl.Status.ReservedFor) == 0 {
			continue
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			if r.Pool == tainted.Pool && r.Device == tainted.Device {
				t.Errorf("claim %s/%s holds the tainted device %s/%s", cl.Namespace, cl.Name, r.Pool, r.Device)
			}
		}
	}

}

// draPodSpec is a corral pod spec whose GPUs come from a claim made from
// the template.
func draPodSpec(template string) corev1.PodSpec {
	spec := kit.GPUPodSpec(0)
	spec.Containers[0].Resources.Limits = nil
	spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: &template}}
	return spec
}
