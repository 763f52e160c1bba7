package kube

import (
	"fmt"
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/corral-dev/corral/internal/workload"
)

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
