package sim

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/metrics"
)

// TestReplayCarriesOutBackfill runs small scripts through the replay driver:
// what the engine decides must happen in the simulated cluster.
func TestReplayCarriesOutBackfill(t *testing.T) {
	h := func(x float64) time.Duration { return time.Duration(x * float64(time.Hour)) }
	cases := map[string]struct {
		policy engine.Policy
		cfg    engine.BackfillConfig
		jobs   []Job
		check  func(t *testing.T, s metrics.Summary)
	}{
		// E (2 pods, minimum 1) runs alone, is shrunk at 0.5 h for J (1 h),
		// runs at half speed, and grows back when J ends at 1.5 h: 0.5 h of
		// work, then 0.5 h in that hour, then the last hour at full speed.
		"an elastic job shrinks for a waiting job and grows back": {policy: engine.Corral,
			jobs: []Job{
				job(build.Job("e").Pods(2).GPUs(8).Min(1).Expected(h(3)).Obj(), h(2)),
				job(build.Job("j").GPUs(8).Submit(1800).Expected(h(1)).Obj(), h(1)),
			},
			check: func(t *testing.T, s metrics.Summary) {
				if s.Evictions != 1 || s.JobsCompleted != 2 || s.WaitMaxS != 0 {
					t.Errorf("evictions %d, completed %d, max wait %v", s.Evictions, s.JobsCompleted, s.WaitMaxS)
				}
				if s.JCTP95S != h(2.5).Seconds() {
					t.Errorf("elastic job completed in %v, want 2h30m", time.Duration(s.JCTP95S)*time.Second)
				}
			}},
		"a job past its max runtime is terminated": {policy: engine.Greedy,
			jobs: []Job{job(build.Job("long").GPUs(8).MaxRuntime(h(1)).Obj(), h(5))},
			check: func(t *testing.T, s metrics.Summary) {
				if s.JobsTerminated != 1 || s.JobsCompleted != 0 || s.MakespanS != h(1).Seconds() {
					t.Errorf("terminated %d, completed %d, makespan %vs", s.JobsTerminated, s.JobsCompleted, s.MakespanS)
				}
			}},
		"requeued: it runs again from its last checkpoint": {policy: engine.Corral,
			cfg: engine.BackfillConfig{OnMaxRuntime: engine.Requeue},
			jobs: []Job{job(func() *Job {
				j := build.Job("long").GPUs(8).MaxRuntime(h(1)).Obj()
				j.CheckpointInterval = h(0.5)
				return &Job{Job: j}
			}().Job, h(1.5))},
			check: func(t *testing.T, s metrics.Summary) {
				// 1 h, stopped with 1 h saved, then the last 0.5 h.
				if s.JobsRestarted != 1 || s.JobsCompleted != 1 || s.MakespanS != h(1.5).Seconds() {
					t.Errorf("restarted %d, completed %d, makespan %vs", s.JobsRestarted, s.JobsCompleted, s.MakespanS)
				}
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := Input{ClusterName: "test", Topology: build.Topo("rack"), Nodes: build.Racks(1, 2), TraceName: "test", Jobs: tc.jobs}
			res, _, err := Run(in, Config{Policy: tc.policy, Protocol: Replay, Clock: fakeClock(), Comm: &CommModel{}, Backfill: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, res.Summary)
		})
	}
}
