package placement

import (
	"math/bits"
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// DeviceOrder says how a pod's GPUs are picked inside a node.
type DeviceOrder uint8

const (
	// Interconnect picks the set of GPUs with the shortest paths between them:
	// one NVLink group, then one socket, one NUMA node, one PCIe switch, and the
	// best fit at each step so that larger groups stay whole.
	Interconnect DeviceOrder = iota
	// FirstFree takes the lowest-numbered free GPUs, as a device plugin does
	// when nobody tells it better.
	FirstFree
)

// deviceKey is a device's place in the intra-node hierarchy, widest first.
func deviceKey(d *cluster.Device, level int) int {
	switch level {
	case 0:
		return d.NVLink
	case 1:
		return d.Socket
	case 2:
		return d.NUMA
	default:
		return d.PCIeSwitch
	}
}

const deviceLevels = 4

// scopeLevel maps a request's device scope to the deviceKey level, or -1.
func scopeLevel(sc workload.DeviceScope) int {
	switch sc {
	case workload.ScopeNVLink:
		return 0
	case workload.ScopeSocket:
		return 1
	case workload.ScopeNUMA:
		return 2
	case workload.ScopePCIe:
		return 3
	}
	return -1
}

// pickWhole chooses k wholly free GPUs of an accepted model on node n, or nil.
// All GPUs of one pod share a model; with a scope they share that group too.
func pickWhole(s *cluster.State, n int, k int, mask cluster.ModelMask, order DeviceOrder) []int {
	return pickScoped(s, n, k, mask, order, -1)
}

func pickScoped(s *cluster.State, n int, k int, mask cluster.ModelMask, order DeviceOrder, scope int) []int {
	node := s.Node(n)
	free := s.GPUFree(n)
	var best []int
	bestCost := [deviceLevels]int{}
	for m := range s.Models() {
		if !mask.Has(m) {
			continue
		}
		var cand []int
		for i := range node.Devices {
			if free[i] == 1000 && s.DeviceModel(n, i) == m {
				cand = append(cand, i)
			}
		}
		got := chooseIn(node, free, cand, k, order, scope)
		if got == nil {
			continue
		}
		cost := spans(node, got)
		if best == nil || lessCost(cost, bestCost) {
			best, bestCost = got, cost
		}
	}
	return best
}

// pickEligible chooses r's devices on node n from the device sets its filter
// allows: with allocation mode All the whole set, which must be free;
// otherwise r.GPUs of one set, by interconnect inside it. Among sets that
// serve equally well it takes the one with the fewest free devices, so that
// larger sets stay whole for later pods.
func pickEligible(s *cluster.State, n int, r *PodReq, order DeviceOrder) []int {
	if n >= len(r.eligible) {
		return nil
	}
	node := s.Node(n)
	free := s.GPUFree(n)
	var best []int
	bestCost, bestFree := [deviceLevels]int{}, 0
	for _, set := range r.eligible[n] {
		var cand []int
		for _, i := range set {
			if free[i] == 1000 && r.Mask.Has(s.DeviceModel(n, i)) {
				cand = append(cand, i)
			}
		}
		k := r.GPUs
		if r.Devices.All {
			if len(cand) < len(set) {
				continue // allocation mode All needs every device of the set
			}
			k = len(cand)
		}
		got := chooseIn(node, free, cand, k, order, scopeLevel(r.Scope))
		if got == nil {
			continue
		}
		cost := spans(node, got)
		if best == nil || lessCost(cost, bestCost) || (cost == bestCost && len(cand) < bestFree) {
			best, bestCost, bestFree = got, cost, len(cand)
		}
	}
	return best
}

// chooseIn picks k of the free devices cand (in index order): with a scope
// inside the fullest group of that level that holds k, then by interconnect.
func chooseIn(node *cluster.Node, free []int32, cand []int, k int, order DeviceOrder, scope int) []int {
	if len(cand) < k || k <= 0 {
		return nil
	}
	if scope >= 0 {
		// Only one group at the scope level may serve: take the fullest
		// that holds k, then choose inside it as usual.
		var bestGroup []int
		for _, g := range groupBy(node, cand, scope) {
			if len(g) >= k && (bestGroup == nil || len(g) < len(bestGroup)) {
				bestGroup = g
			}
		}
		if bestGroup == nil {
			return nil
		}
		cand = bestGroup
	}
	switch {
	case order == FirstFree:
		return append([]int(nil), cand[:k]...)
	case len(node.Devices) <= 64 && combinations(len(cand), k) <= exhaustiveLimit:
		return pickExhaustive(node, free, cand, k)
	default:
		return pickNested(node, cand, 0, k, nil)
	}
}

// pickNested picks k of the devices cand (sorted by index) level by level.
func pickNested(node *cluster.Node, cand []int, level, k int, out []int) []int {
	if k == 0 {
		return out
	}
	if level == deviceLevels {
		return append(out, cand[:k]...)
	}
	groups := groupBy(node, cand, level)
	// One group holds them all: take the fullest one that does (best fit).
	bestG := -1
	for i, g := range groups {
		if len(g) >= k && (bestG < 0 || len(g) < len(groups[bestG])) {
			bestG = i
		}
	}
	if bestG >= 0 {
		return pickNested(node, groups[bestG], level+1, k, out)
	}
	// Otherwise span as few groups as possible: whole groups, largest first,
	// then the best-fitting group for the rest.
	sort.SliceStable(groups, func(i, j int) bool { return len(groups[i]) > len(groups[j]) })
	rest := k
	for i, g := range groups {
		if rest == 0 {
			break
		}
		// Would one of the remaining groups hold the rest on its own?
		fit := -1
		for j := i; j < len(groups); j++ {
			if len(groups[j]) >= rest && (fit < 0 || len(groups[j]) < len(groups[fit])) {
				fit = j
			}
		}
		if fit >= 0 {
			return pickNested(node, groups[fit], level+1, rest, out)
		}
		out = append(out, g...)
		rest -= len(g)
	}
	return out
}

func groupBy(node *cluster.Node, cand []int, level int) [][]int {
	var keys []int
	byKey := map[int][]int{}
	for _, i := range cand {
		k := deviceKey(&node.Devices[i], level)
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	sort.Ints(keys)
	groups := make([][]int, len(keys))
	for i, k := range keys {
		groups[i] = byKey[k]
	}
	return groups
}

// spans counts the distinct groups a device set touches at each level.
// Coordinates are within -1..cluster.MaxCoordinate, so a word holds a set.
func spans(node *cluster.Node, devs []int) [deviceLevels]int {
	var seen [deviceLevels]uint64
	for _, i := range devs {
		for lv := 0; lv < deviceLevels; lv++ {
			seen[lv] |= 1 << uint(deviceKey(&node.Devices[i], lv)+1)
		}
	}
	var out [deviceLevels]int
	for lv := range seen {
		out[lv] = bits.OnesCount64(seen[lv])
	}
	return out
}

func lessCost(a, b [deviceLevels]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// Spans reports, for a device set of a node, how many NVLink groups, sockets,
// NUMA nodes and PCIe switches it touches. Metrics use it.
func Spans(node *cluster.Node, devs []int) (nvlink, socket, numa, pcie int) {
	s := spans(node, devs)
	return s[0], s[1], s[2], s[3]
}

// NICs returns the NICs on the PCIe switches of the chosen devices, in order.
func NICs(node *cluster.Node, devs []int) []string {
	var out []string
	seen := map[string]bool{}
	for _, i := range devs {
		nic := node.Devices[i].NIC
		if nic != "" && !seen[nic] {
			seen[nic] = true
			out = append(out, nic)
		}
	}
	return out
}

// exhaustiveLimit bounds the device sets pickExhaustive compares; an 8-GPU
// node never needs more than 70.
const exhaustiveLimit = 5000

func combinations(n, k int) int {
	if k < 0 || k > n {
		return 0
	}
	c := 1
	for i := 1; i <= k; i++ {
		c = c * (n - k + i) / i
		if c > exhaustiveLimit {
			return c
		}
	}
	return c
}

// setCost ranks a device set: fewest NVLink groups, then PCIe switches, NUMA
// nodes and sockets spanned; then the set that leaves the fewest free GPUs
// stranded in the switches and NUMA nodes it breaks into, so whole groups
// stay whole for later pods.
type setCost [6]int

func costOf(node *cluster.Node, free []int32, set []int) setCost {
	var c setCost
	sp := spans(node, set)
	c[0], c[1], c[2], c[3] = sp[0], sp[3], sp[2], sp[1]
	var in, pcie, numa uint64
	for _, i := range set {
		in |= 1 << uint(i)
		pcie |= 1 << uint(node.Devices[i].PCIeSwitch+1)
		numa |= 1 << uint(node.Devices[i].NUMA+1)
	}
	for i, d := range node.Devices {
		if in&(1<<uint(i)) != 0 || free[i] != 1000 {
			continue
		}
		if pcie&(1<<uint(d.PCIeSwitch+1)) != 0 {
			c[4]++
		}
		if numa&(1<<uint(d.NUMA+1)) != 0 {
			c[5]++
		}
	}
	return c
}

// pickExhaustive compares every k-subset of cand and returns the cheapest,
// the first in index order among equals.
func pickExhaustive(node *cluster.Node, free []int32, cand []int, k int) []int {
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	set := make([]int, k)
	var best []int
	var bestCost setCost
	for {
		for i, j := range idx {
			set[i] = cand[j]
		}
		c := costOf(node, free, set)
		if best == nil || lessSet(c, bestCost) {
			best, bestCost = append(best[:0], set...), c
		}
		// Next combination in lexicographic order.
		i := k - 1
		for i >= 0 && idx[i] == len(cand)-k+i {
			i--
		}
		if i < 0 {
			return best
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}

func lessSet(a, b setCost) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}
