package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

// TestStarvationAge: a gang that has waited past the starvation age keeps
// its room even from jobs ahead of it in the order (higher priority), unless
// they end before it starts. The gang runs 4 h on 16 GPUs, so a reservation
// that idles a node for up to 4 h is worth holding.
func TestStarvationAge(t *testing.T) {
	cases := map[string]struct {
		starve     time.Duration
		waited     time.Duration
		hp         *workload.Job
		wantPlaced bool
	}{
		"starved: a higher-priority job may not take its room": {waited: 25 * time.Hour,
			hp: build.Job("hp").GPUs(8).Priority(10).Expected(5 * time.Hour).Obj()},
		"starved: one that ends first may": {waited: 25 * time.Hour,
			hp: build.Job("hp").GPUs(8).Priority(10).Expected(30 * time.Minute).Obj(), wantPlaced: true},
		"not starved yet: priority wins": {waited: 23 * time.Hour,
			hp: build.Job("hp").GPUs(8).Priority(10).Expected(5 * time.Hour).Obj(), wantPlaced: true},
		"starvation age turned off": {starve: -1, waited: 25 * time.Hour,
			hp: build.Job("hp").GPUs(8).Priority(10).Expected(5 * time.Hour).Obj(), wantPlaced: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, build.State(build.Topo("rack"), build.Racks(1, 2)),
				Config{Policy: Corral, Backfill: BackfillConfig{StarveAfter: tc.starve}})
			w.now = t0.Add(tc.waited)
			w.run(min8("busy", 60), "r0-n-0")
			tc.hp.Submit = w.now
			head := build.Job("head").GPUs(8).Pods(2).Expected(4 * time.Hour).Obj()
			head.Submit = t0
			w.submit(head, tc.hp)
			p := w.runCycle()
			if got := outcomeOf(p, "hp").Placed; got != tc.wantPlaced {
				t.Errorf("hp placed = %v, want %v (reservations %+v)", got, tc.wantPlaced, p.Reservations)
			}
			if len(p.Reservations) != 1 || p.Reservations[0].Job != "head" {
				t.Fatalf("reservations %+v, want one for head", p.Reservations)
			}
			starved := tc.waited >= DefaultStarveAfter && tc.starve >= 0
			if got := p.Stats.StarvedReservations == 1; got != starved {
				t.Errorf("StarvedReservations = %d, want starved %v", p.Stats.StarvedReservations, starved)
			}
			for _, pe := range p.Pending {
				if pe.Job == "head" && starved && !strings.Contains(pe.Reason.Message, "(waiting past the starvation age)") {
					t.Errorf("head reason %q", pe.Reason.Message)
				}
			}
		})
	}
}

// TestStarvedLargestFirst: of two starved jobs the larger is reserved ahead
// of everything, even when the smaller one is older.
func TestStarvedLargestFirst(t *testing.T) {
	w := newWorld(t, build.State(build.Topo("rack"), build.Racks(1, 2)), Config{Policy: Corral})
	w.now = t0
	w.run(min8("busy", 60), "r0-n-0")
	small := build.Job("small").GPUs(8).Expected(5 * time.Hour).Obj()
	big := build.Job("big").GPUs(8).Pods(2).Expected(time.Hour).Obj()
	small.Submit, big.Submit = t0, t0.Add(time.Minute)
	w.advance(t0.Add(30 * time.Hour))
	w.submit(small, big)
	p := w.runCycle()
	if outcomeOf(p, "small").Placed {
		t.Errorf("the small job took the big job's room")
	}
	if len(p.Reservations) == 0 || p.Reservations[0].Job != "big" || p.Stats.StarvedReservations == 0 {
		t.Errorf("reservations %+v, want big's first", p.Reservations)
	}
}

