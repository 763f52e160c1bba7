package kube

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/internal/cluster"
)

// gpuSlice publishes n GPUs gpu-0.. for a node; each is 80Gi unless edit
// changes it.
func gpuSlice(node string, n int, edit func(i int, d *resourcev1.Device)) *resourcev1.ResourceSlice {
	name := node
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: &name,
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
	for i := 0; i < n; i++ {
		d := resourcev1.Device{Name: "gpu-" + string(rune('0'+i)),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"productName": strAttr("NVIDIA H100 80GB HBM3")},
			Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}}}
		if edit != nil {
			edit(i, &d)
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

func strAttr(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }

// testDRAView reads the slices as a cycle does: the nodes' GPUs into a
// state, taken marks devices already allocated.
func testDRAView(t *testing.T, groups fakeGroups, slices ...*resourcev1.ResourceSlice) *draView {
	return testDRAViewTaken(t, groups, nil, slices...)
}

func testDRAViewTaken(t *testing.T, groups fakeGroups, taken []string, slices ...*resourcev1.ResourceSlice) *draView {
	t.Helper()
	var nodes []cluster.Node
	seen := map[string]bool{}
	for _, s := range slices {
		if s.Spec.NodeName == nil || seen[*s.Spec.NodeName] {
			continue
		}
		seen[*s.Spec.NodeName] = true
		nodes = append(nodes, cluster.Node{Name: *s.Spec.NodeName, CPUMilli: 64000, MemMiB: 1 << 20,
			Devices: devicesFromSlices(*s.Spec.NodeName, slices, "gpu.nvidia.com", "gpu")})
	}
	state, err := cluster.New(cluster.Topology{}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	allocated := map[string]bool{}
	for _, id := range taken {
		node, dev, _ := strings.Cut(id, "/")
		n, _ := state.NodeIndex(node)
		if err := state.Allocate(n, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: deviceIndex(state.Node(n), dev), Milli: 1000}}}); err != nil {
			t.Fatal(err)
		}
		allocated[id] = true
	}
	v := newDRAView("gpu.nvidia.com", newCELCache(), slices, allocated, groups.deviceClass)
	v.markExhausted(state)
	return v
}

func celSel(expr string) []resourcev1.DeviceSelector {
	return []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
}

// classes answers DeviceClass lookups from a map of selectors.
type classes map[string][]resourcev1.DeviceSelector

func (c classes) lookup(name string) (*resourcev1.DeviceClass, bool) {
	sel, ok := c[name]
	if !ok {
		return nil, false
	}
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.DeviceClassSpec{Selectors: sel}}, true
}

func exactly(name string, count int64, sel string) resourcev1.DeviceRequest {
	r := resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", Count: count}}
	if sel != "" {
		r.Exactly.Selectors = celSel(sel)
	}
	return r
}

func claimOf(reqs []resourcev1.DeviceRequest, match ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	c.Spec.Devices.Requests = reqs
	for _, m := range match {
		q := resourcev1.FullyQualifiedName(m)
		c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourcev1.DeviceConstraint{MatchAttribute: &q})
	}
	return c
}

