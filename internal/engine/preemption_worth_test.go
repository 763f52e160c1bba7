package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/build"
)

// TestPriorityPreemptionMustBeWorthIt: a higher-priority job does not evict
// a job that its runtime history says ends within minutes when the
// eviction throws away far more work than the wait would cost (gen:llm
// seed 52: 1,343 GPU-hours lost to start a whole-cluster job six minutes
// sooner); it still evicts when the victim has long to go, or when nothing
// predicts the victim's end.
func TestPriorityPreemptionMustBeWorthIt(t *testing.T) {
	ran := 167*time.Hour + 54*time.Minute // no checkpoint: all of it is lost
	cases := map[string]struct {
		pastRuns  time.Duration // completed runs like the victim's (0: no history)
		wantEvict bool
		wantWhy   string
	}{
		"history says it ends in six minutes: the preemptor waits": {
			pastRuns: 168 * time.Hour, wantWhy: "preemption not worth it",
		},
		"history says it runs ten more days: evicted": {
			pastRuns: 408 * time.Hour, wantEvict: true,
		},
		"nothing predicts its end: the priority decides": {
			wantEvict: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := t0.Add(30 * 24 * time.Hour)
			s := build.State(build.Topo("rack"), build.Racks(1, 2))
			long := build.Job("long").GPUs(8).Preemptible().Obj()
			long.Submit = now.Add(-ran)
			running := []RunningJob{pin(t, s, long, now.Add(-ran), "r0-n-0")}
			var hist *backfill.History
			if tc.pastRuns > 0 {
				hist = &backfill.History{}
				past := build.Job("past").GPUs(8).Obj()
				for i := 0; i < 10; i++ {
					hist.Observe(past, tc.pastRuns)
				}
			}
			hi := build.Job("hi").Pods(2).GPUs(8).Priority(100).Obj()
			hi.Submit = now
			p := New(Config{Policy: Corral, CheckpointWait: -1}).Cycle(&Snapshot{State: s, Now: now,
				Pending: pendingOf(hi), Running: running, Runtimes: hist})
			if got := len(evicted(p)) == 1; got != tc.wantEvict {
				t.Fatalf("evicted %v, want eviction %v; reason %q", evicted(p), tc.wantEvict, reasonOf(p, "hi").Message)
			}
			if outcomeOf(p, "hi").Placed != tc.wantEvict {
				t.Errorf("preemptor placed %v, want %v", outcomeOf(p, "hi").Placed, tc.wantEvict)
			}
			if tc.wantWhy != "" && !strings.Contains(reasonOf(p, "hi").Message, tc.wantWhy) {
				t.Errorf("reason %q does not say %q", reasonOf(p, "hi").Message, tc.wantWhy)
			}
		})
	}
}
