package health

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

func TestEscalates(t *testing.T) {
	cases := map[string]struct {
		job  *workload.Job
		want bool
	}{
		"strict gang, default remediation": {job: build.Job("a").Pods(4).Obj(), want: true},
		"a single pod is no gang":          {job: build.Job("b").Obj()},
		"an elastic gang keeps its ranks":  {job: build.Job("c").Pods(4).Min(2).Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Escalates(tc.job); got != tc.want {
				t.Errorf("Escalates = %v, want %v", got, tc.want)
			}
		})
	}
	j := build.Job("d").Pods(4).Obj()
	j.Remediation = workload.RestartGang
	if Escalates(j) {
		t.Error("a job that asked for RestartGang escalated: it restarts anyway")
	}
}

// TestEscalateEvictsEveryBoundPod: the restart names every bound pod;
// the cycle's ledger frees them when it records the eviction.
func TestEscalateEvictsEveryBoundPod(t *testing.T) {
	one := cluster.Alloc{CPUMilli: 1000, Devices: []cluster.DeviceShare{{Device: 0, Milli: workload.MilliPerGPU}}}
	j := build.Job("g").Pods(2).Obj()
	rj := cycle.RunningJob{Job: j}
	for i := range 2 {
		rj.Pods = append(rj.Pods, cycle.PodBind{Placed: cluster.Placed{Pod: workload.PodRef{Job: j.ID, Index: i}, NodeIndex: i, Alloc: one}})
	}
	rem, ev := Escalate(rj)
	pods := []workload.PodRef{{Job: j.ID, Index: 0}, {Job: j.ID, Index: 1}}
	msg := "no room left for the replacement ranks: restarting all 2 bound pods"
	if diff := cmp.Diff(cycle.Remediation{Job: j.ID, Action: workload.RestartGang, Pods: pods, Message: msg}, rem); diff != "" {
		t.Errorf("remediation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cycle.Eviction{Job: j.ID, Pods: pods, Cause: cycle.CauseFailure, Message: msg}, ev); diff != "" {
		t.Errorf("eviction (-want +got):\n%s", diff)
	}
}

func TestPinOf(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(2, 2)) // r0-n-0 r0-n-1 r1-n-0 r1-n-1
	bound := func(nodes ...int) []cycle.PodBind {
		var out []cycle.PodBind
		for _, n := range nodes {
			out = append(out, cycle.PodBind{Placed: cluster.Placed{NodeIndex: n}})
		}
		return out
	}
	rack := build.Job("r").Pods(4).Required("rack").Obj()
	cases := map[string]struct {
		pj            cycle.PendingJob
		bound         []cycle.PodBind
		wantDomain    string
		wantPinned    bool
		wantReplacing bool
		wantProblem   string
	}{
		"the driver's pin for replacement ranks": {
			pj: cycle.PendingJob{Job: rack, Within: cycle.Pin{Level: "rack", Domain: "r1"}}, bound: bound(0),
			wantDomain: "r1", wantPinned: true, wantReplacing: true,
		},
		"a pin to an unknown level": {
			pj:          cycle.PendingJob{Job: rack, Within: cycle.Pin{Level: "row", Domain: "x"}},
			wantProblem: `replacement pinned to unknown topology level "row"`,
		},
		"a pin to an unknown domain": {
			pj:          cycle.PendingJob{Job: rack, Within: cycle.Pin{Level: "rack", Domain: "r9"}},
			wantProblem: `replacement pinned to unknown rack "r9"`,
		},
		"bound pods in one rack pin the rest there": {
			pj: cycle.PendingJob{Job: rack}, bound: bound(2, 3), wantDomain: "r1", wantPinned: true,
		},
		"bound pods across racks pin nothing": {
			pj: cycle.PendingJob{Job: rack}, bound: bound(1, 2),
		},
		"no required level pins nothing": {
			pj: cycle.PendingJob{Job: build.Job("any").Pods(4).Obj()}, bound: bound(0),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, pinned, replacing, problem := PinOf(s, tc.pj, tc.bound)
			if pinned != tc.wantPinned || replacing != tc.wantReplacing || problem != tc.wantProblem {
				t.Fatalf("PinOf = pinned %v, replacing %v, problem %q; want %v, %v, %q",
					pinned, replacing, problem, tc.wantPinned, tc.wantReplacing, tc.wantProblem)
			}
			if pinned && s.Domain(d).Name != tc.wantDomain {
				t.Errorf("PinOf domain = %s, want %s", s.Domain(d).Name, tc.wantDomain)
			}
		})
	}
}
