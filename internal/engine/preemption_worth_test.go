package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/queue"
)

// TestPriorityPreemptionMustBeWorthIt: a higher-priority job does not evict
// a job that its runtime history says ends within minutes when the
// eviction throws away far more work than the wait would cost (gen:llm
// seed 52: 1,343 GPU-hours lost to start a whole-cluster job six minutes
// sooner); it still evicts when the victim has long to go, or when nothing
// predicts the victim's end, unless the preemptor is expected to run so
// briefly that the victim would lose more than Config.MaxLostPerWork
// (default 2) times its work; the operator may change that factor or turn
// the bound off.
func TestPriorityPreemptionMustBeWorthIt(t *testing.T) {
	ran := 167*time.Hour + 54*time.Minute // no checkpoint: all of it is lost
	cases := map[string]struct {
		pastRuns       time.Duration // completed runs like the victim's (0: no history)
		hiRuns         time.Duration // the preemptor's declared runtime (0: none)
		maxLostPerWork float64       // Config.MaxLostPerWork (0: the default)
		wantEvict      bool
		wantWhy        string
	}{
		// The victim loses 1,343 GPU-hours; the preemptor's 16 GPUs would
		// do 2.7 GPU-hours in ten minutes (DefaultMaxLostPerWork).
		"ten more days to go, but the preemptor runs ten minutes: it waits": {
			pastRuns: 408 * time.Hour, hiRuns: 10 * time.Minute,
			wantWhy: "more than 2× the 3 GPU-hours it is expected to run",
		},
		"the same with the bound off: the ten days' wait decides, evicted": {
			pastRuns: 408 * time.Hour, hiRuns: 10 * time.Minute, maxLostPerWork: -1, wantEvict: true,
		},
		"the same with a bound of 1,000×: evicted": {
			pastRuns: 408 * time.Hour, hiRuns: 10 * time.Minute, maxLostPerWork: 1000, wantEvict: true,
		},
		"ten more days to go, and the preemptor runs a week: evicted": {
			pastRuns: 408 * time.Hour, hiRuns: 168 * time.Hour, wantEvict: true,
		},
		"the same with a bound of 0.25× its 2,688 GPU-hours: it waits": {
			pastRuns: 408 * time.Hour, hiRuns: 168 * time.Hour, maxLostPerWork: 0.25,
			wantWhy: "more than 0.25× the 2688 GPU-hours it is expected to run",
		},
		"nothing predicts its end, the preemptor runs ten minutes: it waits": {
			hiRuns: 10 * time.Minute, wantWhy: "preemption not worth it",
		},
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
			hi := build.Job("hi").Pods(2).GPUs(8).Priority(100).Expected(tc.hiRuns).Obj()
			hi.Submit = now
			p := New(Config{Policy: Corral, CheckpointWait: -1, MaxLostPerWork: tc.maxLostPerWork}).Cycle(&Snapshot{State: s, Now: now,
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

// TestPriorityPreemptionBuysOnlyTheWaitForRoom: the worth check weighs the
// victims' lost work against how long the preemptor would really wait,
// and room can free elsewhere before the victims end. Here a long victim
// (no checkpoint, ten days to go) sits beside a job that cannot be
// evicted and ends in ten minutes: evicting would throw away 1,343
// GPU-hours to start ten minutes sooner (gen:llm 4,000 jobs, tuning seed
// 46: a 32-GPU job of one minute evicted 1,687 GPU-hours of jobs that had
// run for days, weighed against the 70 hours the last of them was
// expected to run on). When that other job runs on for a month, the
// victims' end sets the wait and the eviction goes ahead. With queues,
// room that no reservation holds for the preemptor (here: reservations
// off, as when its queue's one reservation went to another job) buys
// nothing: jobs that fit first take it (queues workload, tuning seed 42).
func TestPriorityPreemptionBuysOnlyTheWaitForRoom(t *testing.T) {
	ran := 167*time.Hour + 54*time.Minute
	cases := map[string]struct {
		otherLeft      time.Duration // the non-preemptible job's expected remaining runtime
		queues         bool
		noReservations bool
		wantEvict      bool
	}{
		"room frees in ten minutes without evicting: the preemptor waits":     {otherLeft: 10 * time.Minute},
		"room frees only in a month: the victim's end sets the wait, evicted": {otherLeft: 30 * 24 * time.Hour, wantEvict: true},
		"no queues, nothing holds the room: the preemptor still waits": {
			otherLeft: 10 * time.Minute, noReservations: true,
		},
		"queues, its reservation holds the room: the preemptor waits": {
			otherLeft: 10 * time.Minute, queues: true,
		},
		"queues, nothing holds the room for the job: evicted": {
			otherLeft: 10 * time.Minute, queues: true, noReservations: true, wantEvict: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := t0.Add(30 * 24 * time.Hour)
			s := build.State(build.Topo("rack"), build.Racks(1, 3))
			queueName := ""
			var queues []queue.Spec
			if tc.queues {
				queueName, queues = "team", []queue.Spec{{Name: "team"}}
			}
			long := build.Job("long").Queue(queueName).GPUs(8).Preemptible().Obj()
			long.Submit = now.Add(-ran)
			other := build.Job("other").Queue(queueName).GPUs(8).Expected(time.Hour + tc.otherLeft).Obj()
			other.Submit = now.Add(-time.Hour)
			running := []RunningJob{
				pin(t, s, long, now.Add(-ran), "r0-n-0"),
				pin(t, s, other, now.Add(-time.Hour), "r0-n-1"),
			}
			hist := &backfill.History{}
			past := build.Job("past").GPUs(8).Obj()
			for i := 0; i < 10; i++ {
				hist.Observe(past, 408*time.Hour) // the long victim has ten days to go
			}
			hi := build.Job("hi").Queue(queueName).Pods(2).GPUs(8).Priority(100).Obj()
			hi.Submit = now
			cfg := Config{Policy: Corral, CheckpointWait: -1}
			if tc.noReservations {
				cfg.Backfill.MaxReservations = -1
			}
			p := New(cfg).Cycle(&Snapshot{State: s, Now: now,
				Pending: pendingOf(hi), Running: running, Runtimes: hist, Queues: queues})
			if got := len(evicted(p)) == 1; got != tc.wantEvict {
				t.Fatalf("evicted %v, want eviction %v; reason %q", evicted(p), tc.wantEvict, reasonOf(p, "hi").Message)
			}
			if !tc.wantEvict && !strings.Contains(reasonOf(p, "hi").Message, "room for it is expected to free without evicting within 10m") {
				t.Errorf("reason %q does not say room frees within 10m", reasonOf(p, "hi").Message)
			}
		})
	}
}
