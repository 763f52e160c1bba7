package engine

import (
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/workload"
)

// TestRestOfGangJoinsItsPeers: the waiting pods of a partly bound gang (its
// binding cut off part-way) go to the tightest domain holding its bound
// pods, even where a node elsewhere fits them better on their own, and
// further out only when that domain is full. The engine reads the peers
// from the snapshot alone, so a restarted driver decides the same.
func TestRestOfGangJoinsItsPeers(t *testing.T) {
	type running struct {
		id    string
		gpus  int
		nodes []string
	}
	cases := map[string]struct {
		required string
		bound    []string  // nodes of the gang's bound pods 0, 1
		others   []running // work beside it
		alone    string    // where the waiting pod goes on its own
		want     string
	}{
		"no required level: the peers' rack": {
			bound:  []string{"r0-n-0", "r0-n-1"},
			others: []running{{"other", 6, []string{"r1-n-0"}}},
			alone:  "r1-n-0", want: "r0-n-",
		},
		"required rack: the peers' node": {
			required: "rack", bound: []string{"r0-n-0", "r0-n-0"},
			others: []running{{"other", 5, []string{"r0-n-1"}}},
			alone:  "r0-n-1", want: "r0-n-0",
		},
		"the peers' rack is full: elsewhere": {
			bound: []string{"r0-n-0", "r0-n-1"},
			others: []running{{"full0", 6, []string{"r0-n-0"}}, {"full1", 6, []string{"r0-n-1"}},
				{"other", 6, []string{"r1-n-0"}}},
			alone: "r1-n-0", want: "r1-n-0",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			place := func(partly bool) string {
				w := newWorld(t, build.State(build.Topo("rack"), build.Racks(2, 2)), Config{Policy: Corral})
				snap := &Snapshot{State: w.s, Now: w.now}
				for _, o := range tc.others {
					j := build.Job(o.id).GPUs(o.gpus).Obj()
					w.run(j, o.nodes...)
					snap.Running = append(snap.Running, *w.running[j.ID])
				}
				g := build.Job("g").Pods(3).GPUs(2)
				if tc.required != "" {
					g = g.Required(tc.required)
				}
				job := g.Obj()
				pj := PendingJob{Job: job}
				if partly {
					w.run(job, tc.bound...)
					snap.Running = append(snap.Running, *w.running[job.ID])
					pj.Waiting = []workload.PodRef{{Job: job.ID, Index: 2}}
				} else {
					// The same pod on its own: a one-pod job, with room
					// for the peers taken as the gang's would be.
					peers := build.Job("peers").Pods(2).GPUs(2).Obj()
					w.run(peers, tc.bound...)
					snap.Running = append(snap.Running, *w.running[peers.ID])
					job = build.Job("g").GPUs(2).Obj()
					pj = PendingJob{Job: job}
				}
				snap.Pending = []PendingJob{pj}
				plan := New(Config{Policy: Corral}).Cycle(snap)
				if len(plan.Binds) != 1 || len(plan.Binds[0].Pods) != 1 {
					t.Fatalf("partly=%v: binds %+v, pending %+v", partly, plan.Binds, plan.Pending)
				}
				return plan.Binds[0].Pods[0].Node
			}
			if got := place(false); got != tc.alone {
				t.Fatalf("the scenario needs the pod on its own on %s; the engine chose %s", tc.alone, got)
			}
			if got := place(true); !strings.HasPrefix(got, tc.want) {
				t.Errorf("the rest of the gang went to %s, want %s…", got, tc.want)
			}
		})
	}
}
