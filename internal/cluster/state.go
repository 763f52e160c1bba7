package cluster

import (
	"fmt"
	"math/bits"
	"sort"

	"github.com/corral-dev/corral/internal/mig"
)

// DomainID indexes a topology domain of a State.
type DomainID int32

// Domain is one node of the topology tree. Nodes are stored in topology order,
// so every domain's nodes are the contiguous index range [Lo, Hi).
type Domain struct {
	Level    int // 0 is the whole cluster; the last level is the host
	Name     string
	Parent   DomainID // -1 for the cluster domain
	Children []DomainID
	Lo, Hi   int
}

// DeviceShare is the GPU-milli a pod takes from one device of its node.
type DeviceShare struct {
	Device int // index into Node.Devices
	Milli  int32
	// MIG is the instance taken on a MIG GPU (zero for none). The device's
	// free milli then follows the compute slices of its instances in use,
	// and Milli only reports this instance's share.
	MIG MIGRef
}

// MIGRef names a MIG instance of one device without pointers, so that
// allocations stay cheap to copy and to scan: Profile is 1 + the index of
// the profile in the device's geometry (0: no instance), Start its start.
// State.MIGRef and State.MIGInstance convert.
type MIGRef struct {
	Profile uint8
	Start   uint8
}

// IsSet reports whether the share is a MIG instance.
func (r MIGRef) IsSet() bool { return r.Profile != 0 }

// Alloc is what one pod holds on one node.
type Alloc struct {
	CPUMilli int64
	MemMiB   int64
	Devices  []DeviceShare
}

// GPUMilli is the GPU-milli held by the allocation.
func (a Alloc) GPUMilli() int64 {
	var t int64
	for _, d := range a.Devices {
		t += int64(d.Milli)
	}
	return t
}

// ModelMask is a set of GPU models as bits over State.Models().
type ModelMask uint64

// AllModels accepts every model.
const AllModels ModelMask = ^ModelMask(0)

// Has reports whether model index m is in the mask.
func (m ModelMask) Has(i int) bool { return m&(1<<uint(i)) != 0 }

// Count is the number of models in the mask.
func (m ModelMask) Count() int { return bits.OnesCount64(uint64(m)) }

const maxModels = 64

// layout is the part of a State that never changes after construction: it is
// shared by every clone, so a cycle's working copy costs only the free-capacity
// arrays.
type layout struct {
	topo       Topology
	levelNames []string
	nodes      []Node
	nodeIndex  map[string]int
	models     []string
	modelIndex map[string]int
	hist       int // histogram buckets per model: 0..max devices of one model on a node
	domains    []Domain
	byLevel    [][]DomainID
	chain      []DomainID // node*levels+level -> the node's domain at that level
	gpuOff     []int      // node -> first device in the flat device arrays
	firstHost  int        // domains from here on are hosts: no aggregates
	nodeModels []ModelMask
	devModel   []int // flat device -> model index
	// MIG: geometry of each model (nil for non-MIG models); hasMIG gates
	// the per-device MIG arrays of State so clusters without MIG pay nothing.
	modelGeom []*mig.Model
	migMask   ModelMask
	hasMIG    bool
	// nodeSets memoises the node sets of constrained requests (nodeset.go).
	nodeSets nodeSetMemo
}

// State is the cluster with its free capacity, aggregated per domain. The
// drivers own one and change it between cycles; a cycle works on a Clone.
type State struct {
	*layout
	freeCPU  []int64
	freeMem  []int64
	gpuFree  []int32 // flat device -> free milli (0 when unhealthy)
	unhealth []bool  // flat device -> failed
	unsched  []bool  // node -> cordoned / not ready

	aggCPU   []int64 // domain -> free CPU on schedulable nodes
	aggMem   []int64
	aggMilli []int64 // domain*models+model -> free GPU-milli
	aggWhole []int32 // domain*models+model -> wholly free GPUs
	aggHist  []int32 // (domain*models+model)*hist+f -> nodes with f wholly free GPUs of the model
	capWhole []int32 // domain*models+model -> healthy GPUs, free or not
	capHist  []int32 // like aggHist for an empty cluster

	// Per flat device, only when the cluster has MIG GPUs: the current
	// layout, which of its instances are in use (bit i: layout[i]), and
	// whether a re-partition is waiting for the node.
	migLayout []mig.Layout
	// layoutsOwned says migLayout is this State's alone. Clones share it
	// (it is the one per-device array holding pointers, so copying it would
	// make every cycle's clone cost a GC scan); whichever side re-partitions
	// first copies it.
	layoutsOwned bool
	migUsed      []uint8
	migPending   []bool
	// migFree counts free instances per profile: flat device*7 + the
	// profile's index in the device's geometry. It answers "how many free
	// 1g.10gb in this rack" without comparing profile names.
	migFree []uint8
}

