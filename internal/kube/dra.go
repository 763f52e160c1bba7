package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	dracel "k8s.io/dynamic-resource-allocation/cel"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// The DRA side of the adapter. The engine cannot run CEL, so the adapter
// evaluates DeviceClass and request selectors against every published device
// and hands the engine the result as data: a workload.DeviceFilter listing,
// per node, the device sets a pod may draw from (one set per value of the
// claim's matchAttribute constraints). The engine still chooses the node and
// the devices inside a set, by topology and gang as for any GPU.

// celCacheSize bounds the compiled selectors kept: expressions come from a
// few DeviceClasses and claim templates, so a small LRU holds them all.
const celCacheSize = 512

// newCELCache compiles each expression once and keeps it by its text, in
// the environment for stored expressions, as kube-scheduler does. Consumable
// capacity (beta, on in 1.36) is in it; list-type attributes (alpha) are
// not, because corral reads scalar attributes only: a selector that treats
// an attribute as a list (accepted by an API server with that gate on) is
// reported as not compiling.
func newCELCache() *selectorCache {
	return &selectorCache{cel: dracel.NewCache(celCacheSize, dracel.Features{EnableConsumableCapacity: true}),
		memo: map[matchKey]matchEntry{}}
}

// selectorCache keeps compiled selectors and, across cycles, each
// selector's verdict on each device: evaluating one costs tens of
// microseconds, and devices rarely change. A verdict is keyed by the
// device's slice version, so a republished slice is evaluated afresh;
// verdicts not used in the last cycle are dropped. Guarded by mu (the
// scheduler and explain may read at once).
type selectorCache struct {
	cel *dracel.Cache

	mu    sync.Mutex
	cycle uint64
	memo  map[matchKey]matchEntry
}

type matchKey struct{ expr, slice, device string }

type matchEntry struct {
	match bool
	err   error
	used  uint64
}

// newCycle starts a cycle: verdicts unused in the previous one go.
func (c *selectorCache) newCycle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cycle++
	for k, e := range c.memo {
		if e.used+1 < c.cycle {
			delete(c.memo, k)
		}
	}
}

// matchesLocked evaluates a compiled selector on a device, or recalls the
// verdict. The caller holds mu.
func (c *selectorCache) matchesLocked(p dracel.CompilationResult, d draDevice, driver string) (bool, error) {
	key := matchKey{p.Expression, d.slice, d.dev.Name}
	if e, ok := c.memo[key]; ok {
		e.used = c.cycle
		c.memo[key] = e
		return e.match, e.err
	}
	m, _, err := p.DeviceMatches(context.Background(), cel(d, driver))
	c.memo[key] = matchEntry{match: m, err: err, used: c.cycle}
	return m, err
}

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

// deviceRequest is one way to satisfy a claim request: the request itself
// (exactly) or one of its firstAvailable subrequests.
type deviceRequest struct {
	result    string // the name allocation results carry: "req" or "req/sub"
	class     string
	selectors []resourcev1.DeviceSelector
	all       bool
	count     int
}

func exactRequest(name string, r *resourcev1.ExactDeviceRequest) deviceRequest {
	return deviceRequest{result: name, class: r.DeviceClassName, selectors: r.Selectors,
		all: r.AllocationMode == resourcev1.DeviceAllocationModeAll, count: int(max(r.Count, 1))}
}

func subRequest(name string, r *resourcev1.DeviceSubRequest) deviceRequest {
	return deviceRequest{result: name + "/" + r.Name, class: r.DeviceClassName, selectors: r.Selectors,
		all: r.AllocationMode == resourcev1.DeviceAllocationModeAll, count: int(max(r.Count, 1))}
}

// claimPart is how many of a pod's chosen devices go to one request result.
type claimPart struct {
	result string
	count  int
	all    bool // the rest of the devices
}

// claimPlan tells the binder how to write one claim's allocation.
type claimPlan struct {
	claim *resourcev1.ResourceClaim
	parts []claimPart
}

// filterKey names what decides a request's eligible devices.
func filterKey(r deviceRequest, match []string) string {
	var b strings.Builder
	b.WriteString(r.class)
	for _, s := range r.selectors {
		if s.CEL != nil {
			b.WriteString("\x00")
			b.WriteString(s.CEL.Expression)
		}
	}
	fmt.Fprintf(&b, "\x01%s\x01%t", strings.Join(match, ","), r.all)
	return b.String()
}

// filterFor evaluates the class's and the request's selectors on every
// device, once a cycle per distinct request, and groups the matching devices
// of each node by the values of the matchAttribute attributes.
func (v *draView) filterFor(claim string, req deviceRequest, match []string) filterResult {
	key := filterKey(req, match)
	if f, ok := v.filters[key]; ok {
		return f
	}
	res := v.evaluate(claim, req, match, key)
	v.filters[key] = res
	return res
}

