package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"

	"github.com/corral-dev/corral/internal/workload"
)

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
