package framework

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUDriver is the DRA driver name of NVIDIA's GPU driver (and the name of
// the DeviceClass CreateGPUDeviceClass creates).
const GPUDriver = "gpu.nvidia.com"

// Standard DRA device attributes the fake GPUs carry.
const (
	AttrPCIeRoot = "resource.kubernetes.io/pcieRoot"
	AttrPCIBusID = "resource.kubernetes.io/pciBusID"
	AttrNUMANode = "resource.kubernetes.io/numaNode"
)

// GPUSliceSpec describes the GPUs a fake DRA driver publishes for one node.
// kwok does not emulate DRA drivers: tests and `corral dev up` publish the
// ResourceSlices themselves.
type GPUSliceSpec struct {
	// Driver defaults to GPUDriver.
	Driver string
	// GPUs is the number of devices, named gpu-0, gpu-1, ...; default 8.
	GPUs int
	// Product is the productName attribute; default "NVIDIA H100 80GB HBM3".
	Product string
	// PerPCIeRoot GPUs in index order share one resource.kubernetes.io/pcieRoot
	// (pci0000:10, pci0000:11, ...); default 2, as on a DGX H100.
	PerPCIeRoot int
	// PerNUMANode GPUs in index order share one resource.kubernetes.io/numaNode;
	// default GPUs/2 (two NUMA nodes). Negative: no numaNode attribute.
	PerNUMANode int
	// Memory is each device's "memory" capacity; default 80Gi, "-" for none.
	Memory string
}

// GPUResourceSlice returns a ResourceSlice named <node>-<driver> in pool
// <node> (generation 1, one slice) whose devices are GPUs: attributes type
// "gpu", productName, resource.kubernetes.io/pcieRoot, pciBusID and
// numaNode, and a memory capacity.
func GPUResourceSlice(node string, spec GPUSliceSpec) (*resourcev1.ResourceSlice, error) {
	if spec.Driver == "" {
		spec.Driver = GPUDriver
	}
	if spec.GPUs <= 0 {
		spec.GPUs = 8
	}
	if spec.Product == "" {
		spec.Product = "NVIDIA H100 80GB HBM3"
	}
	if spec.PerPCIeRoot <= 0 {
		spec.PerPCIeRoot = 2
	}
	if spec.PerNUMANode == 0 {
		spec.PerNUMANode = max(1, spec.GPUs/2)
	}
	var memory *resource.Quantity
	switch spec.Memory {
	case "-":
	case "":
		q := resource.MustParse("80Gi")
		memory = &q
	default:
		q, err := resource.ParseQuantity(spec.Memory)
		if err != nil {
			return nil, fmt.Errorf("GPUSliceSpec.Memory: %w", err)
		}
		memory = &q
	}
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	nodeName := node
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + spec.Driver},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   spec.Driver,
			NodeName: &nodeName,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		},
	}
	for i := 0; i < spec.GPUs; i++ {
		d := resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type":        str("gpu"),
				"productName": str(spec.Product),
				AttrPCIeRoot:  str(fmt.Sprintf("pci0000:%02x", 0x10+i/spec.PerPCIeRoot)),
				AttrPCIBusID:  str(fmt.Sprintf("0000:%02x:00.0", 0x18+i)),
			},
		}
		if spec.PerNUMANode > 0 {
			numa := int64(i / spec.PerNUMANode)
			d.Attributes[AttrNUMANode] = resourcev1.DeviceAttribute{IntValue: &numa}
		}
		if memory != nil {
			d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: *memory}}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s, nil
}

// AddGPUResourceSlice publishes GPUResourceSlice(node, spec).
func (c *Cluster) AddGPUResourceSlice(ctx context.Context, node string, spec GPUSliceSpec) (*resourcev1.ResourceSlice, error) {
	s, err := GPUResourceSlice(node, spec)
	if err != nil {
		return nil, err
	}
	return c.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
}

// CreateGPUDeviceClass creates the DeviceClass named after a DRA driver
// (default GPUDriver) that selects every device of that driver, as the
// NVIDIA DRA driver's chart does.
func (c *Cluster) CreateGPUDeviceClass(ctx context.Context, driver string) (*resourcev1.DeviceClass, error) {
	if driver == "" {
		driver = GPUDriver
	}
	dc := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == '%s'", driver)},
		}}},
	}
	return c.Client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{})
}
