package cluster_test

import (
	"testing"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
)

// TestHoldsKeepCapacityOutAndGiveItBack: closing a node takes its free
// capacity out of the view without changing what the cluster could hold
// empty; a part-node hold takes what it asks; releasing restores it exactly.
func TestHoldsKeepCapacityOutAndGiveItBack(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 3))
	free, capacity := s.FreeMilli(), s.CapacityMilli()
	h := cluster.NewHolds(s)
	pool := cluster.HoldOwner{Kind: cluster.HoldPool, Name: "p"}
	h.Sync(map[int]cluster.HoldOwner{0: pool})
	if got := s.FreeMilli(); got != free-8000 || !h.Closed(0) {
		t.Errorf("free with node 0 closed: %d, want %d (closed %v)", got, free-8000, h.Closed(0))
	}
	if s.CapacityMilli() != capacity {
		t.Errorf("capacity changed under a hold")
	}
	spare := cluster.HoldOwner{Kind: cluster.HoldSpare, Domain: 1}
	two := cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 0, Milli: 1000}, {Device: 1, Milli: 1000}}}
	if err := h.Take(spare, 2, two); err != nil {
		t.Fatal(err)
	}
	if err := h.Take(spare, 0, two); err == nil {
		t.Error("took GPUs of a closed node: want an error")
	}
	h.Sync(map[int]cluster.HoldOwner{1: pool})
	if got := s.FreeMilli(); got != free-8000-2000 || h.Closed(0) || !h.Closed(1) {
		t.Errorf("after moving the closed node: free %d, closed 0 %v, closed 1 %v", got, h.Closed(0), h.Closed(1))
	}
	if got := h.ClosedNodes(); len(got) != 1 || got[1] != pool {
		t.Errorf("ClosedNodes = %v, want node 1 for the pool", got)
	}
	released := h.ReleaseShares(func(x cluster.Hold) bool { return x.Owner == spare })
	if len(released) != 1 || released[0].Node != 2 || len(h.Shares()) != 0 {
		t.Errorf("ReleaseShares = %+v, left %+v; want the spare on node 2 and nothing left", released, h.Shares())
	}
	h.OpenAll()
	if got := s.FreeMilli(); got != free {
		t.Errorf("free after release: %d, want %d", got, free)
	}
}

// TestHoldsRefreshCatchesFreedCapacity: capacity freed on a closed node
// (an eviction) stays out of placement once the holds are taken again.
func TestHoldsRefreshCatchesFreedCapacity(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 1))
	one := cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 0, Milli: 1000}}}
	if err := s.Allocate(0, one); err != nil {
		t.Fatal(err)
	}
	h := cluster.NewHolds(s)
	h.Sync(map[int]cluster.HoldOwner{0: {Kind: cluster.HoldReservation, Name: "big"}})
	s.Release(0, one)
	if s.FreeMilli() != 1000 {
		t.Fatalf("free after the release under a hold: %d, want 1000", s.FreeMilli())
	}
	h.Refresh()
	if s.FreeMilli() != 0 {
		t.Errorf("free after Refresh: %d, want 0", s.FreeMilli())
	}
	h.OpenAll()
	if s.FreeMilli() != 8000 {
		t.Errorf("free after OpenAll: %d, want 8000", s.FreeMilli())
	}
}
