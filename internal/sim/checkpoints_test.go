package sim

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
)

// TestCheckpointSchedule: a job's true checkpoints vary within its jitter,
// the same job gets the same schedule, and what is saved is never ahead of
// the work done (the scheduler learns of a checkpoint only once taken).
func TestCheckpointSchedule(t *testing.T) {
	j := Job{Job: build.Job("j").Obj(), Checkpoints: Checkpoints{Every: 30 * time.Minute, Jitter: 0.25, Seed: 7}}
	a, b := newCkptSchedule(j), newCkptSchedule(j)
	var last time.Duration
	varied := false
	for work := time.Duration(0); work < 48*time.Hour; work += 7 * time.Minute {
		got := a.saved(work)
		if got > work || got < last {
			t.Fatalf("at %v of work: saved %v (before: %v)", work, got, last)
		}
		if got != b.saved(work) {
			t.Fatalf("at %v of work: two schedules of one job differ", work)
		}
		last = got
	}
	for i, at := range a.times {
		prev := time.Duration(0)
		if i > 0 {
			prev = a.times[i-1]
		}
		step := at - prev
		if step < 22*time.Minute+30*time.Second || step > 37*time.Minute+30*time.Second {
			t.Errorf("interval %d is %v, outside 30m ± 25%%", i, step)
		}
		varied = varied || step != 30*time.Minute
	}
	if !varied {
		t.Error("every interval is exactly 30m: no jitter")
	}
	other := j
	other.Job = build.Job("k").Obj()
	if c := newCkptSchedule(other); c.saved(24*time.Hour) == a.saved(24*time.Hour) && c.times[0] == a.times[0] {
		t.Error("two jobs got the same schedule")
	}
}
