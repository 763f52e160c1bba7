package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// draSlice publishes 8 GPUs for a node whose PCIe roots alternate, so that
// the first two devices by name sit under different roots.
func draSlice(node string) *resourcev1.ResourceSlice {
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu.nvidia.com"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}},
	}
	for i := 0; i < 8; i++ {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type":                            str("gpu"),
				"productName":                     str("NVIDIA H100 80GB HBM3"),
				"resource.kubernetes.io/pcieRoot": str(fmt.Sprintf("pci0000:%02x", 0x10+i%4)),
				"resource.kubernetes.io/pciBusID": str(fmt.Sprintf("0000:%02x:00.0", 0x18+i)),
			},
		})
	}
	return s
}

func TestDRAClaimSharesAPCIeRoot(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.AddGPUNode(ctx, framework.NodeSpec{Name: "dra-0"}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitNodeReady(ctx, "dra-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, draSlice("dra-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := kit.Namespace(t, c, "dra-")
	// The example from examples/, as a user would apply it, in a fresh namespace.
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range readObjects(t, filepath.Join(root, "examples", "dra-2gpu-same-pcie-root.yaml")) {
		gvk := obj.GroupVersionKind()
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version}
		switch gvk.Kind {
		case "DeviceClass":
			gvr.Resource = "deviceclasses"
			_, err = c.Dynamic.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{})
		case "ResourceClaimTemplate":
			gvr.Resource = "resourceclaimtemplates"
			obj.SetNamespace(ns)
			_, err = c.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		case "Pod":
			gvr.Resource = "pods"
			obj.SetNamespace(ns)
			_, err = c.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		default:
			t.Fatalf("unexpected %s in the example", gvk.Kind)
		}
		if err != nil {
			t.Fatalf("creating %s: %v", gvk.Kind, err)
		}
	}
	startCorral(t, c)

	var claim *resourcev1.ResourceClaim
	eventually(t, 60*time.Second, "the pod bound with its claim allocated", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "two-gpus", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Spec.NodeName == "" {
			_, msg := scheduledCondition(p)
			return false, "not bound: " + msg
		}
		if len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, "no claim status"
		}
		claim, err = c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return claim.Status.Allocation != nil, "claim not allocated"
	})
	results := claim.Status.Allocation.Devices.Results
	if len(results) != 2 {
		t.Fatalf("allocation has %d devices, want 2: %+v", len(results), results)
	}
	rootOf := map[string]string{}
	for _, d := range draSlice("dra-0").Spec.Devices {
		rootOf[d.Name] = *d.Attributes["resource.kubernetes.io/pcieRoot"].StringValue
	}
	if rootOf[results[0].Device] != rootOf[results[1].Device] {
		t.Errorf("devices %s and %s sit under different PCIe roots (%s, %s)", results[0].Device, results[1].Device,
			rootOf[results[0].Device], rootOf[results[1].Device])
	}
	for _, r := range results {
		if r.Driver != "gpu.nvidia.com" || r.Pool != "dra-0" || r.Request != "gpus" {
			t.Errorf("result %+v: want driver gpu.nvidia.com, pool dra-0, request gpus", r)
		}
	}
	if !hasString(claim.Finalizers, "resource.kubernetes.io/delete-protection") {
		t.Errorf("claim finalizers %v lack delete-protection", claim.Finalizers)
	}
	if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].Name != "two-gpus" || claim.Status.ReservedFor[0].Resource != "pods" {
		t.Errorf("reservedFor = %+v, want the pod", claim.Status.ReservedFor)
	}
	ns2 := claim.Status.Allocation.NodeSelector
	if ns2 == nil || len(ns2.NodeSelectorTerms) != 1 || ns2.NodeSelectorTerms[0].MatchFields[0].Values[0] != "dra-0" {
		t.Errorf("allocation node selector %+v, want metadata.name in [dra-0]", ns2)
	}
}

func hasString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