func TestClaimDevices(t *testing.T) {
	// n1: gpu-0, gpu-1 are 40Gi A100s of model "a"; gpu-2, gpu-3 80Gi H100s of model "b".
	n1 := gpuSlice("n1", 4, func(i int, d *resourcev1.Device) {
		if i < 2 {
			d.Attributes["productName"] = strAttr("NVIDIA A100-SXM4-40GB")
			d.Capacity["memory"] = resourcev1.DeviceCapacity{Value: resource.MustParse("40Gi")}
			d.Attributes["model"] = strAttr("a")
		} else {
			d.Attributes["model"] = strAttr("b")
		}
	})
	n2 := gpuSlice("n2", 2, nil)
	allDevices := classes{"gpu": celSel("device.driver == 'gpu.nvidia.com'"),
		"h100":   celSel(`device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")`),
		"broken": celSel("device.driver ==")}
	type want struct {
		GPUs     int
		Eligible map[string][][]string
		All      bool
		Parts    []claimPart
		Err      string
	}
	cases := map[string]struct {
		claim *resourcev1.ResourceClaim
		taken []string
		want  want
	}{
		"a CEL selector on memory": {
			claim: claimOf([]resourcev1.DeviceRequest{exactly("gpu", 1,
				`device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0`)}),
			want: want{GPUs: 1, Eligible: map[string][][]string{"n1": {{"gpu-2", "gpu-3"}}, "n2": {{"gpu-0", "gpu-1"}}},
				Parts: []claimPart{{result: "gpu", count: 1}}},
		},
		"class and request selectors both apply; a device the selector fails on is ruled out": {
			claim: func() *resourcev1.ResourceClaim {
				r := exactly("gpu", 1, `device.attributes["gpu.nvidia.com"].model == "b"`)
				r.Exactly.DeviceClassName = "h100"
				return claimOf([]resourcev1.DeviceRequest{r})
			}(),
			want: want{GPUs: 1, Eligible: map[string][][]string{"n1": {{"gpu-2", "gpu-3"}}}, Parts: []claimPart{{result: "gpu", count: 1}}},
		},
		"a selector that fails on every device is the reason": {
			claim: claimOf([]resourcev1.DeviceRequest{exactly("gpu", 1, `device.attributes["gpu.nvidia.com"].rack == "r1"`)}),
			want:  want{Err: `ResourceClaim c request "gpu": CEL selector "device.attributes[\"gpu.nvidia.com\"].rack == \"r1\"" failed on device gpu-0 of node n1: no such key: rack`},
		},
		"a selector that does not compile": {
			claim: claimOf([]resourcev1.DeviceRequest{exactly("gpu", 1, `device.attributes["gpu.nvidia.com"].model ==`)}),
			want:  want{Err: `ResourceClaim c request "gpu": CEL selector 0 does not compile: `},
		},
		"a DeviceClass selector that does not compile": {
			claim: func() *resourcev1.ResourceClaim {
				r := exactly("gpu", 1, "")
				r.Exactly.DeviceClassName = "broken"
				return claimOf([]resourcev1.DeviceRequest{r})
			}(),
			want: want{Err: `ResourceClaim c request "gpu": selector 0 of DeviceClass broken does not compile: `},
		},
		"an unknown DeviceClass": {
			claim: func() *resourcev1.ResourceClaim {
				r := exactly("gpu", 1, "")
				r.Exactly.DeviceClassName = "tpu"
				return claimOf([]resourcev1.DeviceRequest{r})
			}(),
			want: want{Err: `ResourceClaim c request "gpu": DeviceClass "tpu" does not exist`},
		},
		"matchAttribute on a driver attribute makes one set per value": {
			claim: claimOf([]resourcev1.DeviceRequest{exactly("gpu", 2, "")}, "gpu.nvidia.com/model"),
			want: want{GPUs: 2, Eligible: map[string][][]string{"n1": {{"gpu-0", "gpu-1"}, {"gpu-2", "gpu-3"}}},
				Parts: []claimPart{{result: "gpu", count: 2}}},
		},
		"allocationMode All takes every matching device": {
			claim: func() *resourcev1.ResourceClaim {
				r := exactly("gpu", 0, `device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")`)
				r.Exactly.AllocationMode = resourcev1.DeviceAllocationModeAll
				return claimOf([]resourcev1.DeviceRequest{r})
			}(),
			want: want{GPUs: 2, All: true, Eligible: map[string][][]string{"n1": {{"gpu-2", "gpu-3"}}, "n2": {{"gpu-0", "gpu-1"}}},
				Parts: []claimPart{{result: "gpu", count: 2, all: true}}},
		},
		"firstAvailable takes the first alternative with free devices": {
			claim: firstAvailable(),
			want: want{GPUs: 2, Eligible: map[string][][]string{"n1": {{"gpu-2", "gpu-3"}}, "n2": {{"gpu-0", "gpu-1"}}},
				Parts: []claimPart{{result: "gpu/big", count: 2}}},
		},
		"firstAvailable falls back when the first alternative's devices are taken": {
			claim: firstAvailable(),
			taken: []string{"n1/gpu-2", "n2/gpu-0"},
			want: want{GPUs: 1, Eligible: map[string][][]string{"n1": {{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}}, "n2": {{"gpu-0", "gpu-1"}}},
				Parts: []claimPart{{result: "gpu/any", count: 1}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := testDRAViewTaken(t, fakeGroups{}, tc.taken, n1, n2)
			v.classes = allDevices.lookup
			need, err := v.claimDevices("uid", []*resourcev1.ResourceClaim{tc.claim})
			var got want
			if err != nil {
				got.Err = err.Error()
				if strings.HasPrefix(got.Err, tc.want.Err) && tc.want.Err != "" {
					got.Err = tc.want.Err // the CEL library's own wording may change
				}
			} else {
				got = want{GPUs: need.gpus, Eligible: need.filter.Groups, All: need.filter.All, Parts: need.plans[0].parts}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(claimPart{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// firstAvailable asks for two 80Gi GPUs, else one GPU of any kind.
func firstAvailable() *resourcev1.ResourceClaim {
	return claimOf([]resourcev1.DeviceRequest{{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "big", DeviceClassName: "gpu", Count: 2,
			Selectors: celSel(`device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0`)},
		{Name: "any", DeviceClassName: "gpu", Count: 1},
	}}})
}

// A GPU published whole and as two halves: the three share one memory
// counter, so allocating the whole GPU leaves no half free, and reserving
// both a half and the whole in one cycle fails on the second.
func TestSharedCounters(t *testing.T) {
	node := "n1"
	mem := func(q string) map[string]resourcev1.Counter {
		return map[string]resourcev1.Counter{"memory": {Value: resource.MustParse(q)}}
	}
	devices := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "devs"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}}}
	for _, d := range []struct{ name, q string }{{"gpu-0", "80Gi"}, {"gpu-0-a", "40Gi"}, {"gpu-0-b", "40Gi"}} {
		devices.Spec.Devices = append(devices.Spec.Devices, resourcev1.Device{Name: d.name,
			ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: mem(d.q)}}})
	}
	counters := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "counters"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: &node,
			Pool:           resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2},
			SharedCounters: []resourcev1.CounterSet{{Name: "gpu-0", Counters: mem("80Gi")}}}}

	v := testDRAViewTaken(t, fakeGroups{}, []string{"n1/gpu-0-a"}, devices, counters)
	free := v.state.GPUFree(0)
	if diff := cmp.Diff([]int32{0, 0, 1000}, []int32(free)); diff != "" {
		t.Errorf("free milli of gpu-0, gpu-0-a, gpu-0-b with gpu-0-a allocated (-want +got):\n%s", diff)
	}
	if err := v.reserve(node, []string{"gpu-0-b"}); err != nil {
		t.Fatalf("reserving the free half: %v", err)
	}
	if err := v.reserve(node, []string{"gpu-0"}); err == nil {
		t.Errorf("reserving the whole GPU after both halves succeeded")
	}
}

