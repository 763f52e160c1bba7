package health

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// TestRemediator runs one decision per case on a 2-rack cluster of 3 nodes
// each (8 GPUs): the job runs one 8-GPU pod per node on r0-n-0 and r0-n-1
// (or only the first, for a single pod), r0-n-2 is free unless the case
// fills it, and GPU 3 of r0-n-0 fails 10 minutes before now unless the case
// says nothing failed.
func TestRemediator(t *testing.T) {
	now := time.Unix(1_000_000, 0).UTC()
	type want struct {
		action    workload.Remediation
		evict     []int // pod indexes
		within    string
		wholeGang bool
		message   string
	}
	cases := map[string]struct {
		job         *workload.Job
		healthy     bool
		restartOnly bool
		fillRack    bool // r0-n-2 is taken: the rack has no room for a replacement
		want        want
		wantHit     bool
	}{
		"nothing failed under the job": {job: build.Job("j").Pods(2).GPUs(8).Obj(), healthy: true},
		"a single pod restarts": {
			job: build.Job("j").GPUs(8).Obj(), wantHit: true,
			want: want{action: workload.RestartGang, evict: []int{0},
				message: "device gpu3 on node r0-n-0 (XID 79) failed: restarting all 1 pods"},
		},
		"a strict gang replaces the failed rank in its rack": {
			job: build.Job("j").Pods(2).GPUs(8).Required("rack").Obj(), wantHit: true,
			want: want{action: workload.ReplaceRanks, evict: []int{0}, within: "r0", wholeGang: true,
				message: "device gpu3 on node r0-n-0 (XID 79) failed: replacing 1 of 2 pods in rack r0 (room held)"},
		},
		"no room in its rack: the strict gang restarts": {
			job: build.Job("j").Pods(2).GPUs(8).Required("rack").Obj(), fillRack: true, wantHit: true,
			want: want{action: workload.RestartGang, evict: []int{0, 1}, wholeGang: true,
				message: "device gpu3 on node r0-n-0 (XID 79) (no room for 1 replacement pods in r0) failed: restarting all 2 pods"},
		},
		"the baselines restart every hit job": {
			job: build.Job("j").Pods(2).GPUs(8).Required("rack").Obj(), restartOnly: true, wantHit: true,
			want: want{action: workload.RestartGang, evict: []int{0, 1}, wholeGang: true,
				message: "device gpu3 on node r0-n-0 (XID 79) failed: restarting all 2 pods"},
		},
		"wait for repair within its limit": {
			job: func() *workload.Job {
				j := build.Job("j").Pods(2).GPUs(8).Obj()
				j.Remediation = workload.WaitForRepair
				return j
			}(), wantHit: true,
			want: want{action: workload.WaitForRepair, wholeGang: true,
				message: "device gpu3 on node r0-n-0 (XID 79) failed 10m0s ago: waiting for repair up to " + workload.DefaultRepairWait.String()},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(2, 3))
			view := s.Clone()
			rj := cycle.RunningJob{Job: tc.job}
			tc.job.EachPod(func(ref workload.PodRef, r workload.Request) {
				a := cluster.Alloc{CPUMilli: r.CPUMilli, MemMiB: r.MemMiB}
				for k := range 8 {
					a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: workload.MilliPerGPU})
				}
				if err := view.Allocate(ref.Index, a); err != nil {
					t.Fatal(err)
				}
				rj.Pods = append(rj.Pods, cycle.PodBind{Placed: cluster.Placed{Pod: ref, NodeIndex: ref.Index, Alloc: a}})
			})
			if tc.fillRack {
				if err := view.Allocate(2, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 0, Milli: workload.MilliPerGPU}}}); err != nil {
					t.Fatal(err)
				}
			}
			var failures []Failure
			if !tc.healthy {
				view.SetDeviceHealth(0, 3, false)
				failures = []Failure{{Node: "r0-n-0", Device: view.Node(0).Devices[3].ID, Since: now.Add(-10 * time.Minute), Reason: "XID 79"}}
			}
			idx, problems := NewIndex(view, failures)
			if len(problems) > 0 {
				t.Fatalf("index problems: %v", problems)
			}
			led := &viewLedger{view: view}
			r := &Remediator{Ledger: led, View: view, Placer: placement.NewPlacer(view, placement.MostAllocated(), placement.Interconnect),
				Index: idx, Now: now, RestartOnly: tc.restartOnly}
			d, hit := r.Remediate(rj)
			if hit != tc.wantHit {
				t.Fatalf("Remediate hit = %v, want %v (%+v)", hit, tc.wantHit, d)
			}
			if !hit {
				return
			}
			got := want{action: d.Action, wholeGang: d.WholeGang, message: d.Message}
			for _, p := range d.Evict {
				got.evict = append(got.evict, p.Index)
			}
			if d.Within != 0 {
				got.within = view.Domain(d.Within).Name
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("Remediate (-want +got):\n%s", diff)
			}
			// Every evicted pod left the view once, through the ledger.
			if diff := cmp.Diff(got.evict, led.vacated); diff != "" {
				t.Errorf("pods vacated (-evicted +vacated):\n%s", diff)
			}
		})
	}
}

// viewLedger frees vacated pods in the view, as the engine's ledger does,
// and remembers which.
type viewLedger struct {
	view    *cluster.State
	vacated []int // pod indexes
}

func (l *viewLedger) Vacate(pods []cluster.Placed) {
	for _, p := range pods {
		l.view.Release(p.NodeIndex, p.Alloc)
		l.vacated = append(l.vacated, p.Pod.Index)
	}
}
