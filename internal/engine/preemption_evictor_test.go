package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
)

// TestLowerPriorityJobsKeepOffAnEvictorsRoom: a whole-cluster job of
// priority 100 waits for a non-preemptible job that ends in ten hours; a
// priority-0 job it may evict runs beside it, with no estimate, so no
// reservation holds the room (gen:llm tuning seeds 44 and 49, where the
// single-node jobs let in under such a job ran for days and were all
// evicted when it started). A lower-priority job that would still run
// then is kept off the room, and its reason says why; one expected to end
// before, or of the same priority, starts; so do all when nothing predicts
// when the blocker ends.
func TestLowerPriorityJobsKeepOffAnEvictorsRoom(t *testing.T) {
	cases := map[string]struct {
		newcomer    *build.JobBuilder
		blockerEnds time.Duration // the blocker's declared runtime (0: none)
		wantPlaced  bool
	}{
		"no estimate: kept off": {
			newcomer: build.Job("new").GPUs(8), blockerEnds: 10 * time.Hour,
		},
		"expected to run past the evictor's start: kept off": {
			newcomer: build.Job("new").GPUs(8).Expected(20 * time.Hour), blockerEnds: 10 * time.Hour,
		},
		"expected to end before the evictor's start: starts": {
			newcomer: build.Job("new").GPUs(8).Expected(time.Hour), blockerEnds: 10 * time.Hour, wantPlaced: true,
		},
		"same priority as the evictor: starts": {
			newcomer: build.Job("new").GPUs(8).Priority(100), blockerEnds: 10 * time.Hour, wantPlaced: true,
		},
		"nothing predicts the blocker's end: starts": {
			newcomer: build.Job("new").GPUs(8), wantPlaced: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := t0.Add(30 * 24 * time.Hour)
			s := build.State(build.Topo("rack"), build.Racks(1, 3))
			blocker := build.Job("blocker").GPUs(8).Priority(100).Expected(tc.blockerEnds + time.Hour).Obj()
			old := build.Job("old").GPUs(8).Preemptible().Obj()
			running := []RunningJob{
				pin(t, s, blocker, now.Add(-time.Hour), "r0-n-0"),
				pin(t, s, old, now.Add(-2*time.Hour), "r0-n-1"),
			}
			hi := build.Job("hi").Pods(3).GPUs(8).Priority(100).Obj()
			hi.Submit = now.Add(-5 * time.Hour)
			newcomer := tc.newcomer.Preemptible().Obj()
			newcomer.Submit = now
			p := New(Config{Policy: Corral}).Cycle(&Snapshot{State: s, Now: now,
				Pending: pendingOf(hi, newcomer), Running: running})
			if len(evicted(p)) > 0 {
				t.Fatalf("evicted %v: the evictor does not fit yet", evicted(p))
			}
			if got := outcomeOf(p, "new").Placed; got != tc.wantPlaced {
				t.Fatalf("newcomer placed %v, want %v; reason %q", got, tc.wantPlaced, reasonOf(p, "new").Message)
			}
			if !tc.wantPlaced && !strings.Contains(reasonOf(p, "new").Message, "held for job hi (priority 100)") {
				t.Errorf("reason %q does not name the evictor", reasonOf(p, "new").Message)
			}
		})
	}
}

// TestStarvedStartProtectsOnlyFromLaterPreemptors: a job that started only
// after waiting past the starvation age is not evicted for priority by a
// job submitted after it started, but is by one that already waited when
// it started (it was kept off that job's room until it starved; protected,
// it would block that job in turn: gen:llm tuning seed 44).
func TestStarvedStartProtectsOnlyFromLaterPreemptors(t *testing.T) {
	cases := map[string]struct {
		hiSubmitted time.Duration // before now
		wantEvict   bool
	}{
		"submitted after the starved job started: it stays":     {hiSubmitted: time.Hour},
		"waiting already when the starved job started: evicted": {hiSubmitted: 3 * time.Hour, wantEvict: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := t0.Add(30 * 24 * time.Hour)
			s := build.State(build.Topo("rack"), build.Racks(1, 1))
			starved := build.Job("starved").GPUs(8).Preemptible().Obj()
			starved.Submit = now.Add(-2*time.Hour - 2*DefaultStarveAfter)
			running := []RunningJob{pin(t, s, starved, now.Add(-2*time.Hour), "r0-n-0")}
			hi := build.Job("hi").GPUs(8).Priority(100).Obj()
			hi.Submit = now.Add(-tc.hiSubmitted)
			p := New(Config{Policy: Corral, CheckpointWait: -1}).Cycle(&Snapshot{State: s, Now: now,
				Pending: pendingOf(hi), Running: running})
			if got := len(evicted(p)) == 1; got != tc.wantEvict {
				t.Fatalf("evicted %v, want eviction %v; reason %q", evicted(p), tc.wantEvict, reasonOf(p, "hi").Message)
			}
		})
	}
}
