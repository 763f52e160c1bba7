package backfill

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// TestHeldRoom: one rack of three 8-GPU nodes; "a" on node 0 is expected
// to end in 1 h, "b" on node 1 in 3 h, "c" on node 2 declares no runtime
// and never ends. The blocked job "j" (one 8-GPU pod, 10 h unless the
// case says otherwise) asks how long it waits for room backfill holds for
// it. Jobs in before were blocked earlier in the cycle and took a
// reservation each. Whatever HeldRoom answers, Blocked then does: it
// reserves j's room at that start, or reserves none.
func TestHeldRoom(t *testing.T) {
	type before struct{ id, queue string }
	cases := map[string]struct {
		greedy   bool // Greedy mode instead of EASY
		cfg      Config
		aOverdue bool // "a" started 3 h ago declaring 1 h: its end (in 3 h) is extended, confidence 0.5
		before   []before
		pods     int           // j's 8-GPU pods, bound to the rack; 0: one
		runtime  time.Duration // j's declared runtime; 0: 10 h
		queue    string
		wantWait time.Duration
		wantOK   bool
	}{
		"no reservation yet: the start Blocked would give it": {wantWait: time.Hour, wantOK: true},
		"its own reservation's start, though the caps are spent since": {
			before: []before{{id: "j"}}, wantWait: time.Hour, wantOK: true,
		},
		"the cycle's one reservation went to another job": {before: []before{{id: "k"}}},
		"its queue's one reservation went to another job of the queue": {
			cfg: Config{MaxReservations: 2}, before: []before{{id: "k", queue: "q"}}, queue: "q",
		},
		"another queue's reservation leaves it one, off the nodes held for that job": {
			cfg: Config{MaxReservations: 2}, before: []before{{id: "k", queue: "p"}}, queue: "q",
			wantWait: 3 * time.Hour, wantOK: true,
		},
		"the start is a guess (an extended estimate, confidence 0.5 < 0.7)": {aOverdue: true},
		"a guess is held when any confidence will do": {
			cfg: Config{ReserveConfidence: -1}, aOverdue: true, wantWait: 3 * time.Hour, wantOK: true,
		},
		"holding not worth it: 16 GPU-hours idle for 2.7 GPU-hours of work": {pods: 2, runtime: 10 * time.Minute},
		"holding worth it: 16 GPU-hours idle for 32 GPU-hours of work": {
			pods: 2, runtime: 2 * time.Hour, wantWait: 3 * time.Hour, wantOK: true,
		},
		"nothing in its way is expected to end":   {pods: 3},
		"not EASY backfill: nothing is ever held": {greedy: true},
	}
	now := time.Unix(1_000_000, 0).UTC()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(1, 3))
			aStart := now
			if tc.aOverdue {
				aStart = now.Add(-3 * time.Hour)
			}
			running := []cycle.RunningJob{
				runOnNode(t, s, build.Job("a").GPUs(8).Expected(time.Hour).Obj(), 0, aStart),
				runOnNode(t, s, build.Job("b").GPUs(8).Expected(3*time.Hour).Obj(), 1, now),
				runOnNode(t, s, build.Job("c").GPUs(8).Obj(), 2, now),
			}
			l := newCycleLedger(&cycle.Snapshot{State: s, Now: now, Running: running, Runtimes: &History{}})
			mode := EASY
			if tc.greedy {
				mode = Greedy
			}
			b := NewCycle(tc.cfg, mode, l)
			blockedJob := func(j *workload.Job, required string) cycle.Reason {
				b.Admit(j)
				return b.Blocked(j, gangOf(s, j, required), waitFree)
			}
			pods, runtime := max(tc.pods, 1), tc.runtime
			if runtime == 0 {
				runtime = 10 * time.Hour
			}
			j := build.Job("j").Queue(tc.queue).Pods(pods).GPUs(8).Expected(runtime).Obj()
			for _, bf := range tc.before {
				bj := build.Job(bf.id).Queue(bf.queue).GPUs(8).Expected(10 * time.Hour).Obj()
				if bf.id == "j" {
					bj = j
				}
				blockedJob(bj, "rack")
				if len(l.reserved) == 0 || l.reserved[len(l.reserved)-1].Job != bj.ID {
					t.Fatalf("%s blocked before j got no reservation: %+v", bf.id, l.reserved)
				}
			}
			b.Admit(j)
			wait, ok := b.HeldRoom(j, gangOf(s, j, "rack"))
			if ok != tc.wantOK || wait != tc.wantWait {
				t.Fatalf("HeldRoom = %v, %v; want %v, %v", wait, ok, tc.wantWait, tc.wantOK)
			}
			if len(tc.before) > 0 && tc.before[0].id == "j" {
				return
			}
			// Blocked agrees: it reserves j's room at that start, or none.
			reserved := len(l.reserved)
			r := blockedJob(j, "rack")
			switch {
			case ok && (len(l.reserved) != reserved+1 || !l.reserved[reserved].Start.Equal(now.Add(wait))):
				t.Errorf("Blocked reserved %+v after HeldRoom said %v; reason %q", l.reserved[reserved:], wait, r.Message)
			case !ok && len(l.reserved) != reserved:
				t.Errorf("Blocked reserved %+v after HeldRoom said no room is held", l.reserved[reserved:])
			}
		})
	}
}
