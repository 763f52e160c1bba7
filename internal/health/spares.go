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

// Spares is the spare capacity a cycle keeps from ordinary placement, held
// in the cycle's holds table (owner kind cluster.HoldSpare). It is
// recomputed every cycle from what is free, so a spare used by a
// replacement is held again elsewhere in its domain as soon as room frees.
type Spares struct {
	want  map[SpareKey]int // GPUs to hold
	table *cluster.Holds
	// letIn are the spares given back for one job (LetIn), to hold again
	// before the next (HoldAgain).
	letIn []SpareKey
}

func ownerOf(k SpareKey) cluster.HoldOwner {
	return cluster.HoldOwner{Kind: cluster.HoldSpare, Name: k.Queue, Domain: k.Domain}
}

func keyOf(o cluster.HoldOwner) SpareKey { return SpareKey{Domain: o.Domain, Queue: o.Name} }

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

// HoldSpares takes the spares out of the view, as holds in table (the
// cycle's, on view).
func HoldSpares(view *cluster.State, table *cluster.Holds, want map[SpareKey]int) *Spares {
	h := &Spares{want: want, table: table}
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
func (h *Spares) holdIn(view *cluster.State, key SpareKey) {
	need := h.want[key]
	for _, x := range h.table.Shares() {
		if x.Owner.Kind == cluster.HoldSpare && keyOf(x.Owner) == key {
			need -= len(x.Alloc.Devices)
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
		if h.table.Take(ownerOf(key), c.node, a) != nil {
			continue
		}
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
func (h *Spares) Release(view *cluster.State, d cluster.DomainID, queue string) []SpareKey {
	if h == nil {
		return nil
	}
	in := view.Domain(d)
	return h.release(func(x cluster.Hold) bool {
		return x.Node >= in.Lo && x.Node < in.Hi && (x.Owner.Name == "" || x.Owner.Name == queue)
	})
}

func (h *Spares) release(match func(cluster.Hold) bool) []SpareKey {
	released := map[SpareKey]int{}
	for _, x := range h.table.ReleaseShares(func(x cluster.Hold) bool { return x.Owner.Kind == cluster.HoldSpare && match(x) }) {
		released[keyOf(x.Owner)]++
	}
	return sortedKeys(released)
}

// Rehold holds the released spares again from what is still free.
func (h *Spares) Rehold(view *cluster.State, keys []SpareKey) {
	for _, k := range keys {
		h.holdIn(view, k)
	}
}

// holding reports whether any spare is held now.
func (h *Spares) holding() bool {
	for _, x := range h.table.Shares() {
		if x.Owner.Kind == cluster.HoldSpare {
			return true
		}
	}
	return false
}

// HeldGPUs is the number of GPUs held now, for stats.
func (h *Spares) HeldGPUs() int {
	if h == nil {
		return 0
	}
	n := 0
	for _, x := range h.table.Shares() {
		if x.Owner.Kind == cluster.HoldSpare {
			n += len(x.Alloc.Devices)
		}
	}
	return n
}

// Crowds reports whether a job of gpus whole GPUs, required inside one
// domain of level lv (0: the cluster), could never fit beside the spares:
// every domain big enough for it is too small once the spares wanted
// inside it are taken out. Such a job may use the spares (ReleaseAll),
// since holding them would starve it for good; while it runs its domain
// simply has no free spare.
func (h *Spares) Crowds(view *cluster.State, lv, gpus int) bool {
	if h == nil || !h.holding() || gpus <= 0 || lv < 0 {
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

// LetIn gives every held spare back for a job of gpus whole GPUs, required
// inside one domain of level lv, that could never fit beside them
// (Crowds); HoldAgain takes them again, from what it left.
func (h *Spares) LetIn(view *cluster.State, lv, gpus int) {
	if h != nil && h.Crowds(view, lv, gpus) {
		h.letIn = h.ReleaseAll(view)
	}
}

// HoldAgain holds the spares LetIn gave back again.
func (h *Spares) HoldAgain(view *cluster.State) {
	if h == nil || h.letIn == nil {
		return
	}
	h.Rehold(view, h.letIn)
	h.letIn = nil
}

// ReleaseAll gives every held spare back to the view and returns the
// spares to hold again afterwards (Rehold).
func (h *Spares) ReleaseAll(view *cluster.State) []SpareKey {
	if h == nil {
		return nil
	}
	return h.release(func(cluster.Hold) bool { return true })
}

// ParseSpares reads a spare list; see cycle.ParseSpares.
var ParseSpares = cycle.ParseSpares
