package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// The example of examples/dra-cel-first-available.yaml on a node of A100s
// only: the first alternative (an H100) matches nothing, so corral falls
// back to the second, two A100s under one PCIe root.
func TestDRAFirstAvailableExample(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addDRANode(t, c, "a100-0")
	slice, err := c.AddGPUResourceSlice(ctx, "a100-0", framework.GPUSliceSpec{Product: "NVIDIA A100-SXM4-40GB", Memory: "40Gi"})
	if err != nil {
		t.Fatal(err)
	}
	ns := kit.Namespace(t, c, "dra-fa-")
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs := readObjects(t, filepath.Join(root, "examples", "dra-cel-first-available.yaml"))
	for _, o := range objs {
		if o.GetNamespace() != "" {
			o.SetNamespace(ns)
		}
	}
	if err := c.CreateObjects(ctx, objs...); err != nil {
		t.Fatal(err)
	}
	startCorral(t, c)

	claim := waitAllocated(t, c, ns, "h100-or-two-a100")
	results := claim.Status.Allocation.Devices.Results
	if len(results) != 2 {
		t.Fatalf("allocation has %d devices, want 2: %+v", len(results), results)
	}
	rootOf := map[string]string{}
	for _, d := range slice.Spec.Devices {
		rootOf[d.Name] = *d.Attributes[framework.AttrPCIeRoot].StringValue
	}
	for _, r := range results {
		if r.Request != "gpu/two-a100" {
			t.Errorf("result %+v: want request gpu/two-a100 (the second alternative)", r)
		}
	}
	if rootOf[results[0].Device] != rootOf[results[1].Device] {
		t.Errorf("devices %s and %s sit under different PCIe roots", results[0].Device, results[1].Device)
	}
}