// TestStarvedJobEvictsStragglers: a starved 16-GPU gang waits 8 h for one
// small long job (started 2 h ago, an hour before the gang starved) while
// the rest of its rack frees in 30 min. The straggler
// is evicted only when it is small (at most 1/8 of the gang's GPUs),
// preemptible, of no higher priority, and loses little work next to the
// time the gang gains; then the reservation starts at 30 min. The gang runs
// 10 h, so holding its nodes 8 h is worth it either way.
func TestStarvedJobEvictsStragglers(t *testing.T) {
	straggler := func(gpus int, prio int32, preemptible bool, expected time.Duration) *workload.Job {
		b := build.Job("straggler").GPUs(gpus).Priority(prio).Expected(expected)
		if preemptible {
			b = b.Preemptible()
		}
		return b.Obj()
	}
	cases := map[string]struct {
		job     *workload.Job
		ran     time.Duration // before now, without checkpoints
		waited  time.Duration // the gang's wait
		evicted bool
		// headRuns is the gang's runtime (0: 10 h); noHold: its hold
		// would idle more than that (WorthHolding), so it gets none.
		headRuns time.Duration
		noHold   bool
	}{
		"small, cheap and long: evicted":         {job: straggler(1, 0, true, 10*time.Hour), ran: 2 * time.Hour, waited: 25 * time.Hour, evicted: true},
		"not preemptible: kept":                  {job: straggler(1, 0, false, 10*time.Hour), ran: 2 * time.Hour, waited: 25 * time.Hour},
		"higher priority than the gang: kept":    {job: straggler(1, 5, true, 10*time.Hour), ran: 2 * time.Hour, waited: 25 * time.Hour},
		"more than 1/8 of the gang's GPUs: kept": {job: straggler(4, 0, true, 10*time.Hour), ran: 2 * time.Hour, waited: 25 * time.Hour},
		"too much work lost: kept":               {job: straggler(1, 0, true, 49*time.Hour), ran: 40 * time.Hour, waited: 25 * time.Hour},
		"the gang is not starved yet: kept":      {job: straggler(1, 0, true, 10*time.Hour), ran: time.Hour, waited: time.Hour},
		// It started 30 min after the gang starved: corral let it in then
		// (the gang's hold was not made in that cycle); evicting it now
		// undoes that decision, and did so cycle after cycle.
		"started after the gang starved: kept": {job: straggler(1, 0, true, 10*time.Hour), ran: 30 * time.Minute, waited: 25 * time.Hour},
		// The gang counts as starved from the starvation age itself
		// (pastStarvation): a job let in at that instant was let in
		// while it starved.
		"started the moment the gang starved: kept": {job: straggler(1, 0, true, 10*time.Hour), ran: time.Hour, waited: 25 * time.Hour},
		// 68.5 GPU-hours idle for a 16-GPU-hour gang: nothing is evicted
		// for a hold that is not made.
		"the hold is not worth it: kept": {job: straggler(1, 0, true, 10*time.Hour), ran: 2 * time.Hour, waited: 25 * time.Hour,
			headRuns: time.Hour, noHold: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, build.State(build.Topo("rack"), build.Racks(1, 2)), Config{Policy: Corral})
			now := t0.Add(tc.waited)
			w.now = now.Add(-tc.ran)
			tc.job.Submit = w.now
			w.run(tc.job, "r0-n-0")
			w.now = now
			busy := build.Job("busy").GPUs(7).Expected(30 * time.Minute).Obj()
			busy.Submit = now
			w.run(busy, "r0-n-1")
			runs := tc.headRuns
			if runs == 0 {
				runs = 10 * time.Hour
			}
			head := build.Job("head").GPUs(8).Pods(2).Expected(runs).Obj()
			head.Submit = t0
			w.submit(head)
			p := w.runCycle()
			var evicted []workload.JobID
			for _, ev := range p.Evictions {
				evicted = append(evicted, ev.Job)
			}
			want, start := []workload.JobID(nil), tc.job.ExpectedRuntime-tc.ran
			if tc.evicted {
				want, start = []workload.JobID{"straggler"}, 30*time.Minute
			}
			if !cmp.Equal(evicted, want) {
				t.Errorf("evicted %v, want %v", evicted, want)
			}
			if tc.noHold {
				if len(p.Reservations) != 0 {
					t.Errorf("reservations %+v, want none", p.Reservations)
				}
				return
			}
			if len(p.Reservations) != 1 || !p.Reservations[0].Start.Equal(now.Add(start)) {
				t.Errorf("reservations %+v, want head's in %v", p.Reservations, start)
			}
		})
	}
}

