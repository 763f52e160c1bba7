package kube

import (
	"fmt"
	"sort"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// The DRA side of the adapter. The engine cannot run CEL, so the adapter
// evaluates DeviceClass and request selectors against every published device
// and hands the engine the result as data: a workload.DeviceFilter listing,
// per node, the device sets a pod may draw from (one set per value of the
// claim's matchAttribute constraints). The engine still chooses the node and
// the devices inside a set, by topology and gang as for any GPU.

// draDevice is one device of the configured driver as the allocator sees it.
type draDevice struct {
	node, pool string
	slice      string // the slice's identity and version, for the verdict memo
	dev        *resourcev1.Device
}

// draView is one cycle's DRA inventory: the devices per node, what their
// shared counters have left, and the choices made while reading claims.
// Jobs are built on one goroutine; only the binder's counter tally is
// shared between gangs bound in parallel, under mu.
type draView struct {
	driver string
	cel    *selectorCache
	// byNode lists each node's devices in name order.
	byNode map[string][]draDevice
	nodes  []string
	// left is what each counter has left: pool -> counter set -> counter.
	left map[string]map[string]map[string]resource.Quantity
	// state is the free capacity after accounting, for firstAvailable.
	state   *cluster.State
	classes func(string) (*resourcev1.DeviceClass, bool)

	filters map[string]filterResult // by filterKey: evaluated once a cycle
	taken   map[string]int          // alternative key -> pods given it this cycle
	rooms   map[string]int          // alternative key -> pods the free devices serve
	plans   map[string][]claimPlan  // pod UID -> how its devices fill its claims

	mu sync.Mutex
}

type filterResult struct {
	filter *workload.DeviceFilter
	err    error
	// minSet is the smallest eligible set (allocation mode All).
	minSet int
}

// newDRAView reads the newest generation of each pool of the driver, and
// takes from the shared counters what allocated devices consume.
func newDRAView(driver string, celCache *selectorCache, slices []*resourcev1.ResourceSlice,
	allocated map[string]bool, classes func(string) (*resourcev1.DeviceClass, bool)) *draView {
	v := &draView{driver: driver, cel: celCache, byNode: map[string][]draDevice{}, classes: classes,
		left: map[string]map[string]map[string]resource.Quantity{}, filters: map[string]filterResult{},
		taken: map[string]int{}, rooms: map[string]int{}, plans: map[string][]claimPlan{}}
	celCache.newCycle()
	newest := map[string]int64{}
	for _, s := range slices {
		if s.Spec.Driver == driver && s.Spec.Pool.Generation > newest[s.Spec.Pool.Name] {
			newest[s.Spec.Pool.Name] = s.Spec.Pool.Generation
		}
	}
	for _, s := range slices {
		if s.Spec.Driver != driver || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		pool := s.Spec.Pool.Name
		for _, cs := range s.Spec.SharedCounters {
			if v.left[pool] == nil {
				v.left[pool] = map[string]map[string]resource.Quantity{}
			}
			m := map[string]resource.Quantity{}
			for name, c := range cs.Counters {
				m[name] = c.Value.DeepCopy()
			}
			v.left[pool][cs.Name] = m
		}
		if s.Spec.NodeName == nil {
			continue // only node-local devices are GPUs of a node
		}
		for i := range s.Spec.Devices {
			v.byNode[*s.Spec.NodeName] = append(v.byNode[*s.Spec.NodeName], draDevice{node: *s.Spec.NodeName, pool: pool,
				slice: s.Name + "/" + string(s.UID) + "@" + s.ResourceVersion, dev: &s.Spec.Devices[i]})
		}
	}
	for node, devs := range v.byNode {
		sort.Slice(devs, func(i, j int) bool { return devNameLess(devs[i].dev.Name, devs[j].dev.Name) })
		v.nodes = append(v.nodes, node)
	}
	sort.Strings(v.nodes)
	for _, node := range v.nodes {
		for _, d := range v.byNode[node] {
			if allocated[node+"/"+d.dev.Name] {
				v.consume(d)
			}
		}
	}
	return v
}

// consume takes a device's counters; it reports false, taking nothing, when
// some counter has too little left.
func (v *draView) consume(d draDevice) bool {
	for _, cc := range d.dev.ConsumesCounters {
		set := v.left[d.pool][cc.CounterSet]
		for name, c := range cc.Counters {
			have, ok := set[name]
			if !ok || have.Cmp(c.Value) < 0 {
				return false
			}
		}
	}
	for _, cc := range d.dev.ConsumesCounters {
		set := v.left[d.pool][cc.CounterSet]
		for name, c := range cc.Counters {
			q := set[name]
			q.Sub(c.Value)
			set[name] = q
		}
	}
	return true
}

// fits reports whether a device's counters are still available.
func (v *draView) fits(d draDevice) bool {
	for _, cc := range d.dev.ConsumesCounters {
		set := v.left[d.pool][cc.CounterSet]
		for name, c := range cc.Counters {
			if have, ok := set[name]; !ok || have.Cmp(c.Value) < 0 {
				return false
			}
		}
	}
	return true
}

// markExhausted takes out of the state every free device whose shared
// counters are used up by allocated devices (another partition of the same
// GPU): it is not free, though no claim names it.
func (v *draView) markExhausted(s *cluster.State) {
	for _, node := range v.nodes {
		n, ok := s.NodeIndex(node)
		if !ok {
			continue
		}
		free := s.GPUFree(n)
		for _, d := range v.byNode[node] {
			if v.fits(d) {
				continue
			}
			if k := deviceIndex(s.Node(n), d.dev.Name); k >= 0 && free[k] == 1000 {
				_ = s.Allocate(n, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: k, Milli: 1000}}})
			}
		}
	}
	v.state = s
}

// reserve takes the counters of devices the binder is about to allocate on
// node, all or none, so that two partitions of one GPU chosen in the same
// cycle are not both allocated.
func (v *draView) reserve(node string, names []string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	var done []draDevice
	for _, name := range names {
		for _, d := range v.byNode[node] {
			if d.dev.Name != name {
				continue
			}
			if !v.consume(d) {
				for _, u := range done {
					v.release(u)
				}
				return fmt.Errorf("device %s shares counters with a device allocated meanwhile; will retry", name)
			}
			done = append(done, d)
		}
	}
	return nil
}

func (v *draView) release(d draDevice) {
	for _, cc := range d.dev.ConsumesCounters {
		set := v.left[d.pool][cc.CounterSet]
		for name, c := range cc.Counters {
			q := set[name]
			q.Add(c.Value)
			set[name] = q
		}
	}
}
