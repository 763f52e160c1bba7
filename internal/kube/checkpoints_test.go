package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// TestCheckpointHistory: the annotation holds one time; across cycles the
// adapter hands the engine every distinct value it saw for the job's
// current run, starts over when the job restarts, and forgets runs that
// ended.
func TestCheckpointHistory(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	rj := func(id string, start int, annotated int) engine.RunningJob {
		r := engine.RunningJob{Job: &workload.Job{ID: workload.JobID(id)}, Start: at(start)}
		if annotated > 0 {
			r.Checkpoints = r.Checkpoints.Add(at(annotated))
		}
		return r
	}
	type cycleIn struct {
		running []engine.RunningJob
		want    map[workload.JobID][]time.Time
	}
	cycles := []cycleIn{
		{running: []engine.RunningJob{rj("a", 0, 0), rj("b", 0, 25)},
			want: map[workload.JobID][]time.Time{"a": nil, "b": {at(25)}}},
		{running: []engine.RunningJob{rj("a", 0, 30), rj("b", 0, 25)}, // b's annotation unchanged: no new checkpoint
			want: map[workload.JobID][]time.Time{"a": {at(30)}, "b": {at(25)}}},
		{running: []engine.RunningJob{rj("a", 0, 60), rj("b", 0, 55)},
			want: map[workload.JobID][]time.Time{"a": {at(30), at(60)}, "b": {at(25), at(55)}}},
		// a restarted at 70 (a new run: its old checkpoints are not its);
		// b ended.
		{running: []engine.RunningJob{rj("a", 70, 0)},
			want: map[workload.JobID][]time.Time{"a": nil}},
		{running: []engine.RunningJob{rj("a", 70, 95), rj("b", 100, 0)},
			want: map[workload.JobID][]time.Time{"a": {at(95)}, "b": nil}},
	}
	var h checkpointHistory
	for i, c := range cycles {
		h.observe(c.running)
		got := map[workload.JobID][]time.Time{}
		for _, r := range c.running {
			got[r.Job.ID] = []time.Time(r.Checkpoints)
		}
		if diff := cmp.Diff(c.want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("cycle %d (-want +got):\n%s", i, diff)
		}
		if len(h.runs) != len(c.running) {
			t.Errorf("cycle %d: %d runs kept for %d running jobs", i, len(h.runs), len(c.running))
		}
	}
}

// TestCheckpointHistoryFromAnnotations: rank 0 rewrites its
// corral.dev/last-checkpoint every 30 minutes; cycle after cycle the
// adapter hands the engine the job's whole history, whose intervals predict
// the next checkpoint. A restarted scheduler starts from the current value.
func TestCheckpointHistoryFromAnnotations(t *testing.T) {
	s, err := cluster.New(cluster.Topology{}, []cluster.Node{{Name: "n1", CPUMilli: 64000, MemMiB: 1 << 20,
		Devices: []cluster.Device{{ID: "gpu0", Model: "H100"}}}})
	if err != nil {
		t.Fatal(err)
	}
	p := pod("w0").gpus(1).boundTo("n1").obj()
	p.Status.StartTime = ptr(metav1.NewTime(time.Unix(5_000, 0)))
	ref := workload.PodRef{Job: "j"}
	kj := &kjob{job: &workload.Job{ID: "j"}, refs: []workload.PodRef{ref},
		pods: map[workload.PodRef]*corev1.Pod{ref: p}, bound: map[workload.PodRef]string{ref: "n1"}}
	holds := map[string]podHold{string(p.UID): {node: 0, alloc: cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 0, Milli: 1000}}}}}
	cycle := func(h *checkpointHistory, annotated, now int64) engine.RunningJob {
		p.Annotations[v1alpha1.AnnotationLastCheckpoint] = time.Unix(annotated, 0).UTC().Format(time.RFC3339)
		rj, warns := runningJob(kj, holds, nil, s, time.Unix(now, 0))
		if len(warns) > 0 {
			t.Fatalf("warnings %v", warns)
		}
		running := []engine.RunningJob{rj}
		h.observe(running)
		return running[0]
	}
	var h checkpointHistory
	cycle(&h, 7_000, 7_100)
	cycle(&h, 7_000, 8_000) // no new checkpoint between these cycles
	cycle(&h, 8_800, 9_000)
	rj := cycle(&h, 10_600, 10_700)
	pred, ok := rj.Checkpoints.Predict()
	if !ok || len(rj.Checkpoints) != 3 || pred.Intervals != 2 || pred.Mean != 30*time.Minute || !pred.Next.Equal(time.Unix(12_400, 0)) {
		t.Fatalf("history %v: prediction %+v (ok %v), want 3 reports 30 min apart, next at 12400", rj.Checkpoints, pred, ok)
	}
	var restarted checkpointHistory
	if rj := cycle(&restarted, 10_600, 10_800); len(rj.Checkpoints) != 1 {
		t.Errorf("after a restart: history %v, want only the annotation's current value", rj.Checkpoints)
	}
}
