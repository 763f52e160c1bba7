// Package kube is corral's Kubernetes driver: informers feed an incremental
// cache, each cycle turns it into an engine Snapshot, and the engine's Plan is
// written back through the API (bindings, ResourceClaim allocations, pod
// conditions, events). It is the only package besides api/ and cmd/ that
// imports k8s.io.
package kube

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
)

// Standard DRA device attributes corral reads for topology.
const (
	attrPCIeRoot = "resource.kubernetes.io/pcieRoot"
	attrNUMANode = "resource.kubernetes.io/numaNode"
)

// deviceTopology is the JSON of the corral.dev/gpu-topology node annotation:
// one entry per GPU, in device-plugin index order.
type deviceTopology struct {
	ID     string `json:"id"`
	Socket int    `json:"socket"`
	NUMA   int    `json:"numa"`
	PCIe   int    `json:"pcie"`
	NVLink *int   `json:"nvlink,omitempty"`
	NIC    string `json:"nic,omitempty"`
}

// nodeModel reads a node's GPU model from corral's label, else GPU Feature
// Discovery's product label, else "gpu".
func nodeModel(n *corev1.Node) string {
	if m := n.Labels[v1alpha1.LabelGPUModel]; m != "" {
		return m
	}
	if m := n.Labels[v1alpha1.LabelGFDProduct]; m != "" {
		return m
	}
	return "gpu"
}

// defaultLayout lays out count GPUs when the node does not describe them: the
// DGX arrangement (one NVSwitch, 2 NUMA nodes, 2 GPUs per PCIe switch) for 8,
// otherwise one PCIe switch per GPU split over two NUMA nodes, no NVLink.
func defaultLayout(count int, model string) []cluster.Device {
	devs := make([]cluster.Device, count)
	half := max(1, (count+1)/2)
	for i := range devs {
		d := cluster.Device{ID: fmt.Sprintf("gpu%d", i), Model: model, Socket: min(i/half, 1), NUMA: min(i/half, 1)}
		if count == 8 {
			d.NVLink, d.PCIeSwitch = 0, i/2
		} else {
			d.NVLink, d.PCIeSwitch = -1, min(i, cluster.MaxCoordinate)
		}
		devs[i] = d
	}
	return devs
}

