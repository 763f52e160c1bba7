package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/corral-dev/corral/internal/mig"
	"github.com/corral-dev/corral/internal/workload"
)

// MIG GPUs in the model.
//
// A MIG GPU is accounted under its own model ("A100 (MIG)"), so whole-GPU
// and fractional requests never see it and the per-model aggregates keep the
// two apart. Its free GPU-milli is 1000 minus the compute share of the
// instances in use (1g = 142, 7g = 1000): an idle MIG GPU counts as wholly
// free, for the MIG requests that may use it. Which instances exist (the
// layout) and which are in use are per-device state of the State, so that a
// cycle's running view can reserve instances and plan re-partitions without
// touching the driver's copy.

// indexMIG records the geometry of every MIG model. Devices sharing a model
// name but not a geometry cannot be told apart by requests, so that is an
// error.
func (l *layout) indexMIG() error {
	l.modelGeom = make([]*mig.Model, len(l.models))
	for i := range l.nodes {
		for _, d := range l.nodes[i].Devices {
			if d.MIG == "" {
				continue
			}
			geom, ok := mig.Lookup(d.MIG)
			if !ok {
				return fmt.Errorf("node %s: device %s: unknown MIG geometry %q", l.nodes[i].Name, d.ID, d.MIG)
			}
			m := l.modelIndex[d.ModelKey()]
			if g := l.modelGeom[m]; g != nil && g.Name != geom.Name {
				return fmt.Errorf("GPU model %q has MIG GPUs of two geometries (%s, %s): give them distinct model names",
					d.Model, g.Name, geom.Name)
			}
			l.modelGeom[m] = &geom
			l.migMask |= 1 << uint(m)
			l.hasMIG = true
		}
	}
	return nil
}

// initMIG fills the per-device MIG arrays from the nodes' layouts.
func (s *State) initMIG() {
	if !s.hasMIG {
		return
	}
	nd := len(s.devModel)
	s.migLayout, s.layoutsOwned = make([]mig.Layout, nd), true
	s.migUsed = make([]uint8, nd)
	s.migPending = make([]bool, nd)
	s.migFree = make([]uint8, nd*profilesPerGeometry)
	for i := range s.nodes {
		for k, d := range s.nodes[i].Devices {
			if d.MIG == "" {
				continue
			}
			f := s.gpuOff[i] + k
			s.migLayout[f] = d.MIGLayout
			if d.MIGPending {
				s.migLayout[f], s.migPending[f] = d.MIGWanted, true
			}
			s.recountMIG(f)
		}
	}
}

// profilesPerGeometry bounds the profiles of one MIG geometry (the tables
// of internal/mig have 7).
const profilesPerGeometry = 7

// recountMIG refreshes flat device f's free instances per profile.
func (s *State) recountMIG(f int) {
	counts := s.migFree[f*profilesPerGeometry : (f+1)*profilesPerGeometry]
	clear(counts)
	geom := s.modelGeom[s.devModel[f]]
	if geom == nil {
		return
	}
	for i, in := range s.migLayout[f] {
		if s.migUsed[f]&(1<<uint(i)) != 0 {
			continue
		}
		for p := range geom.Profiles[:min(len(geom.Profiles), profilesPerGeometry)] {
			if geom.Profiles[p].Name == in.Profile {
				counts[p]++
				break
			}
		}
	}
}

// MIGGeometry returns the MIG geometry of a model index, or nil.
func (s *State) MIGGeometry(model int) *mig.Model {
	if model < 0 || model >= len(s.modelGeom) {
		return nil
	}
	return s.modelGeom[model]
}

// HasMIG reports whether any GPU of the cluster runs in MIG mode.
func (s *State) HasMIG() bool { return s.hasMIG }

// MIGMask is the set of MIG models.
func (s *State) MIGMask() ModelMask { return s.migMask }

// MIGLayout is the layout of device k of node n: the one it has now, or
// the one a planned re-partition gives it (see MIGPending). Nil for non-MIG
// GPUs. Callers must not change it.
func (s *State) MIGLayout(n, k int) mig.Layout {
	if !s.hasMIG {
		return nil
	}
	return s.migLayout[s.gpuOff[n]+k]
}