func TestMaxRuntime(t *testing.T) {
	cases := map[string]struct {
		action       MaxRuntimeAction
		ran          time.Duration
		wantEvict    bool
		wantTerminal bool
	}{
		"within its limit":       {ran: 59 * time.Minute},
		"past it: terminated":    {ran: 61 * time.Minute, wantEvict: true, wantTerminal: true},
		"past it: requeued":      {action: Requeue, ran: 61 * time.Minute, wantEvict: true},
		"exactly at it: evicted": {ran: time.Hour, wantEvict: true, wantTerminal: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, build.State(build.Topo("rack"), build.Racks(1, 1)), Config{Policy: Corral,
				Backfill: BackfillConfig{OnMaxRuntime: tc.action}})
			w.run(build.Job("long").GPUs(8).MaxRuntime(time.Hour).Expected(10*time.Hour).Obj(), "r0-n-0")
			w.advance(bfEpoch.Add(tc.ran))
			w.submit(min8("next", 30))
			p := w.runCycle()
			if got := len(p.Evictions) == 1; got != tc.wantEvict {
				t.Fatalf("evictions %+v, want one: %v", p.Evictions, tc.wantEvict)
			}
			if !tc.wantEvict {
				return
			}
			ev := p.Evictions[0]
			if ev.Cause != CauseMaxRuntime || ev.Terminal != tc.wantTerminal || !strings.Contains(ev.Message, "past its max runtime 1h0m0s") {
				t.Errorf("eviction %+v", ev)
			}
			if !outcomeOf(p, "next").Placed {
				t.Errorf("the freed node was not reused in the same cycle")
			}
		})
	}
}

// TestStarvedReservationWorthHolding: a starved 16-GPU gang waits 10 h for
// a job on one of two nodes; holding the other idles 8 GPUs for 10 h (80
// GPU-hours). A gang that will run 1 h (16 GPU-hours) is not worth that:
// no reservation, and a 12-hour job takes the free node, as greedy backfill
// would. One that will run 6 h (96 GPU-hours) is: the node is held.
func TestStarvedReservationWorthHolding(t *testing.T) {
	cases := map[string]struct {
		runtime    time.Duration
		wantHeld   bool
		wantFiller bool
	}{
		"runs 1 h: not worth 80 idle GPU-hours": {runtime: time.Hour, wantFiller: true},
		"runs 6 h: worth them":                  {runtime: 6 * time.Hour, wantHeld: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, build.State(build.Topo("rack"), build.Racks(1, 2)), Config{Policy: Corral})
			w.now = t0.Add(25 * time.Hour)
			w.run(min8("long", 600), "r0-n-0")
			head := build.Job("head").GPUs(8).Pods(2).Expected(tc.runtime).Obj()
			head.Submit = t0
			filler := min8("filler", 12*60)
			filler.Submit = w.now
			w.submit(head, filler)
			p := w.runCycle()
			if got := len(p.Reservations) == 1 && p.Stats.StarvedReservations == 1; got != tc.wantHeld {
				t.Errorf("reservations %+v (starved %d), want held %v", p.Reservations, p.Stats.StarvedReservations, tc.wantHeld)
			}
			if got := outcomeOf(p, "filler").Placed; got != tc.wantFiller {
				t.Errorf("filler placed = %v, want %v", got, tc.wantFiller)
			}
			for _, pe := range p.Pending {
				if pe.Job == "head" && !tc.wantHeld && !strings.Contains(pe.Reason.Message, "would idle 80 GPU-hours, more than the 16 it is expected to use") {
					t.Errorf("head reason %q", pe.Reason.Message)
				}
			}
		})
	}
}

