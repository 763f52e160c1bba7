package backfill

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
)

// TestEarliest replays the expected ends of the jobs holding a 1-rack,
// 3-node cluster (8 GPUs each): "a" on node 0 ends in 1 h, "b" on node 1 in
// 3 h, "forever" on node 2 declares no runtime and never ends.
func TestEarliest(t *testing.T) {
	now := time.Unix(1_000_000, 0).UTC()
	hold := func(s *cluster.State, id string, node int, d time.Duration) Holder {
		return holderOf(runOnNode(t, s, build.Job(id).GPUs(8).Expected(d).Obj(), node, now))
	}
	cases := map[string]struct {
		pods     int
		required string
		blocked  []int
		want     Slot
		wantOK   bool
	}{
		"one node frees first":              {pods: 1, want: Slot{Start: now.Add(time.Hour), Level: 2, Nodes: []int{0}, Releases: 1, Conf: 1}, wantOK: true},
		"two nodes wait for both ends":      {pods: 2, required: "rack", want: Slot{Start: now.Add(3 * time.Hour), Level: 1, Domain: 1, Nodes: []int{0, 1}, Releases: 2, Conf: 1, Idle: 8 * 2 * 3600}, wantOK: true},
		"a blocked node is never offered":   {pods: 1, blocked: []int{0}, want: Slot{Start: now.Add(3 * time.Hour), Level: 2, Nodes: []int{1}, Releases: 2, Conf: 1}, wantOK: true},
		"a job without estimate never ends": {pods: 3, required: "rack"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(1, 3))
			holders := []Holder{hold(s, "a", 0, time.Hour), hold(s, "b", 1, 3*time.Hour), hold(s, "forever", 2, 0)}
			blocked := map[int]bool{}
			for _, n := range tc.blocked {
				blocked[n] = true
			}
			got, ok := Earliest(s, holders, gangOf(s, build.Job("g").Pods(tc.pods).GPUs(8).Obj(), tc.required), now, nil, func(n int) bool { return blocked[n] })
			if ok != tc.wantOK {
				t.Fatalf("Earliest ok = %v, want %v (%+v)", ok, tc.wantOK, got)
			}
			if !ok {
				return
			}
			// Domain ids at the host level are the node's own; compare them
			// by what they hold rather than by id.
			if got.Level == s.HostLevel() {
				got.Domain = 0
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Earliest (-want +got):\n%s", diff)
			}
			if free := s.FreeMilli(); free != 0 {
				t.Errorf("Earliest changed the view it was given: %d GPU-milli free, want 0", free)
			}
		})
	}
}

// TestEarliestExtendsOverdueHolders: a job 3 h into a declared 1 h run is
// not taken to end now (which let nothing backfill before a reservation
// that never came); with no longer runs known its estimate doubles to 6 h,
// so the gang's start is in 3 h, said to rest on an extended estimate.
func TestEarliestExtendsOverdueHolders(t *testing.T) {
	now := time.Unix(1_000_000, 0).UTC()
	s := build.State(build.Topo("rack"), build.Racks(1, 1))
	late := build.Job("late").GPUs(8).Expected(time.Hour).Obj()
	holders := []Holder{holderOf(runOnNode(t, s, late, 0, now.Add(-3*time.Hour)))}
	slot, ok := Earliest(s, holders, gangOf(s, build.Job("g").GPUs(8).Obj(), ""), now, &History{}, nil)
	if !ok || !slot.Start.Equal(now.Add(3*time.Hour)) || slot.Extended != 1 || slot.Conf != 0.5 {
		t.Fatalf("Earliest = %+v, %v; want a start in 3 h on one extended estimate at confidence 0.5", slot, ok)
	}
}

// TestWorthHolding: a 2-node rack (8 GPUs each), node 0 busy for 3 h, node
// 1 free. A 16-GPU gang's slot is in 3 h and holding it idles node 1's 8
// GPUs for 3 h (24 GPU-hours): worth it for a gang that will use more than
// that, not for a shorter one, nor for one without any runtime estimate;
// a gang that fits now costs nothing to hold.
func TestWorthHolding(t *testing.T) {
	now := time.Unix(1_000_000, 0).UTC()
	cases := map[string]struct {
		busy    time.Duration // node 0's job; 0: node 0 is free too
		runtime time.Duration // the gang's declared runtime; 0: none
		want    bool
	}{
		"runs 2 h (32 GPU-h) > 24 GPU-h idle": {busy: 3 * time.Hour, runtime: 2 * time.Hour, want: true},
		"runs 1 h (16 GPU-h) < 24 GPU-h idle": {busy: 3 * time.Hour, runtime: time.Hour},
		"no estimate: nothing to weigh":       {busy: 3 * time.Hour},
		"fits now: holding costs nothing":     {runtime: time.Minute, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(1, 2))
			var holders []Holder
			if tc.busy > 0 {
				holders = append(holders, holderOf(runOnNode(t, s, build.Job("busy").GPUs(8).Expected(tc.busy).Obj(), 0, now)))
			}
			jb := build.Job("g").Pods(2).GPUs(8)
			if tc.runtime > 0 {
				jb = jb.Expected(tc.runtime)
			}
			j := jb.Obj()
			slot, ok := Earliest(s, holders, gangOf(s, j, ""), now, &History{}, nil)
			if !ok {
				t.Fatal("no slot")
			}
			if want := float64(8 * tc.busy / time.Second); slot.Idle != want {
				t.Errorf("Idle = %v GPU-s, want %v", slot.Idle, want)
			}
			if got := WorthHolding(&History{}, j, slot, now); got != tc.want {
				t.Errorf("WorthHolding = %v, want %v (idle %v GPU-s, protected %v)", got, tc.want, slot.Idle, Protected(&History{}, j))
			}
		})
	}
}