// MIGUsed is the set of instances of MIGLayout(n, k) in use (bit i: the
// layout's i-th instance).
func (s *State) MIGUsed(n, k int) uint8 {
	if !s.hasMIG {
		return 0
	}
	return s.migUsed[s.gpuOff[n]+k]
}

// MIGPending reports whether device k of node n waits for a re-partition:
// its layout is planned, not there yet, so nothing may be bound to it.
func (s *State) MIGPending(n, k int) bool {
	return s.hasMIG && s.migPending[s.gpuOff[n]+k]
}

// MIGFreeInstance is the index in MIGLayout(n, k) of the free instance of
// profile with the lowest start, or -1. Instances of one profile on one GPU
// are interchangeable while it stays partitioned.
func (s *State) MIGFreeInstance(n, k int, profile string) int {
	if !s.hasMIG {
		return -1
	}
	f := s.gpuOff[n] + k
	best := -1
	for i, in := range s.migLayout[f] {
		if in.Profile == profile && s.migUsed[f]&(1<<uint(i)) == 0 &&
			(best < 0 || in.Start < s.migLayout[f][best].Start) {
			best = i
		}
	}
	return best
}

// SetMIGLayout re-partitions device k of node n into l. Only an idle GPU (no
// instance in use) may be re-partitioned: moving an instance ends its
// workload. pending marks a layout asked of the node and not yet there.
func (s *State) SetMIGLayout(n, k int, l mig.Layout, pending bool) error {
	node := &s.nodes[n]
	if k < 0 || k >= len(node.Devices) || node.Devices[k].MIG == "" {
		return fmt.Errorf("node %s: device %d is not a MIG GPU", node.Name, k)
	}
	f := s.gpuOff[n] + k
	if s.migUsed[f] != 0 {
		return fmt.Errorf("node %s device %s: MIG instances in use; only an idle GPU is re-partitioned",
			node.Name, node.Devices[k].ID)
	}
	geom := s.modelGeom[s.devModel[f]]
	if err := geom.Validate(l); err != nil {
		return fmt.Errorf("node %s device %s: %w", node.Name, node.Devices[k].ID, err)
	}
	if !s.layoutsOwned {
		s.migLayout, s.layoutsOwned = slices.Clone(s.migLayout), true
	}
	s.migLayout[f] = slices.Clone(l)
	s.migPending[f] = pending
	s.recountMIG(f)
	return nil
}

// MIGRef names instance in of device k of node n compactly; ok is false
// when the device is not a MIG GPU or its geometry lacks the profile.
func (s *State) MIGRef(n, k int, in mig.Instance) (MIGRef, bool) {
	if !s.hasMIG || in.Start < 0 || in.Start >= mig.MemorySlices {
		return MIGRef{}, false
	}
	geom := s.modelGeom[s.devModel[s.gpuOff[n]+k]]
	if geom == nil {
		return MIGRef{}, false
	}
	for i := range geom.Profiles {
		if geom.Profiles[i].Name == in.Profile {
			return MIGRef{Profile: uint8(i + 1), Start: uint8(in.Start)}, true
		}
	}
	return MIGRef{}, false
}

// MIGInstance is the instance a MIGRef of device k of node n names.
func (s *State) MIGInstance(n, k int, r MIGRef) mig.Instance {
	if !r.IsSet() || !s.hasMIG {
		return mig.Instance{}
	}
	geom := s.modelGeom[s.devModel[s.gpuOff[n]+k]]
	if geom == nil || int(r.Profile) > len(geom.Profiles) {
		return mig.Instance{}
	}
	return mig.Instance{Profile: geom.Profiles[r.Profile-1].Name, Start: int(r.Start)}
}