// New builds a State from nodes and a topology. Nodes missing a topology label
// are put in a domain named "<none>" at that level.
func New(topo Topology, nodes []Node) (*State, error) {
	if err := topo.Validate(); err != nil {
		return nil, err
	}
	l := &layout{topo: topo, nodeIndex: map[string]int{}, modelIndex: map[string]int{}}
	l.levelNames = append(l.levelNames, LevelCluster)
	for _, lv := range topo.Levels {
		l.levelNames = append(l.levelNames, lv.Name)
	}
	l.levelNames = append(l.levelNames, LevelHost)

	l.nodes = make([]Node, len(nodes))
	copy(l.nodes, nodes)
	path := func(n *Node, level int) string {
		v, ok := n.Labels[topo.Levels[level].Label]
		if !ok || v == "" {
			return "<none>"
		}
		return v
	}
	sort.SliceStable(l.nodes, func(i, j int) bool {
		a, b := &l.nodes[i], &l.nodes[j]
		for lv := range topo.Levels {
			if pa, pb := path(a, lv), path(b, lv); pa != pb {
				return pa < pb
			}
		}
		return a.Name < b.Name
	})
	modelSet := map[string]bool{}
	maxPerModel := 0
	for i := range l.nodes {
		n := &l.nodes[i]
		if err := n.Validate(); err != nil {
			return nil, err
		}
		if _, dup := l.nodeIndex[n.Name]; dup {
			return nil, fmt.Errorf("duplicate node name %q", n.Name)
		}
		l.nodeIndex[n.Name] = i
		perModel := map[string]int{}
		for _, d := range n.Devices {
			key := d.ModelKey()
			modelSet[key] = true
			perModel[key]++
			if perModel[key] > maxPerModel {
				maxPerModel = perModel[key]
			}
		}
	}
	for m := range modelSet {
		l.models = append(l.models, m)
	}
	sort.Strings(l.models)
	if len(l.models) > maxModels {
		return nil, fmt.Errorf("%d GPU models; corral supports at most %d", len(l.models), maxModels)
	}
	for i, m := range l.models {
		l.modelIndex[m] = i
	}
	if err := l.indexMIG(); err != nil {
		return nil, err
	}
	l.hist = maxPerModel + 1

	// Domains, level by level; consecutive nodes with the same path prefix
	// share a domain because nodes are sorted by path.
	levels := len(l.levelNames)
	l.byLevel = make([][]DomainID, levels)
	l.chain = make([]DomainID, len(l.nodes)*levels)
	l.domains = append(l.domains, Domain{Level: 0, Name: LevelCluster, Parent: -1, Lo: 0, Hi: len(l.nodes)})
	l.byLevel[0] = []DomainID{0}
	for n := range l.nodes {
		l.chain[n*levels] = 0
	}
	for lv := 1; lv < levels; lv++ {
		for _, parent := range l.byLevel[lv-1] {
			p := l.domains[parent]
			for lo := p.Lo; lo < p.Hi; {
				hi := lo + 1
				name := l.nodes[lo].Name
				if lv < levels-1 {
					name = path(&l.nodes[lo], lv-1)
					for hi < p.Hi && path(&l.nodes[hi], lv-1) == name {
						hi++
					}
				}
				id := DomainID(len(l.domains))
				l.domains = append(l.domains, Domain{Level: lv, Name: name, Parent: parent, Lo: lo, Hi: hi})
				l.domains[parent].Children = append(l.domains[parent].Children, id)
				l.byLevel[lv] = append(l.byLevel[lv], id)
				for n := lo; n < hi; n++ {
					l.chain[n*levels+lv] = id
				}
				lo = hi
			}
		}
	}

	l.gpuOff = make([]int, len(l.nodes)+1)
	for i := range l.nodes {
		l.gpuOff[i+1] = l.gpuOff[i] + len(l.nodes[i].Devices)
		var mask ModelMask
		for _, d := range l.nodes[i].Devices {
			l.devModel = append(l.devModel, l.modelIndex[d.ModelKey()])
			mask |= 1 << uint(l.modelIndex[d.ModelKey()])
		}
		l.nodeModels = append(l.nodeModels, mask)
	}

	s := &State{layout: l}
	s.freeCPU = make([]int64, len(l.nodes))
	s.freeMem = make([]int64, len(l.nodes))
	s.gpuFree = make([]int32, len(l.devModel))
	s.unhealth = make([]bool, len(l.devModel))
	s.unsched = make([]bool, len(l.nodes))
	// Host domains are the tail of l.domains; their figures come straight
	// from the node, so only the domains above them carry aggregates.
	l.firstHost = len(l.domains) - len(l.byLevel[levels-1])
	nd, nm := l.firstHost, len(l.models)
	s.aggCPU = make([]int64, nd)
	s.aggMem = make([]int64, nd)
	s.aggMilli = make([]int64, nd*nm)
	s.aggWhole = make([]int32, nd*nm)
	s.aggHist = make([]int32, nd*nm*l.hist)
	s.capWhole = make([]int32, nd*nm)
	s.capHist = make([]int32, nd*nm*l.hist)
	s.initMIG()
	for i := range l.nodes {
		n := &l.nodes[i]
		s.freeCPU[i], s.freeMem[i] = n.CPUMilli, n.MemMiB
		s.unsched[i] = n.Unschedulable
		for k, d := range n.Devices {
			s.unhealth[l.gpuOff[i]+k] = d.Unhealthy
			if !d.Unhealthy {
				s.gpuFree[l.gpuOff[i]+k] = 1000
			}
		}
		s.contribute(i, +1)
	}
	s.recountCapacity()
	return s, nil
}

