package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

func TestHeldRoundTrip(t *testing.T) {
	slots := []heldSlot{{node: "n1", gpus: []string{"gpu0", "gpu1"}, cpuMilli: 2000, memMiB: 4096}, {node: "n2", cpuMilli: 500, memMiB: 1}}
	got, err := parseHeld(formatHeld(slots))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(slots, got, cmp.AllowUnexported(heldSlot{})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "n1|gpu0", "n1|gpu0|x|1", "|gpu0|1|1", "n1||-1|0"} {
		if _, err := parseHeld(bad); err == nil {
			t.Errorf("parseHeld(%q) accepted", bad)
		}
	}
}

func TestHeldRoom(t *testing.T) {
	now := time.Unix(1000, 0)
	leader := func(until time.Time) *corev1.Pod {
		return pod("g-0").gpus(8).lws("g", "0", "0", 3).boundTo("n1").
			ann(v1alpha1.AnnotationHeldRoom, "n1|gpu0,gpu1,gpu2,gpu3,gpu4,gpu5,gpu6,gpu7|2000|4096;n2|gpu0,gpu1,gpu2,gpu3,gpu4,gpu5,gpu6,gpu7|2000|4096").
			ann(v1alpha1.AnnotationHeldUntil, until.UTC().Format(time.RFC3339)).obj()
	}
	worker := func(i string) *podB { return pod("g-0-"+i).gpus(8).lws("g", "0", i, 3) }
	type result struct {
		Binds []string // pod@node
		Empty []string // node
	}
	cases := map[string]struct {
		pods []*corev1.Pod
		want result
	}{
		"no worker yet: both places are held": {
			pods: []*corev1.Pod{leader(now.Add(time.Minute))},
			want: result{Empty: []string{"n1", "n2"}},
		},
		"a worker that now exists is bound into the first place": {
			pods: []*corev1.Pod{leader(now.Add(time.Minute)), worker("1").obj()},
			want: result{Binds: []string{"g-0-1@n1"}, Empty: []string{"n2"}},
		},
		"a worker bound already fills its place; the next takes the other": {
			pods: []*corev1.Pod{leader(now.Add(time.Minute)), worker("1").ann(v1alpha1.AnnotationAssignedGPUs, "gpu0,gpu1,gpu2,gpu3,gpu4,gpu5,gpu6,gpu7").boundTo("n1").obj(), worker("2").obj()},
			want: result{Binds: []string{"g-0-2@n2"}},
		},
		"a worker asking for more than the place is left to the engine": {
			pods: []*corev1.Pod{leader(now.Add(time.Minute)), pod("g-0-1").gpus(4).lws("g", "0", "1", 3).obj()},
			want: result{Empty: []string{"n1", "n2"}},
		},
		"past the deadline nothing is held": {
			pods: []*corev1.Pod{leader(now.Add(-time.Second)), worker("1").obj()},
			want: result{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assumed := map[string]assumedPod{}
			binds, empty, warns := heldRoom(tc.pods, assumed, testCfg, now)
			if len(warns) > 0 {
				t.Errorf("warnings: %v", warns)
			}
			var got result
			for _, b := range binds {
				got.Binds = append(got.Binds, b.pod.Name+"@"+b.node)
				if assumed[string(b.pod.UID)].node != b.node {
					t.Errorf("%s bound into its place but not assumed there", b.pod.Name)
				}
			}
			for _, e := range empty {
				got.Empty = append(got.Empty, e.node)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("heldRoom (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHoldLater(t *testing.T) {
	// An LWS group under LeaderReady: the leader exists, three workers are
	// placed by the engine but not created yet.
	ov := &ownerView{jobs: store(), lwss: store(lwsObj("ready", "LeaderReady", 4))}
	jobs := buildJobs([]*corev1.Pod{pod("ready-0").gpus(8).lws("ready", "0", "0", 4).obj()}, nil,
		ownedGroups{ov: ov}, nil, testCfg)
	kj := jobs[0]
	w := &world{byID: map[workload.JobID]*kjob{kj.job.ID: kj}}
	var pods []engine.PodBind
	kj.job.EachPod(func(ref workload.PodRef, _ workload.Request) {
		pods = append(pods, engine.PodBind{Pod: ref, Node: "n" + itoa(ref.Index+ref.PodSet), Devices: []string{"gpu0"}})
	})
	now := time.Unix(1000, 0)
	got := w.holdLater([]engine.GangBind{{Job: kj.job.ID, Pods: pods}}, now)
	if len(got) != 1 || len(got[0].Pods) != 1 || got[0].Pods[0].Pod != kj.refs[0] {
		t.Fatalf("binds after holding: %+v, want the leader alone", got)
	}
	want := map[string]string{
		v1alpha1.AnnotationHeldRoom:  "n1|gpu0|2000|4096;n2|gpu0|2000|4096;n3|gpu0|2000|4096",
		v1alpha1.AnnotationHeldUntil: now.Add(5 * time.Minute).UTC().Format(time.RFC3339),
	}
	if diff := cmp.Diff(want, w.bindAnnotations[string(kj.pods[kj.refs[0]].UID)]); diff != "" {
		t.Errorf("leader's binding annotations (-want +got):\n%s", diff)
	}
}
