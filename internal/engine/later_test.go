package engine

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/workload"
)

// TestLaterMembersHoldTheirRoom: a gang whose controller creates the rest
// only after the first member is placed (LeaderWorkerSet under
// LeaderReady) gets its first member bound and the others' room held
// beside it, in the plan and again in every later cycle read from the
// snapshot alone, until the hold times out; a member that now exists is
// placed into that room before a job that would take it.
func TestLaterMembersHoldTheirRoom(t *testing.T) {
	const holdFor = 5 * time.Minute
	cases := map[string]struct {
		boundAgo   time.Duration // 0: nothing bound yet
		created    int           // workers created, waiting (of 3)
		wantBinds  map[string]int
		wantHeld   int // members held for
		otherWaits bool
	}{
		"first cycle: the leader is bound, the workers' room held": {
			wantBinds: map[string]int{"lws": 1, "other": 1}, wantHeld: 3,
		},
		"the leader runs: the workers' room stays held": {
			boundAgo: time.Minute, wantBinds: map[string]int{}, wantHeld: 3, otherWaits: true,
		},
		"a worker appears: placed into the room, the rest held": {
			boundAgo: time.Minute, created: 1, wantBinds: map[string]int{"lws": 1}, wantHeld: 2, otherWaits: true,
		},
		"past the hold: the room is anyone's": {
			boundAgo: 10 * time.Minute, wantBinds: map[string]int{"other": 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// One rack of two 8-GPU nodes; n-1 has 2 GPUs free.
			w := newWorld(t, build.State(build.Topo("rack"), build.Racks(1, 2)), Config{Policy: Corral})
			snap := &Snapshot{State: w.s, Now: w.now}
			busy := build.Job("busy").GPUs(6).Obj()
			w.run(busy, "r0-n-1")
			snap.Running = append(snap.Running, *w.running[busy.ID])
			lws := build.Job("lws").Pods(4).GPUs(2).Priority(1).Obj()
			var later []workload.PodRef
			for i := 1 + tc.created; i < 4; i++ {
				later = append(later, workload.PodRef{Job: lws.ID, Index: i})
			}
			lm := LaterMembers{Job: lws.ID, Pods: later, HoldFor: holdFor}
			if tc.boundAgo > 0 {
				w.run(lws, "r0-n-0")
				rj := *w.running[lws.ID]
				rj.Start = w.now.Add(-tc.boundAgo)
				snap.Running = append(snap.Running, rj)
				lm.Since = rj.Start
				if tc.created > 0 {
					var waiting []workload.PodRef
					for i := 1; i <= tc.created; i++ {
						waiting = append(waiting, workload.PodRef{Job: lws.ID, Index: i})
					}
					snap.Pending = append(snap.Pending, PendingJob{Job: lws, Waiting: waiting})
				}
			} else {
				snap.Pending = append(snap.Pending, PendingJob{Job: lws})
			}
			snap.Later = []LaterMembers{lm}
			// A 4-GPU job that fits only in the lws gang's room.
			other := build.Job("other").GPUs(4).Obj()
			if tc.boundAgo == 0 {
				other = build.Job("other").GPUs(2).Obj() // beside: n-1's 2 free GPUs
			}
			snap.Pending = append(snap.Pending, PendingJob{Job: other})
			plan := New(Config{Policy: Corral}).Cycle(snap)

			got := map[string]int{}
			for _, gb := range plan.Binds {
				got[string(gb.Job)] += len(gb.Pods)
				for _, pb := range gb.Pods {
					if gb.Job == lws.ID && pb.Node != "r0-n-0" {
						t.Errorf("lws pod %v bound on %s, want r0-n-0 beside its leader", pb.Pod, pb.Node)
					}
					for _, r := range later {
						if pb.Pod == r {
							t.Errorf("member %v not created yet was bound", r)
						}
					}
				}
			}
			if len(got) != len(tc.wantBinds) {
				t.Errorf("binds %v, want %v", got, tc.wantBinds)
			}
			for j, n := range tc.wantBinds {
				if got[j] != n {
					t.Errorf("binds %v, want %v", got, tc.wantBinds)
				}
			}
			held := 0
			for _, h := range plan.Held {
				held += h.Pods
				if h.Job != lws.ID || len(h.Nodes) != 1 || h.Nodes[0] != "r0-n-0" {
					t.Errorf("held %+v, want lws's room on r0-n-0", h)
				}
				if want := w.now.Add(-tc.boundAgo).Add(holdFor); tc.boundAgo > 0 && !h.Until.Equal(want) {
					t.Errorf("held until %v, want %v (from the first binding)", h.Until, want)
				}
			}
			bound := 0
			for _, n := range tc.wantBinds {
				bound += n
			}
			if plan.Stats.PodsPlaced != bound || plan.Stats.PodsHeld != tc.wantHeld {
				t.Errorf("stats: %d pods placed, %d held; want %d placed (bound), %d held",
					plan.Stats.PodsPlaced, plan.Stats.PodsHeld, bound, tc.wantHeld)
			}
			if held != tc.wantHeld {
				t.Errorf("held %d members (%+v), want %d", held, plan.Held, tc.wantHeld)
			}
			waits := false
			for _, p := range plan.Pending {
				waits = waits || p.Job == other.ID
			}
			if waits != tc.otherWaits {
				t.Errorf("other waits: %v, want %v (pending %+v)", waits, tc.otherWaits, plan.Pending)
			}
		})
	}
}