func (v *draView) evaluate(claim string, req deviceRequest, match []string, key string) filterResult {
	where := fmt.Sprintf("ResourceClaim %s request %q", claim, req.result)
	class, ok := v.classes(req.class)
	if !ok {
		return filterResult{err: fmt.Errorf("%s: DeviceClass %q does not exist", where, req.class)}
	}
	type compiled struct {
		expr string
		res  dracel.CompilationResult
	}
	var progs []compiled
	for i, s := range class.Spec.Selectors {
		if s.CEL == nil {
			continue
		}
		r := v.cel.cel.GetOrCompile(s.CEL.Expression)
		if r.Error != nil {
			return filterResult{err: fmt.Errorf("%s: selector %d of DeviceClass %s does not compile: %s", where, i, req.class, firstLine(r.Error.Detail))}
		}
		progs = append(progs, compiled{s.CEL.Expression, r})
	}
	for i, s := range req.selectors {
		if s.CEL == nil {
			continue
		}
		r := v.cel.cel.GetOrCompile(s.CEL.Expression)
		if r.Error != nil {
			return filterResult{err: fmt.Errorf("%s: CEL selector %d does not compile: %s", where, i, firstLine(r.Error.Detail))}
		}
		progs = append(progs, compiled{s.CEL.Expression, r})
	}
	f := &workload.DeviceFilter{Key: key, Groups: map[string][][]string{}, All: req.all}
	res := filterResult{filter: f}
	// A selector that fails on a device (say, an attribute it lacks) rules
	// that device out, as kube-scheduler rules out the node; the error is
	// the reason only when no device matches anywhere.
	var evalErr error
	v.cel.mu.Lock()
	defer v.cel.mu.Unlock()
	for _, node := range v.nodes {
		sets := map[string][]string{}
		var order []string
		for _, d := range v.byNode[node] {
			ok := true
			for _, p := range progs {
				m, err := v.cel.matchesLocked(p.res, d, v.driver)
				if err != nil && evalErr == nil {
					evalErr = fmt.Errorf("%s: CEL selector %q failed on device %s of node %s: %v", where, p.expr, d.dev.Name, node, err)
				}
				if err != nil || !m {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			value, ok := matchValue(d, v.driver, match)
			if !ok {
				continue // a device without the attribute cannot satisfy the constraint
			}
			if _, seen := sets[value]; !seen {
				order = append(order, value)
			}
			sets[value] = append(sets[value], d.dev.Name)
		}
		if len(order) == 0 || (req.all && len(order) > 1) {
			// All takes every matching device, so they must all agree.
			continue
		}
		sort.Strings(order)
		for _, value := range order {
			f.Groups[node] = append(f.Groups[node], sets[value])
			if res.minSet == 0 || len(sets[value]) < res.minSet {
				res.minSet = len(sets[value])
			}
		}
	}
	if len(f.Groups) == 0 && evalErr != nil {
		return filterResult{err: evalErr}
	}
	return res
}

// firstLine keeps a CEL error to its first line: the rest draws a caret
// under the expression, which a pod condition cannot show.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// cel is a device as the CEL environment sees it.
func cel(d draDevice, driver string) dracel.Device {
	return dracel.Device{Driver: driver, Attributes: d.dev.Attributes, Capacity: d.dev.Capacity,
		AllowMultipleAllocations: d.dev.AllowMultipleAllocations}
}

// matchValue is the device's value of each matchAttribute attribute, joined.
// Attributes in the driver's own domain may be published unqualified.
func matchValue(d draDevice, driver string, match []string) (string, bool) {
	var parts []string
	for _, name := range match {
		a, ok := d.dev.Attributes[resourcev1.QualifiedName(name)]
		if !ok {
			if id, found := strings.CutPrefix(name, driver+"/"); found {
				a, ok = d.dev.Attributes[resourcev1.QualifiedName(id)]
			}
		}
		if !ok {
			return "", false
		}
		switch {
		case a.IntValue != nil:
			parts = append(parts, fmt.Sprintf("i%d", *a.IntValue))
		case a.BoolValue != nil:
			parts = append(parts, fmt.Sprintf("b%t", *a.BoolValue))
		case a.StringValue != nil:
			parts = append(parts, "s"+*a.StringValue)
		case a.VersionValue != nil:
			parts = append(parts, "v"+*a.VersionValue)
		default:
			return "", false
		}
	}
	return strings.Join(parts, "\x00"), true
}

// roomFor is room, computed once a cycle per alternative: the free
// capacity it reads does not change while jobs are built.
func (v *draView) roomFor(key string, f *workload.DeviceFilter, count int) int {
	if r, ok := v.rooms[key]; ok {
		return r
	}
	r := v.room(f, count)
	v.rooms[key] = r
	return r
}

// room is how many pods asking for count devices of the filter (or, with
// All, whole sets) the free devices could serve now.
func (v *draView) room(f *workload.DeviceFilter, count int) int {
	if v.state == nil {
		return 0
	}
	total := 0
	for _, node := range v.nodes {
		n, ok := v.state.NodeIndex(node)
		if !ok || !v.state.Schedulable(n) {
			continue
		}
		free := v.state.GPUFree(n)
		for _, set := range f.Groups[node] {
			c := 0
			for _, id := range set {
				if k := deviceIndex(v.state.Node(n), id); k >= 0 && free[k] == 1000 {
					c++
				}
			}
			if f.All {
				if c == len(set) {
					total++
				}
			} else {
				total += c / count
			}
		}
	}
	return total
}

// draNeed is what a pod's unallocated claims ask of the engine.
type draNeed struct {
	gpus   int
	scope  workload.DeviceScope
	filter *workload.DeviceFilter
	plans  []claimPlan
}

// constraintsOf returns the matchAttribute attributes that apply to a
// request result ("req" or "req/sub") and the device scope the topology
// ones give.
func constraintsOf(c *resourcev1.ResourceClaim, result string) (match []string, scope workload.DeviceScope, err error) {
	base, _, _ := strings.Cut(result, "/")
	for _, con := range c.Spec.Devices.Constraints {
		applies := len(con.Requests) == 0
		for _, r := range con.Requests {
			if r == base || r == result {
				applies = true
			}
		}
		if !applies {
			continue
		}
		if con.DistinctAttribute != nil {
			return nil, 0, fmt.Errorf("ResourceClaim %s: distinctAttribute constraints are not supported", c.Name)
		}
		if con.MatchAttribute == nil {
			continue
		}
		switch a := string(*con.MatchAttribute); a {
		case attrPCIeRoot:
			// Topology attributes are device coordinates: the engine keeps
			// the pod inside one group and still picks the best one.
			scope = max(scope, workload.ScopePCIe)
		case attrNUMANode:
			scope = max(scope, workload.ScopeNUMA)
		default:
			match = append(match, a)
		}
	}
	sort.Strings(match)
	return match, scope, nil
}

// claimDevices resolves a pod's unallocated claims into one device request
// for the engine. Each request becomes its first alternative that the free
// devices can serve now (firstAvailable), else its first alternative that
// any device matches at all. corral gives one pod one kind of device, so
// every request of the pod must select the same devices under the same
// constraints; their counts add up.
func (v *draView) claimDevices(podUID string, claims []*resourcev1.ResourceClaim) (draNeed, error) {
	var need draNeed
	for _, c := range claims {
		plan := claimPlan{claim: c}
		name := c.Name
		for _, r := range c.Spec.Devices.Requests {
			var alts []deviceRequest
			switch {
			case r.Exactly != nil:
				alts = []deviceRequest{exactRequest(r.Name, r.Exactly)}
			default:
				for i := range r.FirstAvailable {
					alts = append(alts, subRequest(r.Name, &r.FirstAvailable[i]))
				}
			}
			if len(alts) == 0 {
				return need, fmt.Errorf("ResourceClaim %s request %q names no devices", name, r.Name)
			}
			type option struct {
				req   deviceRequest
				res   filterResult
				scope workload.DeviceScope
			}
			var opts []option
			for _, alt := range alts {
				match, scope, err := constraintsOf(c, alt.result)
				if err != nil {
					return need, err
				}
				res := v.filterFor(name, alt, match)
				if res.err != nil {
					return need, res.err
				}
				opts = append(opts, option{alt, res, scope})
			}
			pick := -1
			if len(opts) == 1 {
				pick = 0 // no alternatives: nothing to weigh
			}
			for i, o := range opts {
				if pick >= 0 {
					break
				}
				key := fmt.Sprintf("%s\x02%d", o.res.filter.Key, o.req.count)
				if v.taken[key] < v.roomFor(key, o.res.filter, o.req.count) {
					pick = i
				}
			}
			if pick < 0 {
				for i, o := range opts {
					if len(o.res.filter.Groups) > 0 {
						pick = i
						break
					}
				}
			}
			if pick < 0 {
				pick = 0 // nothing matches anywhere: the engine says so
			}
			o := opts[pick]
			if len(opts) > 1 {
				v.taken[fmt.Sprintf("%s\x02%d", o.res.filter.Key, o.req.count)]++
			}
			count := o.req.count
			if o.req.all {
				count = max(o.res.minSet, 1)
			}
			switch {
			case need.filter == nil:
				need.filter, need.scope = o.res.filter, o.scope
			case need.filter.Key != o.res.filter.Key || need.scope != o.scope:
				return need, fmt.Errorf("ResourceClaim %s request %q selects other devices than the pod's other requests; corral allocates one kind of device per pod", name, o.req.result)
			case o.req.all || need.filter.All:
				return need, fmt.Errorf("ResourceClaim %s request %q: allocationMode All must be the pod's only device request", name, o.req.result)
			}
			need.gpus += count
			plan.parts = append(plan.parts, claimPart{result: o.req.result, count: count, all: o.req.all})
		}
		need.plans = append(need.plans, plan)
	}
	v.plans[podUID] = need.plans
	return need, nil
}
