package cluster

// Read-only accessors. Slices returned alias the State: callers must not
// change them.

// Levels returns the level names from "cluster" to "host".
func (s *State) Levels() []string { return s.levelNames }

// HostLevel is the index of the host level.
func (s *State) HostLevel() int { return len(s.levelNames) - 1 }

// LevelIndex returns the index of a level name, or -1.
func (s *State) LevelIndex(name string) int {
	for i, n := range s.levelNames {
		if n == name {
			return i
		}
	}
	return -1
}

// Topology returns the inter-node levels the State was built with.
func (s *State) Topology() Topology { return s.topo }

// DomainsAt lists the domains of a level in topology order.
func (s *State) DomainsAt(level int) []DomainID { return s.byLevel[level] }

// Domain returns a domain by id.
func (s *State) Domain(d DomainID) *Domain { return &s.domains[d] }

// NumDomains is the number of domains at all levels.
func (s *State) NumDomains() int { return len(s.domains) }

// NodeDomain returns node n's domain at a level.
func (s *State) NodeDomain(n, level int) DomainID {
	return s.chain[n*len(s.levelNames)+level]
}

// NumNodes is the number of nodes.
func (s *State) NumNodes() int { return len(s.nodes) }

// Node returns node n (in topology order).
func (s *State) Node(n int) *Node { return &s.nodes[n] }

// NodeIndex finds a node by name.
func (s *State) NodeIndex(name string) (int, bool) {
	i, ok := s.nodeIndex[name]
	return i, ok
}

// Models lists the GPU models in the cluster, sorted.
func (s *State) Models() []string { return s.models }

// Mask turns model names into a mask; an empty list accepts every model.
// Names the cluster does not have are returned separately.
func (s *State) Mask(models []string) (mask ModelMask, unknown []string) {
	if len(models) == 0 {
		return AllModels, nil
	}
	for _, m := range models {
		if i, ok := s.modelIndex[m]; ok {
			mask |= 1 << uint(i)
		} else {
			unknown = append(unknown, m)
		}
	}
	return mask, unknown
}

// DeviceModel returns the model index of device k of node n.
func (s *State) DeviceModel(n, k int) int { return s.devModel[s.gpuOff[n]+k] }

// FreeCPU is node n's free CPU in milli-cores.
func (s *State) FreeCPU(n int) int64 { return s.freeCPU[n] }

// FreeMem is node n's free memory in MiB.
func (s *State) FreeMem(n int) int64 { return s.freeMem[n] }

// GPUFree returns node n's free GPU-milli per device (0 for failed devices).
func (s *State) GPUFree(n int) []int32 { return s.gpuFree[s.gpuOff[n]:s.gpuOff[n+1]] }

// DeviceHealthy reports whether device k of node n works.
func (s *State) DeviceHealthy(n, k int) bool { return !s.unhealth[s.gpuOff[n]+k] }

// Schedulable reports whether new pods may land on node n.
func (s *State) Schedulable(n int) bool { return !s.unsched[n] }

// hostNode returns the node of a host domain, or -1 for a wider domain.
func (s *State) hostNode(d DomainID) int {
	if int(d) < s.firstHost {
		return -1
	}
	return s.domains[d].Lo
}

// DomainFreeCPU is the free CPU of a domain's schedulable nodes.
func (s *State) DomainFreeCPU(d DomainID) int64 {
	if n := s.hostNode(d); n >= 0 {
		if s.unsched[n] {
			return 0
		}
		return s.freeCPU[n]
	}
	return s.aggCPU[d]
}

// DomainFreeMem is the free memory of a domain's schedulable nodes.
func (s *State) DomainFreeMem(d DomainID) int64 {
	if n := s.hostNode(d); n >= 0 {
		if s.unsched[n] {
			return 0
		}
		return s.freeMem[n]
	}
	return s.aggMem[d]
}

// nodeGPUs sums node n's devices of the models in mask: free milli, wholly
// free devices and healthy devices.
func (s *State) nodeGPUs(n int, mask ModelMask) (milli int64, whole, healthy int) {
	if s.unsched[n] {
		return 0, 0, 0
	}
	for k := s.gpuOff[n]; k < s.gpuOff[n+1]; k++ {
		if !mask.Has(s.devModel[k]) {
			continue
		}
		milli += int64(s.gpuFree[k])
		if s.gpuFree[k] == 1000 {
			whole++
		}
		if !s.unhealth[k] {
			healthy++
		}
	}
	return milli, whole, healthy
}

