package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
