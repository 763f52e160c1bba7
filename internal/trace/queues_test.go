package trace

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/queue"
)

func TestQueueFile(t *testing.T) {
	specs, err := LoadQueues("../../examples/sim/queues.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	tree, problems := queue.Build(specs)
	if len(problems) != 0 {
		t.Fatalf("the documented example has problems: %v", problems)
	}
	if diff := cmp.Diff([]string{"default", "team-a", "team-b"}, tree.Leaves()); diff != "" {
		t.Errorf("leaves (-want +got):\n%s", diff)
	}
	a, _ := tree.Spec("team-a")
	want := cycle.Amounts{cycle.GPU("H100"): 128000}
	if diff := cmp.Diff(want, a.Guarantee); diff != "" {
		t.Errorf("team-a guarantee in GPU-milli (-want +got):\n%s", diff)
	}
	if !tree.Reclaims("team-a") || tree.Reclaims("team-b") {
		t.Errorf("reclaim: team-a %v, team-b %v", tree.Reclaims("team-a"), tree.Reclaims("team-b"))
	}
}

func TestQueueFileErrors(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"unknown field": {"queues:\n  - name: a\n    quota: {cpu: 1}\n", `unknown field "quota"`},
		"no queues":     {"queues: []\n", "no queues"},
		"not a number":  {"queues:\n  - name: a\n    guarantee: {gpu/H100: many}\n", "many"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ReadQueuesYAML(strings.NewReader(tc.body), "q.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestTeamsPreset(t *testing.T) {
	c, err := LoadCluster("dgx-h100:blocks=1,racks=4,nodes=8")
	if err != nil {
		t.Fatal(err)
	}
	for preset, strict := range map[string]bool{"teams": false, "teams-strict": true} {
		specs, err := LoadQueues(preset, c)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range specs {
			got = append(got, fmt.Sprintf("%s %s reclaim=%v strict=%v", s.Name, s.Guarantee, s.Reclaim, s.StrictReclaim))
		}
		want := []string{"team-a gpu/H100=64000", "team-b gpu/H100=64000", "team-c gpu/H100=64000"}
		for i := range want {
			want[i] += fmt.Sprintf(" reclaim=true strict=%v", strict)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", preset, diff)
		}
	}
}

func TestQueueFileStrictReclaimImpliesReclaim(t *testing.T) {
	specs, err := ReadQueuesYAML(strings.NewReader("queues:\n  - name: a\n    strictReclaim: true\n  - name: b\n    reclaim: true\n"), "q.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := specs[0], specs[1]; !a.Reclaim || !a.StrictReclaim || !b.Reclaim || b.StrictReclaim {
		t.Errorf("a reclaim=%v strict=%v, b reclaim=%v strict=%v; want true true, true false", a.Reclaim, a.StrictReclaim, b.Reclaim, b.StrictReclaim)
	}
}

func TestLateQueueArrivesLater(t *testing.T) {
	c, err := LoadCluster("dgx-h100:blocks=1,racks=2,nodes=4")
	if err != nil {
		t.Fatal(err)
	}
	base, err := LoadTrace("gen:llm?jobs=300", Options{Seed: 3, Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	late, err := LoadTrace("gen:llm?jobs=300&late=0.5&ckpt=20m&restart=4m", Options{Seed: 3, Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	var span float64
	for _, j := range base.Jobs {
		span = max(span, j.Submit.Sub(Epoch).Seconds())
	}
	for i, j := range late.Jobs {
		b := base.Jobs[i]
		if j.ID != b.ID || j.Queue != b.Queue || j.GPUs() != b.GPUs() {
			t.Fatalf("job %d differs beyond its submit time: %+v vs %+v", i, j.Job, b.Job)
		}
		if j.CheckpointInterval != 20*60e9 || j.RestartOverhead != 4*60e9 {
			t.Fatalf("job %s: checkpoint %v, overhead %v", j.ID, j.CheckpointInterval, j.RestartOverhead)
		}
		at := j.Submit.Sub(Epoch).Seconds()
		switch {
		case j.Queue == "team-c" && at < 0.5*span-1:
			t.Fatalf("late queue job %s at %.0fs, before half the span %.0fs", j.ID, at, span/2)
		case j.Queue != "team-c" && !j.Submit.Equal(b.Submit):
			t.Fatalf("job %s of %s moved", j.ID, j.Queue)
		}
	}
}