// DomainFreeMilli is the free GPU-milli of the models in mask.
func (s *State) DomainFreeMilli(d DomainID, mask ModelMask) int64 {
	if n := s.hostNode(d); n >= 0 {
		m, _, _ := s.nodeGPUs(n, mask)
		return m
	}
	nm := len(s.models)
	var t int64
	for m := 0; m < nm; m++ {
		if mask.Has(m) {
			t += s.aggMilli[int(d)*nm+m]
		}
	}
	return t
}

// DomainFreeGPUs is the number of wholly free GPUs of the models in mask.
func (s *State) DomainFreeGPUs(d DomainID, mask ModelMask) int {
	if n := s.hostNode(d); n >= 0 {
		_, w, _ := s.nodeGPUs(n, mask)
		return w
	}
	nm := len(s.models)
	t := 0
	for m := 0; m < nm; m++ {
		if mask.Has(m) {
			t += int(s.aggWhole[int(d)*nm+m])
		}
	}
	return t
}

// DomainCapacityGPUs is the number of healthy GPUs of the models in mask.
func (s *State) DomainCapacityGPUs(d DomainID, mask ModelMask) int {
	if n := s.hostNode(d); n >= 0 {
		_, _, h := s.nodeGPUs(n, mask)
		return h
	}
	nm := len(s.models)
	t := 0
	for m := 0; m < nm; m++ {
		if mask.Has(m) {
			t += int(s.capWhole[int(d)*nm+m])
		}
	}
	return t
}

// FitCount bounds how many pods of k whole GPUs (all on one node, one model)
// the domain's free GPUs could hold, ignoring CPU and memory. k = 0 returns
// the number of schedulable nodes times a large factor's worth: callers size
// CPU-only pods by CPU instead.
func (s *State) FitCount(d DomainID, mask ModelMask, k int) int {
	if n := s.hostNode(d); n >= 0 {
		return s.nodeFit(n, mask, k, false)
	}
	return s.fitCount(s.aggHist, d, mask, k)
}

// nodeFit is FitCount for one node: pods of k GPUs of one model.
func (s *State) nodeFit(n int, mask ModelMask, k int, capacity bool) int {
	if k <= 0 {
		return 1 << 30
	}
	if s.unsched[n] {
		return 0
	}
	var per [maxModels]int
	for i := s.gpuOff[n]; i < s.gpuOff[n+1]; i++ {
		m := s.devModel[i]
		if mask.Has(m) && ((capacity && !s.unhealth[i]) || (!capacity && s.gpuFree[i] == 1000)) {
			per[m]++
		}
	}
	t := 0
	for _, c := range per {
		t += c / k
	}
	return t
}

// CapacityFitCount is FitCount on an empty cluster: whether the pods could
// ever fit.
func (s *State) CapacityFitCount(d DomainID, mask ModelMask, k int) int {
	if n := s.hostNode(d); n >= 0 {
		return s.nodeFit(n, mask, k, true)
	}
	return s.fitCount(s.capHist, d, mask, k)
}

func (s *State) fitCount(hist []int32, d DomainID, mask ModelMask, k int) int {
	if k <= 0 {
		return 1 << 30
	}
	nm := len(s.models)
	t := 0
	for m := 0; m < nm; m++ {
		if !mask.Has(m) {
			continue
		}
		base := (int(d)*nm + m) * s.hist
		for f := k; f < s.hist; f++ {
			t += int(hist[base+f]) * (f / k)
		}
	}
	return t
}

// NodeModels returns the mask of models present on node n.
func (s *State) NodeModels(n int) ModelMask { return s.nodeModels[n] }

// CapacityMilli is the healthy GPU-milli of the whole cluster.
func (s *State) CapacityMilli() int64 {
	return int64(s.DomainCapacityGPUs(0, AllModels)) * 1000
}

// FreeMilli is the free GPU-milli of the whole cluster.
func (s *State) FreeMilli() int64 { return s.DomainFreeMilli(0, AllModels) }

// MostFreeOnANode is the most wholly free GPUs of one model in mask that a
// single node of domain d has.
func (s *State) MostFreeOnANode(d DomainID, mask ModelMask) int {
	if n := s.hostNode(d); n >= 0 {
		var per [maxModels]int
		best := 0
		if s.unsched[n] {
			return 0
		}
		for i := s.gpuOff[n]; i < s.gpuOff[n+1]; i++ {
			if m := s.devModel[i]; mask.Has(m) && s.gpuFree[i] == 1000 {
				per[m]++
				best = max(best, per[m])
			}
		}
		return best
	}
	nm := len(s.models)
	best := 0
	for m := 0; m < nm; m++ {
		if !mask.Has(m) {
			continue
		}
		base := (int(d)*nm + m) * s.hist
		for f := s.hist - 1; f > best; f-- {
			if s.aggHist[base+f] > 0 {
				best = f
				break
			}
		}
	}
	return best
}