// TestStarvedReservationNeedsAConfidentStart: a starved 16-GPU, 100-hour
// gang waits for a job that declared 1 h and has run 3 h. Its estimate is
// extended (to 6 h) at half the confidence: the gang's start is a guess
// (0.5 < DefaultReserveConfidence). On two nodes the gang is the whole
// cluster: no node is held for it and a 12-hour job takes the free one;
// told to reserve whatever the confidence, corral holds it. On four nodes
// (two running 200-hour jobs) it is half the cluster and is not held on
// the guess either (holding such jobs on a guess raised the 4,000-job
// trace's preemption loss, docs/backfill.md), with queues or without.
func TestStarvedReservationNeedsAConfidentStart(t *testing.T) {
	for name, tc := range map[string]struct {
		nodes      int
		conf       float64
		queues     bool
		wantHeld   bool
		wantFiller bool
	}{
		"whole cluster, a guess: not held":             {nodes: 2, wantFiller: true},
		"whole cluster, reserve whatever: held for it": {nodes: 2, conf: -1, wantHeld: true},
		"half the cluster, a guess: not held":          {nodes: 4, wantFiller: true},
		"half the cluster, reserve whatever: held":     {nodes: 4, conf: -1, wantHeld: true},
		"with queues, a guess: not held":               {nodes: 4, queues: true, wantFiller: true},
		"with queues, reserve whatever: held for it":   {nodes: 4, queues: true, conf: -1, wantHeld: true},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, build.State(build.Topo("rack"), build.Racks(1, tc.nodes)),
				Config{Policy: Corral, Backfill: BackfillConfig{ReserveConfidence: tc.conf}})
			queueName := ""
			if tc.queues {
				queueName, w.queues = "team", []queue.Spec{{Name: "team"}}
			}
			inQueue := func(j *workload.Job) *workload.Job { j.Queue = queueName; return j }
			w.now = t0.Add(22 * time.Hour)
			w.run(inQueue(min8("overdue", 60)), "r0-n-0")
			w.now = t0.Add(25 * time.Hour)
			for n := 1; n < tc.nodes-1; n++ {
				w.run(inQueue(min8(fmt.Sprintf("long%d", n), 200*60)), fmt.Sprintf("r0-n-%d", n))
			}
			head := build.Job("head").Queue(queueName).GPUs(8).Pods(2).Expected(100 * time.Hour).Obj()
			head.Submit = t0
			filler := inQueue(min8("filler", 12*60))
			filler.Submit = w.now
			w.submit(head, filler)
			p := w.runCycle()
			if got := p.Stats.StarvedReservations == 1; got != tc.wantHeld {
				t.Errorf("starved reservations %d (%+v), want held %v", p.Stats.StarvedReservations, p.Reservations, tc.wantHeld)
			}
			if got := outcomeOf(p, "filler").Placed; got != tc.wantFiller {
				t.Errorf("filler placed = %v, want %v", got, tc.wantFiller)
			}
		})
	}
}

// TestStarvedShortestFirstAmongEquals: of two starved gangs of the same
// size, the one expected to run shorter is reserved first even when it is
// younger (whichever runs first holds the other back by its runtime);
// with equal estimates the older goes first.
func TestStarvedShortestFirstAmongEquals(t *testing.T) {
	for name, tc := range map[string]struct {
		olderRuns, youngerRuns time.Duration
		queues                 bool
		want                   workload.JobID
	}{
		"the shorter first, though younger": {olderRuns: 50 * time.Hour, youngerRuns: time.Hour, want: "younger"},
		"equal estimates: the older first":  {olderRuns: time.Hour, youngerRuns: time.Hour, want: "older"},
		"the older is shorter":              {olderRuns: time.Hour, youngerRuns: 50 * time.Hour, want: "older"},
		"with queues, the older first":      {olderRuns: 50 * time.Hour, youngerRuns: time.Hour, queues: true, want: "older"},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, build.State(build.Topo("rack"), build.Racks(1, 2)), Config{Policy: Corral})
			queueName := ""
			if tc.queues {
				queueName, w.queues = "team", []queue.Spec{{Name: "team"}}
			}
			w.now = t0.Add(30 * time.Hour)
			busy := min8("busy", 60)
			busy.Queue = queueName
			w.run(busy, "r0-n-0")
			older := build.Job("older").Queue(queueName).GPUs(8).Pods(2).Expected(tc.olderRuns).Obj()
			younger := build.Job("younger").Queue(queueName).GPUs(8).Pods(2).Expected(tc.youngerRuns).Obj()
			older.Submit, younger.Submit = t0, t0.Add(time.Hour)
			w.submit(older, younger)
			p := w.runCycle()
			if len(p.Reservations) == 0 || p.Reservations[0].Job != tc.want || p.Stats.StarvedReservations == 0 {
				t.Errorf("reservations %+v (starved %d), want %s's first", p.Reservations, p.Stats.StarvedReservations, tc.want)
			}
		})
	}
}

