package backfill

import (
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
)

// Holds keeps nodes out of a running view for the jobs that may not use
// them. Holding a node allocates all of its free capacity to nobody, so the
// placement search and its aggregates skip it in O(levels) per node, and
// the empty-cluster capacity (what "never fits" is judged against) stays as
// it is: a job kept out of reserved capacity waits, it is not rejected.
//
// A hold only captures what is free when it is taken; the caller re-takes
// holds after placing a job that was let in (Sync does this).
type Holds struct {
	s    *cluster.State
	held map[int]cluster.Alloc
}

// NewHolds manages holds on the running view s.
func NewHolds(s *cluster.State) *Holds { return &Holds{s: s, held: map[int]cluster.Alloc{}} }

// Held reports whether node n is held now.
func (h *Holds) Held(n int) bool { _, ok := h.held[n]; return ok }

// Sync makes exactly the nodes in want held: it releases the others and
// takes the free capacity of the new ones.
func (h *Holds) Sync(want map[int]bool) {
	var drop []int
	for n := range h.held {
		if !want[n] {
			drop = append(drop, n)
		}
	}
	sort.Ints(drop)
	for _, n := range drop {
		h.s.Release(n, h.held[n])
		delete(h.held, n)
	}
	add := make([]int, 0, len(want))
	for n, ok := range want {
		if ok && !h.Held(n) {
			add = append(add, n)
		}
	}
	sort.Ints(add)
	for _, n := range add {
		h.take(n)
	}
}

// Refresh re-takes every hold, catching capacity freed on held nodes since
// (a job let in and then released, or an eviction).
func (h *Holds) Refresh() {
	nodes := make([]int, 0, len(h.held))
	for n := range h.held {
		nodes = append(nodes, n)
	}
	sort.Ints(nodes)
	for _, n := range nodes {
		h.s.Release(n, h.held[n])
		h.take(n)
	}
}

// ReleaseAll gives every held capacity back.
func (h *Holds) ReleaseAll() { h.Sync(nil) }

func (h *Holds) take(n int) {
	a := cluster.Alloc{CPUMilli: h.s.FreeCPU(n), MemMiB: h.s.FreeMem(n)}
	for k, f := range h.s.GPUFree(n) {
		if f > 0 {
			a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: f})
		}
	}
	if !h.s.Schedulable(n) {
		// A cordoned node offers nothing to anybody already.
		a = cluster.Alloc{}
	} else if err := h.s.Allocate(n, a); err != nil {
		a = cluster.Alloc{}
	}
	h.held[n] = a
}
