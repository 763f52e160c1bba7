package cluster

import "sort"

// HoldKind says what a hold keeps capacity for.
type HoldKind uint8

const (
	// HoldReservation: nodes reserved for a blocked job, closed to the jobs
	// that would not end before it starts.
	HoldReservation HoldKind = iota + 1
	// HoldPool: nodes of a pool, closed to the jobs it does not admit.
	HoldPool
	// HoldSpare: spare GPUs kept for replacement ranks.
	HoldSpare
	// HoldLater: room of gang members their controller has not created
	// yet, beside the gang's bound pods (Name is the job).
	HoldLater
)

// HoldOwner names who a hold keeps capacity for: a reservation (Name is
// the job), a pool (Name is the pool) or a spare (Domain and the queue in
// Name, "" for any job's replacements).
type HoldOwner struct {
	Kind   HoldKind
	Name   string
	Domain DomainID
}

// Hold is capacity of one node allocated to an owner instead of a pod.
type Hold struct {
	Owner HoldOwner
	Node  int
	Alloc Alloc
}

// Holds is one table of the capacity a cycle keeps from placement, keyed
// by owner. A node closed for reservations or pools is held whole (all of
// its free capacity, once, for the first owner that closed it): placement
// and its aggregates then skip it in O(levels), and the empty-cluster
// capacity ("never fits" is judged against it) stays as it is, so a job
// kept out waits rather than being rejected. A spare holds some GPUs of a
// node, with CPU and memory in proportion.
//
// A hold captures what is free when it is taken; Refresh takes the closed
// nodes again after capacity freed on them.
type Holds struct {
	s      *State
	closed map[int]Hold
	shares []Hold // in the order taken
}

// NewHolds keeps holds on the running view s.
func NewHolds(s *State) *Holds { return &Holds{s: s, closed: map[int]Hold{}} }

// Closed reports whether node n is held whole for a reservation or pool.
func (h *Holds) Closed(n int) bool { _, ok := h.closed[n]; return ok }

// Sync makes exactly the nodes in want closed, each for the owner given:
// it opens the others and closes the new ones with their free capacity.
func (h *Holds) Sync(want map[int]HoldOwner) {
	var drop []int
	for n := range h.closed {
		if _, ok := want[n]; !ok {
			drop = append(drop, n)
		}
	}
	sort.Ints(drop)
	for _, n := range drop {
		h.s.Release(n, h.closed[n].Alloc)
		delete(h.closed, n)
	}
	add := make([]int, 0, len(want))
	for n := range want {
		if !h.Closed(n) {
			add = append(add, n)
		}
	}
	sort.Ints(add)
	for _, n := range add {
		h.close(want[n], n)
	}
}

// ClosedNodes lists the closed nodes with their owners.
func (h *Holds) ClosedNodes() map[int]HoldOwner {
	out := make(map[int]HoldOwner, len(h.closed))
	for n, x := range h.closed {
		out[n] = x.Owner
	}
	return out
}

// Refresh takes every closed node again, catching capacity freed on it
// since (a job let in and then released, or an eviction).
func (h *Holds) Refresh() {
	nodes := make([]int, 0, len(h.closed))
	for n := range h.closed {
		nodes = append(nodes, n)
	}
	sort.Ints(nodes)
	for _, n := range nodes {
		x := h.closed[n]
		h.s.Release(n, x.Alloc)
		h.close(x.Owner, n)
	}
}

// OpenAll gives every closed node's capacity back.
func (h *Holds) OpenAll() { h.Sync(nil) }

func (h *Holds) close(o HoldOwner, n int) {
	a := Alloc{CPUMilli: h.s.FreeCPU(n), MemMiB: h.s.FreeMem(n)}
	for k, f := range h.s.GPUFree(n) {
		if f > 0 {
			a.Devices = append(a.Devices, DeviceShare{Device: k, Milli: f})
		}
	}
	if !h.s.Schedulable(n) {
		// A cordoned node offers nothing to anybody already.
		a = Alloc{}
	} else if err := h.s.Allocate(n, a); err != nil {
		a = Alloc{}
	}
	h.closed[n] = Hold{Owner: o, Node: n, Alloc: a}
}

// Take holds a on node n for o; it fails, holding nothing, when a is not
// free.
func (h *Holds) Take(o HoldOwner, n int, a Alloc) error {
	if err := h.s.Allocate(n, a); err != nil {
		return err
	}
	h.shares = append(h.shares, Hold{Owner: o, Node: n, Alloc: a})
	return nil
}

// Shares lists the holds of part of a node (Take), in the order taken.
func (h *Holds) Shares() []Hold { return h.shares }

// ReleaseShares gives back the part-node holds for which match is true and
// returns them, in the order taken.
func (h *Holds) ReleaseShares(match func(Hold) bool) []Hold {
	var out []Hold
	kept := h.shares[:0]
	for _, x := range h.shares {
		if match(x) {
			h.s.Release(x.Node, x.Alloc)
			out = append(out, x)
			continue
		}
		kept = append(kept, x)
	}
	h.shares = kept
	return out
}
