package cluster_test

import (
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/mig"
)

func TestMIGState(t *testing.T) {
	threes := build.Lay("3g.40gb@0 3g.40gb@4")
	nodes := []cluster.Node{
		build.Node().Name("m").Model("H100").GPUs(2).PCIe().MIG("H100-80GB", threes).Obj(),
		build.Node().Name("w").Model("H100").GPUs(1).PCIe().Obj(),
	}
	s := build.State(cluster.Topology{}, nodes)
	m, _ := s.NodeIndex("m")
	share := func(k int, in string) cluster.Alloc {
		ref, _ := s.MIGRef(m, k, build.Lay(in)[0])
		return cluster.Alloc{Devices: []cluster.DeviceShare{{Device: k, MIG: ref}}}
	}
	cases := []struct {
		name    string
		do      func() error
		wantErr string
	}{
		{"MIG GPUs are a model of their own", func() error {
			if got := strings.Join(s.Models(), ","); got != "H100,H100 (MIG H100-80GB)" {
				t.Errorf("models %s", got)
			}
			return nil
		}, ""},
		{"an instance of the layout", func() error { return s.Allocate(m, share(0, "3g.40gb@4")) }, ""},
		{"the same instance twice", func() error { return s.Allocate(m, share(0, "3g.40gb@4")) }, "is in use"},
		{"an instance the layout lacks", func() error { return s.Allocate(m, share(0, "4g.40gb@0")) }, "has no MIG instance 4g.40gb@0"},
		{"a whole GPU of a MIG GPU", func() error {
			return s.Allocate(m, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 1, Milli: 1000}}})
		}, "runs MIG"},
		{"a busy GPU is not re-partitioned", func() error { return s.SetMIGLayout(m, 0, mig.Layout{}, false) }, "in use"},
		{"an idle GPU is", func() error { return s.SetMIGLayout(m, 1, build.Lay("7g.80gb@0"), false) }, ""},
		{"into a valid layout only", func() error { return s.SetMIGLayout(m, 1, build.Lay("4g.40gb@4"), false) }, "invalid placement start"},
	}
	for _, tc := range cases {
		err := tc.do()
		if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	// gpu0 keeps one free 3g; gpu1 became one 7g.
	mask := s.MIGMask()
	if got := [2]int{s.DomainFreeMIG(0, mask, "3g.40gb"), s.DomainFreeMIG(0, mask, "7g.80gb")}; got != [2]int{1, 1} {
		t.Errorf("free 3g and 7g instances %v, want [1 1]", got)
	}
	// A 3g of 7 compute slices is in use on gpu0.
	if got := s.GPUFree(m); got[0] != 572 || got[1] != 1000 {
		t.Errorf("free milli %v, want [572 1000]", got)
	}
	// A clone is independent: re-partitioning it leaves s alone.
	c := s.Clone()
	if err := c.SetMIGLayout(m, 1, threes, true); err != nil {
		t.Fatal(err)
	}
	if !c.MIGPending(m, 1) || s.MIGPending(m, 1) || s.MIGLayout(m, 1).String() != "[7g.80gb@0]" {
		t.Errorf("clone and original share MIG state: %v %v", c.MIGLayout(m, 1), s.MIGLayout(m, 1))
	}
	// And the other way round: a clone of s, then s re-partitioned.
	c2 := s.Clone()
	if err := s.SetMIGLayout(m, 1, build.Lay("4g.40gb@0"), false); err != nil {
		t.Fatal(err)
	}
	if c2.MIGLayout(m, 1).String() != "[7g.80gb@0]" {
		t.Errorf("re-partitioning the original changed its clone: %v", c2.MIGLayout(m, 1))
	}
	if got := c.DomainFreeMIG(0, mask, "3g.40gb"); got != 1 {
		t.Errorf("free 3g in the clone = %d, want 1: the pending GPU's instances are not free yet", got)
	}
	s.Release(m, share(0, "3g.40gb@4"))
	if got := s.DomainFreeMIG(0, mask, "3g.40gb"); got != 2 {
		t.Errorf("free 3g after release = %d, want 2", got)
	}
	if got := s.GPUFree(m)[0]; got != 1000 || s.MIGUsed(m, 0) != 0 {
		t.Errorf("after release: free %d, used %b", got, s.MIGUsed(m, 0))
	}
}

// TestMIGModelKeys: one model name on GPUs of two MIG geometries makes two
// resources, not an error.
func TestMIGModelKeys(t *testing.T) {
	s := build.State(cluster.Topology{},
		[]cluster.Node{build.Node().Name("a").Model("A100").GPUs(1).PCIe().MIG("A100-40GB").Obj()},
		[]cluster.Node{build.Node().Name("b").Model("A100").GPUs(1).PCIe().MIG("A100-80GB").Obj()},
		[]cluster.Node{build.Node().Name("c").Model("H100-80GB").GPUs(1).PCIe().MIG("H100-80GB").Obj()})
	if got, want := strings.Join(s.Models(), ","), "A100 (MIG A100-40GB),A100 (MIG A100-80GB),H100-80GB (MIG)"; got != want {
		t.Errorf("models %s, want %s", got, want)
	}
}