// One cluster, one scenario per node (each DeviceClass selects its node's
// devices by a "scenario" attribute, so scenarios cannot take each other's
// devices): a CEL selector on memory, allocationMode All, matchAttribute on
// a driver attribute, a partitionable GPU whose halves share a counter with
// the whole, and two claims corral cannot serve (a selector that does not
// compile for corral, an unknown DeviceClass), which get their reasons
// while the others bind.
func TestDRASelectorsAllMatchAndCounters(t *testing.T) {
	// With this alpha gate the API server accepts selectors that treat an
	// attribute as a list; corral reads scalar attributes only, so for
	// corral such a selector does not compile.
	c := framework.Start(t, framework.Options{FeatureGates: map[string]bool{"DRAListTypeAttributes": true}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	cl := c.Client.ResourceV1()

	type dev struct {
		name  string
		attrs map[string]string
		mem   string
		uses  string // memory taken from counter set "gpu-0"
	}
	scenarios := []struct {
		node     string
		devices  []dev
		counters string // the node's "gpu-0" memory counter, if any
	}{
		{node: "mem-0", devices: []dev{{name: "gpu-0", mem: "40Gi"}, {name: "gpu-1", mem: "80Gi"}}},
		{node: "all-0", devices: []dev{{name: "gpu-0"}, {name: "gpu-1"}, {name: "gpu-2"}}},
		// pcieRoot pairs gpu-0/gpu-1 and gpu-2/gpu-3; boards pair them across.
		{node: "match-0", devices: []dev{{name: "gpu-0", attrs: map[string]string{"board": "b0"}},
			{name: "gpu-1", attrs: map[string]string{"board": "b1"}}, {name: "gpu-2", attrs: map[string]string{"board": "b0"}},
			{name: "gpu-3", attrs: map[string]string{"board": "b1"}}}},
		{node: "part-0", counters: "80Gi", devices: []dev{{name: "whole", attrs: map[string]string{"profile": "whole"}, uses: "80Gi"},
			{name: "half-a", attrs: map[string]string{"profile": "half"}, uses: "40Gi"},
			{name: "half-b", attrs: map[string]string{"profile": "half"}, uses: "40Gi"}}},
	}
	for _, sc := range scenarios {
		addDRANode(t, c, sc.node)
		scenario, _, _ := strings.Cut(sc.node, "-")
		node := sc.node
		slices := 1
		if sc.counters != "" {
			slices = 2
		}
		pool := resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: int64(slices)}
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-devices"},
			Spec: resourcev1.ResourceSliceSpec{Driver: framework.GPUDriver, NodeName: &node, Pool: pool}}
		for i, d := range sc.devices {
			mem := d.mem
			if mem == "" {
				mem = "80Gi"
			}
			attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"scenario":             {StringValue: ptr(scenario)},
				framework.AttrPCIeRoot: {StringValue: ptr(fmt.Sprintf("pci0000:%02x", 0x10+i/2))},
			}
			for k, v := range d.attrs {
				attrs[resourcev1.QualifiedName(k)] = resourcev1.DeviceAttribute{StringValue: ptr(v)}
			}
			rd := resourcev1.Device{Name: d.name, Attributes: attrs,
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse(mem)}}}
			if d.uses != "" {
				rd.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0",
					Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse(d.uses)}}}}
			}
			s.Spec.Devices = append(s.Spec.Devices, rd)
		}
		if _, err := cl.ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("slice of %s: %v", node, err)
		}
		if sc.counters != "" {
			cs := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-counters"},
				Spec: resourcev1.ResourceSliceSpec{Driver: framework.GPUDriver, NodeName: &node, Pool: pool,
					SharedCounters: []resourcev1.CounterSet{{Name: "gpu-0",
						Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse(sc.counters)}}}}}}
			if _, err := cl.ResourceSlices().Create(ctx, cs, metav1.CreateOptions{}); err != nil {
				t.Fatalf("counter slice of %s: %v", node, err)
			}
		}
		dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: scenario},
			Spec: resourcev1.DeviceClassSpec{Selectors: celSelectors(fmt.Sprintf(
				`device.driver == %q && device.attributes[%q].scenario == %q`, framework.GPUDriver, framework.GPUDriver, scenario))}}
		if _, err := cl.DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	ns := kit.Namespace(t, c, "dra-cel-")
	claims := map[string]resourcev1.DeviceClaim{
		"mem": {Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "mem",
			Selectors: celSelectors(`device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0`)}}}},
		"all": {Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "all",
			AllocationMode: resourcev1.DeviceAllocationModeAll}}}},
		"match": {Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "match", Count: 2}}},
			Constraints: []resourcev1.DeviceConstraint{{MatchAttribute: ptr(resourcev1.FullyQualifiedName("gpu.nvidia.com/board"))}}},
		"whole": {Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "part",
			Selectors: celSelectors(`device.attributes["gpu.nvidia.com"].profile == "whole"`)}}}},
		"half": {Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "part",
			Selectors: celSelectors(`device.attributes["gpu.nvidia.com"].profile == "half"`)}}}},
		"bad-cel": {Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "mem",
			Selectors: celSelectors(`device.attributes["gpu.nvidia.com"].scenario.exists(s, s == "mem")`)}}}},
		"no-class": {Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "nope"}}}},
	}
	for name, spec := range claims {
		rc := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: resourcev1.ResourceClaimSpec{Devices: spec}}
		if _, err := cl.ResourceClaims(ns).Create(ctx, rc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("claim %s: %v", name, err)
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, claimPod(ns, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startCorral(t, c)

	devicesOf := func(rc *resourcev1.ResourceClaim) []string {
		var out []string
		for _, r := range rc.Status.Allocation.Devices.Results {
			out = append(out, r.Device)
		}
		return out
	}
	if got := devicesOf(waitAllocated(t, c, ns, "mem")); len(got) != 1 || got[0] != "gpu-1" {
		t.Errorf("memory selector: devices %v, want [gpu-1] (the 80Gi GPU)", got)
	}
	if got := devicesOf(waitAllocated(t, c, ns, "all")); strings.Join(got, ",") != "gpu-0,gpu-1,gpu-2" {
		t.Errorf("allocationMode All: devices %v, want every device of all-0", got)
	}
	board := map[string]string{"gpu-0": "b0", "gpu-1": "b1", "gpu-2": "b0", "gpu-3": "b1"}
	if got := devicesOf(waitAllocated(t, c, ns, "match")); len(got) != 2 || board[got[0]] != board[got[1]] {
		t.Errorf("matchAttribute board: devices %v are not on one board", got)
	}

	for pod, want := range map[string][]string{
		"bad-cel":  {`ResourceClaim bad-cel request "gpu"`, "does not compile", "cannot be range of a comprehension"},
		"no-class": {`ResourceClaim no-class request "gpu"`, `DeviceClass "nope" does not exist`},
	} {
		eventually(t, 20*time.Second, pod+" marked Invalid", func() (bool, string) {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			reason, msg := scheduledCondition(p)
			if reason != "Invalid" {
				return false, fmt.Sprintf("reason %q, message %q", reason, msg)
			}
			for _, w := range want {
				if !strings.Contains(msg, w) {
					return false, fmt.Sprintf("message %q lacks %q", msg, w)
				}
			}
			return true, ""
		})
		eventually(t, 10*time.Second, pod+"'s FailedScheduling event", func() (bool, string) {
			evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, e := range evs.Items {
				if e.Regarding.Name == pod && e.Reason == "FailedScheduling" && strings.Contains(e.Note, want[len(want)-1]) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d events, none for %s", len(evs.Items), pod)
		})
	}

	// The whole GPU and a half share the "gpu-0" memory counter: whichever
	// corral allocates first, the other must not be allocated as well.
	var first string
	eventually(t, 20*time.Second, "one of whole and half allocated", func() (bool, string) {
		for _, name := range []string{"whole", "half"} {
			rc, err := cl.ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && rc.Status.Allocation != nil {
				first = name
				return true, ""
			}
		}
		return false, "neither allocated"
	})
	time.Sleep(3 * time.Second) // fifteen cycles
	allocated := 0
	for _, name := range []string{"whole", "half"} {
		rc, err := cl.ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rc.Status.Allocation != nil {
			allocated++
		}
	}
	if allocated != 1 {
		t.Errorf("%d of the whole GPU and its half are allocated (first %s), want 1: they share a counter", allocated, first)
	}
	other := map[string]string{"whole": "half", "half": "whole"}[first]
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, other, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if reason, msg := scheduledCondition(p); p.Spec.NodeName != "" || reason != corev1.PodReasonUnschedulable {
		t.Errorf("pod %s: node %q, reason %q (%s); want unbound and Unschedulable", other, p.Spec.NodeName, reason, msg)
	}
}

// addDRANode adds a kwok node without the GPU extended resource (its GPUs
// come from ResourceSlices) and waits for it to be Ready.
func addDRANode(t *testing.T, c *framework.Cluster, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.AddGPUNode(ctx, framework.NodeSpec{Name: name}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitNodeReady(ctx, name); err != nil {
		t.Fatal(err)
	}
}

// claimPod is a corral pod using the ResourceClaim of its own name.
func claimPod(ns, name string) *corev1.Pod {
	claim := name
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName:  v1alpha1.SchedulerName,
			RestartPolicy:  corev1.RestartPolicyNever,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}},
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}
}

// waitAllocated waits until the pod is bound and its (one) claim allocated,
// and returns the claim.
func waitAllocated(t *testing.T, c *framework.Cluster, ns, pod string) *resourcev1.ResourceClaim {
	t.Helper()
	var claim *resourcev1.ResourceClaim
	eventually(t, 30*time.Second, pod+" bound with its claim allocated", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Spec.NodeName == "" {
			_, msg := scheduledCondition(p)
			return false, "not bound: " + msg
		}
		name := ""
		if rc := p.Spec.ResourceClaims[0]; rc.ResourceClaimName != nil {
			name = *rc.ResourceClaimName
		} else if len(p.Status.ResourceClaimStatuses) > 0 && p.Status.ResourceClaimStatuses[0].ResourceClaimName != nil {
			name = *p.Status.ResourceClaimStatuses[0].ResourceClaimName
		}
		if name == "" {
			return false, "no claim name"
		}
		claim, err = c.Client.ResourceV1().ResourceClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return claim.Status.Allocation != nil, "claim not allocated"
	})
	return claim
}

func celSelectors(expr string) []resourcev1.DeviceSelector {
	return []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
}

func ptr[T any](v T) *T { return &v }