// BenchmarkSelectorEvaluation is one cycle's work for one distinct claim
// request on 1,000 nodes of 8 GPUs: the class and the request selector on
// every device, grouped for the engine. "first" is a cycle that has not seen
// these devices (every selector evaluated), "next" a later cycle over the
// same slices (verdicts recalled).
func BenchmarkSelectorEvaluation(b *testing.B) {
	var slices []*resourcev1.ResourceSlice
	for n := 0; n < 1000; n++ {
		slices = append(slices, gpuSlice(fmt.Sprintf("n%04d", n), 8, nil))
	}
	cls := classes{"gpu": celSel("device.driver == 'gpu.nvidia.com'")}
	req := deviceRequest{result: "gpu", class: "gpu", count: 2,
		selectors: celSel(`device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0`)}
	cycle := func(b *testing.B, sel *selectorCache) {
		v := newDRAView("gpu.nvidia.com", sel, slices, nil, cls.lookup)
		if res := v.filterFor("c", req, nil); res.err != nil || len(res.filter.Groups) != 1000 {
			b.Fatalf("err %v, %d nodes", res.err, len(res.filter.Groups))
		}
	}
	b.Run("first", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cycle(b, newCELCache())
		}
	})
	b.Run("next", func(b *testing.B) {
		sel := newCELCache()
		cycle(b, sel)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			cycle(b, sel)
		}
	})
}
