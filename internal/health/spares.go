package health

import (
	"fmt"
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
)

// SpareKey names one spare: its domain, and the queue whose replacements
// it is for ("" for any job's).
type SpareKey struct {
	Domain cluster.DomainID
	Queue  string
}

// hold is spare capacity taken out of the cycle's view on one node.
type hold struct {
	key   SpareKey
	node  int
	alloc cluster.Alloc
}

// Holds is the spare capacity a cycle keeps from ordinary placement. It is
// recomputed every cycle from what is free, so a spare used by a
// replacement is held again elsewhere in its domain as soon as room frees.
type Holds struct {
	want  map[SpareKey]int // GPUs to hold
	holds []hold
}

// ExpandSpares resolves spares to domains and the GPUs held in each, in
// domain order. A spare naming an unknown level or domain is a problem, not
// a panic.
func ExpandSpares(s *cluster.State, spares []Spare) (map[SpareKey]int, []string) {
	want := map[SpareKey]int{}
	var problems []string
	for _, sp := range spares {
		lv := s.LevelIndex(sp.Level)
		if lv < 0 {
			problems = append(problems, fmt.Sprintf("spare: unknown topology level %q", sp.Level))
			continue
		}
		if sp.GPUs <= 0 {
			problems = append(problems, fmt.Sprintf("spare at %s %q: %d GPUs", sp.Level, sp.Domain, sp.GPUs))
			continue
		}
		found := false
		for _, d := range s.DomainsAt(lv) {
			if sp.Domain == "" || s.Domain(d).Name == sp.Domain {
				want[SpareKey{Domain: d, Queue: sp.Queue}] += sp.GPUs
				found = true
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("spare: no %s named %q", sp.Level, sp.Domain))
		}
	}
	return want, problems
}

// HoldSpares takes the spares out of the view.
func HoldSpares(view *cluster.State, want map[SpareKey]int) *Holds {
	h := &Holds{want: want}
	for _, k := range sortedKeys(want) {
		h.holdIn(view, k)
	}
	return h
}

func sortedKeys(m map[SpareKey]int) []SpareKey {
	ks := make([]SpareKey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].Domain != ks[j].Domain {
			return ks[i].Domain < ks[j].Domain
		}
		return ks[i].Queue < ks[j].Queue
	})
	return ks
}

// holdIn holds domain d's spare GPUs on the nodes with the most wholly free
// healthy GPUs (whole spare nodes replace whole-node ranks), the last node
// in topology order first on ties. A node's CPU and memory are held in
// proportion, so the spare GPUs stay usable.
func (h *Holds) holdIn(view *cluster.State, key SpareKey) {
	need := h.want[key]
	for _, x := range h.holds {
		if x.key == key {
			need -= len(x.alloc.Devices)
		}
	}
	if need <= 0 {
		return
	}
	dom := view.Domain(key.Domain)
	type cand struct{ node, free int }
	var cs []cand
	for n := dom.Lo; n < dom.Hi; n++ {
		if !view.Schedulable(n) {
			continue
		}
		if f := len(wholeFree(view, n)); f > 0 {
			cs = append(cs, cand{n, f})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].free != cs[j].free {
			return cs[i].free > cs[j].free
		}
		return cs[i].node > cs[j].node
	})
	for _, c := range cs {
		if need == 0 {
			break
		}
		devs := wholeFree(view, c.node)
		take := min(need, len(devs))
		total := len(view.Node(c.node).Devices)
		a := cluster.Alloc{
			CPUMilli: view.FreeCPU(c.node) * int64(take) / int64(total),
			MemMiB:   view.FreeMem(c.node) * int64(take) / int64(total),
		}
		for _, k := range devs[:take] {
			a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
		}
		if view.Allocate(c.node, a) != nil {
			continue
		}
		h.holds = append(h.holds, hold{key: key, node: c.node, alloc: a})
		need -= take
	}
}

// wholeFree lists node n's healthy, wholly free GPUs.
func wholeFree(view *cluster.State, n int) []int {
	var out []int
	for k, f := range view.GPUFree(n) {
		if f == 1000 && view.DeviceHealthy(n, k) {
			out = append(out, k)
		}
	}
	return out
}

// Release gives back to the view the spares held on nodes inside domain d
// that a replacement for a job of queue may use (those of its queue and
// those of any job's), for a replacement placed in d, and returns what to
// hold again afterwards (Rehold).
func (h *Holds) Release(view *cluster.State, d cluster.DomainID, queue string) []SpareKey {
	if h == nil {
		return nil
	}
	in := view.Domain(d)
	kept := h.holds[:0]
	released := map[SpareKey]int{}
	for _, x := range h.holds {
		if x.node >= in.Lo && x.node < in.Hi && (x.key.Queue == "" || x.key.Queue == queue) {
			view.Release(x.node, x.alloc)
			released[x.key]++
			continue
		}
		kept = append(kept, x)
	}
	h.holds = kept
	return sortedKeys(released)
}

// Rehold holds the released spares again from what is still free.
func (h *Holds) Rehold(view *cluster.State, keys []SpareKey) {
	for _, k := range keys {
		h.holdIn(view, k)
	}
}

// HeldGPUs is the number of GPUs held now, for stats.
func (h *Holds) HeldGPUs() int {
	if h == nil {
		return 0
	}
	n := 0
	for _, x := range h.holds {
		n += len(x.alloc.Devices)
	}
	return n
}

// Crowds reports whether a job of gpus whole GPUs, required inside one
// domain of level lv (0: the cluster), could never fit beside the spares:
// every domain big enough for it is too small once the spares wanted
// inside it are taken out. Such a job may use the spares (ReleaseAll),
// since holding them would starve it for good; while it runs its domain
// simply has no free spare.
func (h *Holds) Crowds(view *cluster.State, lv, gpus int) bool {
	if h == nil || len(h.holds) == 0 || gpus <= 0 || lv < 0 {
		return false
	}
	fitsSomewhere := false
	for _, d := range view.DomainsAt(lv) {
		capacity := view.DomainCapacityGPUs(d, cluster.AllModels)
		if gpus > capacity {
			continue
		}
		fitsSomewhere = true
		dom := view.Domain(d)
		spare := 0
		for x, n := range h.want {
			if in := view.Domain(x.Domain); in.Lo >= dom.Lo && in.Hi <= dom.Hi {
				spare += n
			}
		}
		if gpus <= capacity-spare {
			return false
		}
	}
	return fitsSomewhere
}

// ReleaseAll gives every held spare back to the view and returns the
// spares to hold again afterwards (Rehold).
func (h *Holds) ReleaseAll(view *cluster.State) []SpareKey {
	if h == nil {
		return nil
	}
	released := map[SpareKey]int{}
	for _, x := range h.holds {
		view.Release(x.node, x.alloc)
		released[x.key]++
	}
	h.holds = h.holds[:0]
	return sortedKeys(released)
}

// ParseSpares reads a spare list; see cycle.ParseSpares.
var ParseSpares = cycle.ParseSpares