// nodeFromObject converts a Node (and the GPU devices of its ResourceSlices,
// if any) into the engine's model. Problems in optional annotations are
// returned as warnings: the node is still usable with defaults.
func nodeFromObject(n *corev1.Node, gpuResource string, slices []*resourcev1.ResourceSlice, driver string) (cluster.Node, []string) {
	var warnings []string
	out := cluster.Node{
		Name:   n.Name,
		Labels: n.Labels,
	}
	if q, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok {
		out.CPUMilli = q.MilliValue()
	}
	if q, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok {
		out.MemMiB = q.Value() >> 20
	}
	out.Unschedulable = !nodeSchedulable(n)
	for _, t := range n.Spec.Taints {
		out.Taints = append(out.Taints, cluster.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	model := nodeModel(n)

	if devs := devicesFromSlices(n.Name, slices, driver, model); len(devs) > 0 {
		out.Devices = devs
	} else if q, ok := n.Status.Allocatable[corev1.ResourceName(gpuResource)]; ok && q.Value() > 0 {
		count := int(min(q.Value(), 256))
		out.Devices = defaultLayout(count, model)
		if raw := n.Annotations[v1alpha1.AnnotationGPUTopology]; raw != "" {
			var topo []deviceTopology
			if err := json.Unmarshal([]byte(raw), &topo); err != nil {
				warnings = append(warnings, fmt.Sprintf("annotation %s: %v; using the default layout", v1alpha1.AnnotationGPUTopology, err))
			} else if len(topo) != count {
				warnings = append(warnings, fmt.Sprintf("annotation %s lists %d GPUs, the node has %d; using the default layout",
					v1alpha1.AnnotationGPUTopology, len(topo), count))
			} else {
				for i, t := range topo {
					d := &out.Devices[i]
					if t.ID != "" {
						d.ID = t.ID
					}
					d.Socket, d.NUMA, d.PCIeSwitch, d.NIC = t.Socket, t.NUMA, t.PCIe, t.NIC
					d.NVLink = -1
					if t.NVLink != nil {
						d.NVLink = *t.NVLink
					}
				}
			}
		}
	}
	if mem := gpuMemory(n); mem > 0 {
		for i := range out.Devices {
			if out.Devices[i].MemMiB == 0 {
				out.Devices[i].MemMiB = mem
			}
		}
	}
	// MIG GPUs of the device plugin's mixed strategy (mig.go).
	taken := map[string]bool{}
	for _, d := range out.Devices {
		taken[d.ID] = true
	}
	migs, migWarnings := migDevices(n, model, gpuMemory(n), len(out.Devices), taken)
	warnings = append(warnings, migWarnings...)
	if raw := n.Annotations[v1alpha1.AnnotationUnhealthyGPUs]; raw != "" {
		bad := map[string]bool{}
		for _, id := range strings.Split(raw, ",") {
			bad[strings.TrimSpace(id)] = true
		}
		for i := range out.Devices {
			if bad[out.Devices[i].ID] {
				out.Devices[i].Unhealthy = true
			}
		}
	}
	if err := out.Validate(); err != nil {
		warnings = append(warnings, err.Error()+"; using the default layout")
		out.Devices = defaultLayout(len(out.Devices), model)
	}
	out.Devices = append(out.Devices, migs...)
	return out, warnings
}

// nodeSchedulable: not cordoned and Ready. Taints do not hide a node: each
// pod may use the nodes whose NoSchedule and NoExecute taints it tolerates
// (affinity.go), as with kube-scheduler.
func nodeSchedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	return ready
}

// devicesFromSlices reads the GPUs a DRA driver publishes for a node, with
// their PCIe root and NUMA node as coordinates. Only the newest generation of
// each pool counts. Device ids are the DRA device names.
func devicesFromSlices(node string, slices []*resourcev1.ResourceSlice, driver, model string) []cluster.Device {
	newest := map[string]int64{}
	for _, s := range slices {
		if s.Spec.Driver == driver && s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			if g := s.Spec.Pool.Generation; g > newest[s.Spec.Pool.Name] {
				newest[s.Spec.Pool.Name] = g
			}
		}
	}
	type dev struct {
		d    cluster.Device
		root string
	}
	var devs []dev
	for _, s := range slices {
		if s.Spec.Driver != driver || s.Spec.NodeName == nil || *s.Spec.NodeName != node ||
			s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		for _, d := range s.Spec.Devices {
			// Every device of the driver is inventory, MIG partitions too:
			// selectors (a DeviceClass's type == "gpu") decide what serves a
			// request, and shared counters keep partitions of one GPU apart.
			cd := cluster.Device{ID: d.Name, Model: model, NVLink: -1}
			if a, ok := d.Attributes["productName"]; ok && a.StringValue != nil && *a.StringValue != "" {
				cd.Model = modelFromProduct(*a.StringValue)
			}
			// DRA GPUs are their own resource: only claims may take them.
			cd.Model = placement.DRAModelPrefix + cd.Model
			if a, ok := d.Attributes[attrNUMANode]; ok && a.IntValue != nil {
				cd.NUMA = int(min(max(*a.IntValue, 0), cluster.MaxCoordinate))
				cd.Socket = cd.NUMA
			}
			if c, ok := d.Capacity["memory"]; ok {
				cd.MemMiB = c.Value.Value() >> 20
			}
			root := ""
			if a, ok := d.Attributes[attrPCIeRoot]; ok && a.StringValue != nil {
				root = *a.StringValue
			}
			for _, t := range d.Taints {
				if t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute {
					cd.Unhealthy = true
				}
			}
			devs = append(devs, dev{cd, root})
		}
	}
	sort.Slice(devs, func(i, j int) bool { return devNameLess(devs[i].d.ID, devs[j].d.ID) })
	roots := map[string]int{}
	var order []string
	for _, d := range devs {
		if _, ok := roots[d.root]; !ok {
			order = append(order, d.root)
			roots[d.root] = 0
		}
	}
	sort.Strings(order)
	for i, r := range order {
		roots[r] = min(i, cluster.MaxCoordinate)
	}
	out := make([]cluster.Device, len(devs))
	for i, d := range devs {
		out[i] = d.d
		out[i].PCIeSwitch = roots[d.root]
	}
	return out
}

// modelFromProduct shortens an NVML product name to the model users write:
// "NVIDIA H100 80GB HBM3" -> "H100".
func modelFromProduct(p string) string {
	fields := strings.Fields(p)
	for _, f := range fields {
		if f != "NVIDIA" && f != "Tesla" && f != "GeForce" {
			return f
		}
	}
	return p
}

// devNameLess orders "gpu-2" before "gpu-10".
func devNameLess(a, b string) bool {
	na, ea := trailingInt(a)
	nb, eb := trailingInt(b)
	if ea == nil && eb == nil && strings.TrimRight(a, "0123456789") == strings.TrimRight(b, "0123456789") {
		return na < nb
	}
	return a < b
}

func trailingInt(s string) (int, error) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	return strconv.Atoi(s[i:])
}