// TestStarvedJobOverItsQueueLimitHoldsNothing: a starved job that its own
// queue's limit keeps waiting gets no reservation (room held for it would
// only idle), so other queues' jobs still start; asking for more than the
// limit itself, it is told it can never start there.
func TestStarvedJobOverItsQueueLimitHoldsNothing(t *testing.T) {
	cases := map[string]struct {
		limit   int64 // queue a's, in GPUs
		aHolds  bool  // a's running job on r0-n-0
		wantWhy string
	}{
		"asks more than the limit": {limit: 8, wantWhy: `queue "a"'s limit of gpu/H100 is 8 H100 GPUs and the job asks 16 H100 GPUs: it cannot start in this queue unless the limit is raised`},
		"at the limit for now":     {limit: 16, aHolds: true, wantWhy: `queue "a" would pass its limit of gpu/H100`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := t0.Add(48 * time.Hour)
			s := build.State(build.Topo("rack"), build.Racks(1, 3))
			var running []RunningJob
			if tc.aHolds {
				running = append(running, victim{id: "a-run", nodes: []string{"r0-n-0"}, ago: time.Hour, queue: "a"}.run(t, s, now))
			}
			qs := []queue.Spec{{Name: "a", Limit: h100(tc.limit)}, {Name: "b"}}
			big := build.Job("big").Queue("a").Pods(2).GPUs(8).Obj()
			big.Submit = t0 // starved
			small := build.Job("small").Queue("b").GPUs(8).Obj()
			small.Submit = now
			p := New(Config{Policy: Corral}).Cycle(&Snapshot{State: s, Pending: pendingOf(big, small), Running: running, Queues: qs, Now: now})
			if len(p.Reservations) != 0 {
				t.Errorf("reservations %+v, want none", p.Reservations)
			}
			if !outcomeOf(p, "small").Placed {
				t.Errorf("small not placed: %+v", p.Pending)
			}
			for _, pe := range p.Pending {
				if pe.Job == "big" && !strings.Contains(pe.Reason.Message, tc.wantWhy) {
					t.Errorf("big's reason %q, want %q", pe.Reason.Message, tc.wantWhy)
				}
			}
		})
	}
}