// Clone returns an independent copy of the free capacity sharing the layout.
func (s *State) Clone() *State {
	c := &State{layout: s.layout}
	c.freeCPU = append([]int64(nil), s.freeCPU...)
	c.freeMem = append([]int64(nil), s.freeMem...)
	c.gpuFree = append([]int32(nil), s.gpuFree...)
	c.unhealth = append([]bool(nil), s.unhealth...)
	c.unsched = append([]bool(nil), s.unsched...)
	c.aggCPU = append([]int64(nil), s.aggCPU...)
	c.aggMem = append([]int64(nil), s.aggMem...)
	c.aggMilli = append([]int64(nil), s.aggMilli...)
	c.aggWhole = append([]int32(nil), s.aggWhole...)
	c.aggHist = append([]int32(nil), s.aggHist...)
	// Capacity aggregates change only with health, and recountCapacity
	// replaces them rather than writing in place, so clones share them.
	c.capWhole, c.capHist = s.capWhole, s.capHist
	if s.hasMIG {
		// Layouts are never changed in place (SetMIGLayout replaces them),
		// and the array itself is copied on the first re-partition of
		// either side.
		c.migLayout, s.layoutsOwned = s.migLayout, false
		c.migUsed = append([]uint8(nil), s.migUsed...)
		c.migPending = append([]bool(nil), s.migPending...)
		c.migFree = append([]uint8(nil), s.migFree...)
	}
	return c
}

// contribute adds (sign=+1) or removes (sign=-1) node n's free capacity from
// every domain above it.
func (s *State) contribute(n int, sign int) {
	if s.unsched[n] {
		return
	}
	levels := len(s.levelNames)
	nm := len(s.models)
	var milli [maxModels]int64
	var whole [maxModels]int32
	var present [maxModels]bool
	for k := s.gpuOff[n]; k < s.gpuOff[n+1]; k++ {
		m := s.devModel[k]
		present[m] = true
		milli[m] += int64(s.gpuFree[k])
		if s.gpuFree[k] == 1000 {
			whole[m]++
		}
	}
	for lv := 0; lv < levels-1; lv++ {
		d := int(s.chain[n*levels+lv])
		s.aggCPU[d] += int64(sign) * s.freeCPU[n]
		s.aggMem[d] += int64(sign) * s.freeMem[n]
		for m := 0; m < nm; m++ {
			if !present[m] {
				continue
			}
			i := d*nm + m
			s.aggMilli[i] += int64(sign) * milli[m]
			s.aggWhole[i] += int32(sign) * whole[m]
			s.aggHist[i*s.hist+int(whole[m])] += int32(sign)
		}
	}
}

