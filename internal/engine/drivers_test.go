package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// TestMixOfCountsThePodsPresent: the mix both drivers pass is the pods
// present now, each once: every pod of a job not yet placed, only the
// waiting pods of a partly bound one, and the pods running jobs hold.
func TestMixOfCountsThePodsPresent(t *testing.T) {
	whole := build.Job("whole").Pods(2).GPUs(8).Obj()
	partly := build.Job("partly").Pods(4).GPUs(1).Obj()
	single := build.Job("single").Pods(1).GPUs(2).Obj()
	pending := []PendingJob{{Job: whole}, {Job: partly, Waiting: []workload.PodRef{{Job: "partly", Index: 3}}}}
	running := []RunningJob{
		{Job: partly, Pods: []PodBind{{Placed: cluster.Placed{Pod: workload.PodRef{Job: "partly", Index: 0}}},
			{Placed: cluster.Placed{Pod: workload.PodRef{Job: "partly", Index: 1}}},
			{Placed: cluster.Placed{Pod: workload.PodRef{Job: "partly", Index: 2}}}}},
		{Job: single, Pods: []PodBind{{Placed: cluster.Placed{Pod: workload.PodRef{Job: "single"}}}}},
	}
	got := map[int]float64{} // GPUs per pod -> weight
	for _, e := range MixOf(pending, running, 0) {
		got[e.Request.GPUs] = e.Weight
	}
	// 7 pods: 2 of 8 GPUs, 4 of 1 GPU (1 waiting + 3 running), 1 of 2 GPUs.
	want := map[int]float64{8: 2.0 / 7, 1: 4.0 / 7, 2: 1.0 / 7}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mix weights (-want +got):\n%s", diff)
	}
	if MixOf(nil, nil, 0) != nil {
		t.Error("no pods present: want no mix")
	}
}