// canHostMIG checks one device share against MIG: a MIG instance only on a
// healthy MIG GPU, on a free instance of its layout; nothing else on a MIG
// GPU.
func (s *State) canHostMIG(n int, d DeviceShare) error {
	node := &s.nodes[n]
	dev := &node.Devices[d.Device]
	if !d.MIG.IsSet() {
		if dev.MIG != "" {
			return fmt.Errorf("node %s device %s runs MIG: only MIG instances can be taken from it", node.Name, dev.ID)
		}
		return nil
	}
	if dev.MIG == "" {
		return fmt.Errorf("node %s device %s does not run MIG: no MIG instance can be taken from it", node.Name, dev.ID)
	}
	f := s.gpuOff[n] + d.Device
	if s.unhealth[f] {
		return fmt.Errorf("node %s device %s has failed", node.Name, dev.ID)
	}
	in := s.MIGInstance(n, d.Device, d.MIG)
	i := slices.Index(s.migLayout[f], in)
	if i < 0 {
		return fmt.Errorf("node %s device %s has no MIG instance %s (layout %s)", node.Name, dev.ID, in, s.migLayout[f])
	}
	if s.migUsed[f]&(1<<uint(i)) != 0 {
		return fmt.Errorf("node %s device %s: MIG instance %s is in use", node.Name, dev.ID, in)
	}
	return nil
}

// takeMIG marks d's instance used (take) or free, and derives the device's
// free milli from the compute slices of the instances in use.
func (s *State) takeMIG(n int, d DeviceShare, take bool) {
	f := s.gpuOff[n] + d.Device
	i := slices.Index(s.migLayout[f], s.MIGInstance(n, d.Device, d.MIG))
	if i < 0 {
		return
	}
	if take {
		s.migUsed[f] |= 1 << uint(i)
	} else {
		s.migUsed[f] &^= 1 << uint(i)
	}
	s.recountMIG(f)
	if s.unhealth[f] {
		return
	}
	used := 0
	for j, in := range s.migLayout[f] {
		if s.migUsed[f]&(1<<uint(j)) != 0 {
			used += workload.MIGCompute(in.Profile)
		}
	}
	s.gpuFree[f] = 1000 - workload.MIGMilli(min(used, 7))
}

// MIGProfiles lists, sorted, the MIG profiles some GPU of the models in mask
// supports.
func (s *State) MIGProfiles(mask ModelMask) []string {
	seen := map[string]bool{}
	for i, g := range s.modelGeom {
		if g == nil || !mask.Has(i) {
			continue
		}
		for _, p := range g.Profiles {
			seen[p.Name] = true
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.SortFunc(out, compareProfiles)
	return out
}

// compareProfiles orders profile names by compute slices, then by name, so
// that "1g.10gb" comes before "2g.20gb" and "7g.80gb".
func compareProfiles(a, b string) int {
	if ca, cb := workload.MIGCompute(a), workload.MIGCompute(b); ca != cb {
		return ca - cb
	}
	return strings.Compare(a, b)
}

// DomainFreeMIG counts the free instances of profile that can be bound now
// (healthy GPUs of the models in mask on schedulable nodes, no re-partition
// pending) in domain d.
func (s *State) DomainFreeMIG(d DomainID, mask ModelMask, profile string) int {
	if !s.hasMIG {
		return 0
	}
	// The profile's index in each model's geometry, looked up once.
	var idx [maxModels]int8
	for m, g := range s.modelGeom {
		idx[m] = -1
		if g != nil && mask.Has(m) {
			for p := range g.Profiles[:min(len(g.Profiles), profilesPerGeometry)] {
				if g.Profiles[p].Name == profile {
					idx[m] = int8(p)
				}
			}
		}
	}
	dom := &s.domains[d]
	t := 0
	for n := dom.Lo; n < dom.Hi; n++ {
		if s.unsched[n] || s.nodeModels[n]&mask == 0 {
			continue
		}
		for f := s.gpuOff[n]; f < s.gpuOff[n+1]; f++ {
			if p := idx[s.devModel[f]]; p >= 0 && !s.unhealth[f] && !s.migPending[f] {
				t += int(s.migFree[f*profilesPerGeometry+int(p)])
			}
		}
	}
	return t
}