// TestStarvedAfterAStreak: once starved jobs of at least half the cluster
// have held it back to back for longer than the starvation age (the
// history's spans of their runs), a smaller starved job is bound ahead of
// the next one when that head could start now and the small job is
// expected to end within the head's runtime; the head reserves behind it.
// After a shorter streak, a pause, runs that had not starved, or with
// queues, the largest goes first as before. The cluster is two 8-GPU
// nodes; each big job takes both and runs 10 h.
func TestStarvedAfterAStreak(t *testing.T) {
	type run struct {
		startH, endH float64 // hours from now
		waited       time.Duration
		gpus         int64 // 0: the whole cluster, 16
	}
	streak := func(hours ...float64) []run {
		var out []run
		for i := 0; i+1 < len(hours); i += 2 {
			out = append(out, run{startH: hours[i], endH: hours[i+1], waited: 30 * time.Hour})
		}
		return out
	}
	for name, tc := range map[string]struct {
		served    []run         // whole-cluster runs completed, each 16 GPUs
		small     time.Duration // the small starved job's runtime (0: 5 h)
		busy      bool          // both nodes run a 1-hour job
		queues    bool          // the jobs are in a queue
		wantSmall bool          // the small starved job is placed
		// wantStart is when big-0's reservation starts, from now.
		wantStart time.Duration
	}{
		"after 30 h of starved jobs: bound first": {served: streak(-30, -20, -20, -10, -10, 0), wantSmall: true, wantStart: 5 * time.Hour},
		"after 20 h: the largest first":           {served: streak(-20, -10, -10, 0)},
		"a pause of an hour ends the streak":      {served: streak(-31, -21, -20, -10, -10, 0)},
		"runs that had not starved do not count":  {served: []run{{startH: -30, endH: -20, waited: time.Hour}, {startH: -20, endH: -10, waited: time.Hour}, {startH: -10, endH: 0, waited: 30 * time.Hour}}},
		"its room is busy: holds none, lets none": {served: streak(-30, -20, -20, -10, -10, 0), busy: true, wantStart: time.Hour},
		"with queues: the largest first":          {served: streak(-30, -20, -20, -10, -10, 0), queues: true},
		"longer than the head: the largest first": {served: streak(-30, -20, -20, -10, -10, 0), small: 11 * time.Hour},
		"no streak reported: the largest first":   {},
		"half-cluster runs count":                 {served: []run{{startH: -30, endH: -10, waited: 30 * time.Hour, gpus: 8}, {startH: -10, endH: 0, waited: 30 * time.Hour, gpus: 8}}, wantSmall: true, wantStart: 5 * time.Hour},
		"smaller runs do not":                     {served: []run{{startH: -30, endH: -10, waited: 30 * time.Hour, gpus: 4}, {startH: -10, endH: 0, waited: 30 * time.Hour, gpus: 4}}},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, build.State(build.Topo("rack"), build.Racks(1, 2)), Config{Policy: Corral})
			queueName := ""
			if tc.queues {
				queueName, w.queues = "team", []queue.Spec{{Name: "team"}}
			}
			w.now = t0.Add(100 * time.Hour)
			w.hist = &backfill.History{}
			at := func(h float64) time.Time { return w.now.Add(time.Duration(h * float64(time.Hour))) }
			for _, r := range tc.served {
				gpus := r.gpus
				if gpus == 0 {
					gpus = 16
				}
				w.hist.ObserveRun(cycle.Run{Shape: fmt.Sprintf("%dgpu", gpus), Took: at(r.endH).Sub(at(r.startH)),
					Span: cycle.Span{Start: at(r.startH), End: at(r.endH), GPUMilli: gpus * 1000, Waited: r.waited}})
			}
			if tc.busy {
				for i, n := range []string{"r0-n-0", "r0-n-1"} {
					b := min8(fmt.Sprintf("busy-%d", i), 60)
					b.Queue = queueName
					w.run(b, n)
				}
			}
			for i := range 3 {
				big := build.Job(fmt.Sprintf("big-%d", i)).Queue(queueName).GPUs(8).Pods(2).Expected(10 * time.Hour).Obj()
				big.Submit = t0.Add(time.Duration(i) * time.Minute)
				w.submit(big)
			}
			if tc.small == 0 {
				tc.small = 5 * time.Hour
			}
			small := build.Job("small").Queue(queueName).GPUs(8).Expected(tc.small).Obj()
			small.Submit = t0.Add(70 * time.Hour)
			w.submit(small)
			p := w.runCycle()
			if got := outcomeOf(p, "small").Placed; got != tc.wantSmall {
				t.Errorf("small placed = %v, want %v (reservations %+v)", got, tc.wantSmall, p.Reservations)
			}
			if got := p.Stats.StarvedLetIn == 1; got != tc.wantSmall {
				t.Errorf("StarvedLetIn = %d, want the small job's %v", p.Stats.StarvedLetIn, tc.wantSmall)
			}
			if len(p.Reservations) == 0 || p.Reservations[0].Job != "big-0" {
				t.Fatalf("reservations %+v, want big-0's first", p.Reservations)
			}
			if got := p.Reservations[0].Start.Sub(w.now); got != tc.wantStart {
				t.Errorf("big-0's reservation starts in %s, want %s", got, tc.wantStart)
			}
			for _, rv := range p.Reservations {
				if rv.Job == "small" {
					t.Errorf("the small job holds room: %+v", rv)
				}
			}
		})
	}
}
