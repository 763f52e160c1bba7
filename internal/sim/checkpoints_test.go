package sim

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cycle"
)

// TestCheckpointSchedule: a job's true checkpoints vary within its jitter,
// the same job gets the same schedule, and what is saved is never ahead of
// the work done (the scheduler learns of a checkpoint only once taken).
func TestCheckpointSchedule(t *testing.T) {
	j := Job{Job: build.Job("j").Obj(), Checkpoints: Checkpoints{Every: 30 * time.Minute, Jitter: 0.25, Seed: 7}}
	a, b := newCkptSchedule(j), newCkptSchedule(j)
	saved := func(c *ckptSchedule, work time.Duration) time.Duration {
		if taken := c.between(0, work); len(taken) > 0 {
			return taken[len(taken)-1]
		}
		return 0
	}
	var last time.Duration
	varied := false
	for work := time.Duration(0); work < 48*time.Hour; work += 7 * time.Minute {
		got := saved(a, work)
		if got > work || got < last {
			t.Fatalf("at %v of work: saved %v (before: %v)", work, got, last)
		}
		if got != saved(b, work) {
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
	if c := newCkptSchedule(other); saved(c, 24*time.Hour) == saved(a, 24*time.Hour) && c.times[0] == a.times[0] {
		t.Error("two jobs got the same schedule")
	}
}

// TestReportedCheckpoints: the engine is told of every checkpoint the
// current run has taken, when it was taken (after the restart overhead, at
// the run's speed), never one still ahead, and nothing after the gang hung.
func TestReportedCheckpoints(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	jittered := Job{Job: build.Job("j").Checkpoint(30 * time.Minute).Obj(), Checkpoints: Checkpoints{Every: 30 * time.Minute, Jitter: 0.25, Seed: 7}}
	declared := Job{Job: build.Job("d").Checkpoint(20 * time.Minute).Obj()}
	none := Job{Job: build.Job("n").Obj()}
	overhead := 5 * time.Minute
	cases := []struct {
		name   string
		job    Job
		hungAt time.Duration // after t0; 0: not hung
		want   func(*jobRun) []time.Duration
	}{
		{name: "its own jittered schedule", job: jittered, want: func(jr *jobRun) []time.Duration {
			return jr.ckpt.between(0, 10*time.Hour-overhead)
		}},
		{name: "every declared interval when no schedule is modelled", job: declared, want: func(*jobRun) []time.Duration {
			var out []time.Duration
			for w := 20 * time.Minute; w <= 10*time.Hour-overhead; w += 20 * time.Minute {
				out = append(out, w)
			}
			return out
		}},
		{name: "a job that never checkpoints reports none", job: none, want: func(*jobRun) []time.Duration { return nil }},
		{name: "nothing after the gang hung", job: declared, hungAt: 3 * time.Hour, want: func(*jobRun) []time.Duration {
			var out []time.Duration
			for w := 20 * time.Minute; w <= 3*time.Hour-overhead; w += 20 * time.Minute {
				out = append(out, w)
			}
			return out
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			jr := &jobRun{job: tc.job, started: true, start: t0, segStart: t0.Add(overhead), slow: 1, frac: 1, restarts: 1}
			if tc.hungAt > 0 {
				jr.hungAt = t0.Add(tc.hungAt)
			}
			for now := t0; !now.After(t0.Add(10 * time.Hour)); now = now.Add(7 * time.Minute) {
				jr.report(now)
				if last := jr.reported.Last(); last.After(now) {
					t.Fatalf("at %v: reported a checkpoint at %v, still ahead", now.Sub(t0), last.Sub(t0))
				}
			}
			jr.report(t0.Add(10 * time.Hour))
			var want []time.Time
			for _, w := range tc.want(jr) {
				want = append(want, t0.Add(overhead+w))
			}
			if len(want) > cycle.MaxCheckpoints {
				want = want[len(want)-cycle.MaxCheckpoints:]
			}
			if len(jr.reported) != len(want) {
				t.Fatalf("reported %d checkpoints, want %d", len(jr.reported), len(want))
			}
			for i := range want {
				if !jr.reported[i].Equal(want[i]) {
					t.Errorf("checkpoint %d at %v, want %v", i, jr.reported[i].Sub(t0), want[i].Sub(t0))
				}
			}
		})
	}
}

// TestReportedCheckpointsAcrossAResize: a checkpoint taken before an
// elastic job shrank is dated at the old speed, one after at the new.
func TestReportedCheckpointsAcrossAResize(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	jr := &jobRun{job: Job{Job: build.Job("d").Checkpoint(20 * time.Minute).Obj()}, started: true, start: t0, segStart: t0, slow: 1, frac: 1}
	// At 30 min it drops to half its pods: the work of 40 min is done at
	// 30 + 2×10 = 50 min, that of 60 min at 90 min.
	at := t0.Add(30 * time.Minute)
	jr.report(at)
	jr.segDone, jr.segStart, jr.frac = jr.workAt(at), at, 0.5
	jr.report(t0.Add(95 * time.Minute))
	want := []time.Duration{20 * time.Minute, 50 * time.Minute, 90 * time.Minute}
	if len(jr.reported) != len(want) {
		t.Fatalf("reported %v", jr.reported)
	}
	for i, w := range want {
		if got := jr.reported[i].Sub(t0); got != w {
			t.Errorf("checkpoint %d at %v, want %v", i, got, w)
		}
	}
}