// recountCapacity rebuilds the empty-cluster aggregates from device health.
func (s *State) recountCapacity() {
	s.capWhole = make([]int32, len(s.capWhole))
	s.capHist = make([]int32, len(s.capHist))
	levels := len(s.levelNames)
	nm := len(s.models)
	for n := range s.nodes {
		if s.unsched[n] {
			continue
		}
		var healthy [maxModels]int32
		var present [maxModels]bool
		for k := s.gpuOff[n]; k < s.gpuOff[n+1]; k++ {
			present[s.devModel[k]] = true
			if !s.unhealth[k] {
				healthy[s.devModel[k]]++
			}
		}
		for lv := 0; lv < levels-1; lv++ {
			d := int(s.chain[n*levels+lv])
			for m := 0; m < nm; m++ {
				if present[m] {
					s.capWhole[d*nm+m] += healthy[m]
					s.capHist[(d*nm+m)*s.hist+int(healthy[m])]++
				}
			}
		}
	}
}

// CanHost reports whether alloc fits on node n as it stands.
func (s *State) CanHost(n int, a Alloc) error {
	if s.unsched[n] {
		return fmt.Errorf("node %s is unschedulable", s.nodes[n].Name)
	}
	if a.CPUMilli > s.freeCPU[n] {
		return fmt.Errorf("node %s: %dm CPU free, %dm asked", s.nodes[n].Name, s.freeCPU[n], a.CPUMilli)
	}
	if a.MemMiB > s.freeMem[n] {
		return fmt.Errorf("node %s: %d MiB free, %d MiB asked", s.nodes[n].Name, s.freeMem[n], a.MemMiB)
	}
	nd := len(s.nodes[n].Devices)
	for i, d := range a.Devices {
		if d.Device < 0 || d.Device >= nd {
			return fmt.Errorf("node %s has no device %d", s.nodes[n].Name, d.Device)
		}
		for _, e := range a.Devices[:i] {
			if e.Device == d.Device {
				return fmt.Errorf("node %s: device %d listed twice", s.nodes[n].Name, d.Device)
			}
		}
		if err := s.canHostMIG(n, d); err != nil {
			return err
		}
		if d.MIG.IsSet() {
			continue
		}
		if d.Milli <= 0 || d.Milli > s.gpuFree[s.gpuOff[n]+d.Device] {
			return fmt.Errorf("node %s device %s: %dm free, %dm asked", s.nodes[n].Name,
				s.nodes[n].Devices[d.Device].ID, s.gpuFree[s.gpuOff[n]+d.Device], d.Milli)
		}
	}
	return nil
}

// Allocate takes alloc from node n, or returns why it cannot.
func (s *State) Allocate(n int, a Alloc) error {
	if err := s.CanHost(n, a); err != nil {
		return err
	}
	s.contribute(n, -1)
	s.freeCPU[n] -= a.CPUMilli
	s.freeMem[n] -= a.MemMiB
	for _, d := range a.Devices {
		if d.MIG.IsSet() {
			s.takeMIG(n, d, true)
			continue
		}
		s.gpuFree[s.gpuOff[n]+d.Device] -= d.Milli
	}
	s.contribute(n, +1)
	return nil
}

// Release returns alloc to node n. Capacity of a device that failed meanwhile
// stays out of the free pool.
func (s *State) Release(n int, a Alloc) {
	s.contribute(n, -1)
	s.freeCPU[n] += a.CPUMilli
	s.freeMem[n] += a.MemMiB
	for _, d := range a.Devices {
		if d.MIG.IsSet() {
			s.takeMIG(n, d, false)
			continue
		}
		k := s.gpuOff[n] + d.Device
		if !s.unhealth[k] {
			s.gpuFree[k] += d.Milli
		}
	}
	s.contribute(n, +1)
}

// SetDeviceHealth marks device k of node n failed or repaired. A failed
// device leaves the free capacity and the empty-cluster capacity at once, so
// nothing new lands on it. A repaired device comes back wholly free: the
// driver must have released every pod that held it (their releases while it
// was failed give nothing back). Drivers call it between cycles.
func (s *State) SetDeviceHealth(n, k int, healthy bool) {
	i := s.gpuOff[n] + k
	if s.unhealth[i] == !healthy {
		return
	}
	s.contribute(n, -1)
	s.unhealth[i] = !healthy
	s.gpuFree[i] = 0
	if healthy {
		s.gpuFree[i] = 1000
		if s.hasMIG {
			s.migUsed[i] = 0
			s.recountMIG(i)
		}
	}
	s.contribute(n, +1)
	s.recountCapacity()
}

// SetSchedulable cordons (false) or uncordons (true) node n.
func (s *State) SetSchedulable(n int, schedulable bool) {
	if s.unsched[n] == !schedulable {
		return
	}
	s.contribute(n, -1)
	s.unsched[n] = !schedulable
	s.contribute(n, +1)
	s.recountCapacity()
}
