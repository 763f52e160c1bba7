package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
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
		pods = append(pods, engine.PodBind{Placed: cluster.Placed{Pod: ref}, Node: "n" + itoa(ref.Index+ref.PodSet), Devices: []string{"gpu0"}})
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

// TestLeaderReadyThroughTheEngine follows an LWS group under LeaderReady
// through the real engine on 2 racks of 4 nodes: the leader arrives alone,
// the engine places the whole group of 4 in one rack, the leader is bound
// with the workers' room held; in the next cycles a 2-node gang that would
// fit in that rack is kept out of it, and the workers, once created, are
// bound into their places.
func TestLeaderReadyThroughTheEngine(t *testing.T) {
	levels := map[string]string{"rack": "corral.dev/rack"}
	ov := &ownerView{jobs: store(), lwss: store(lwsObj("ready", "LeaderReady", 4))}
	groups := ownedGroups{ov: ov}
	rack := func(b *podB) *podB { return b.ann(v1alpha1.AnnotationRequiredTopology, "rack") }
	now := time.Unix(1000, 0)
	eng := engine.New(engine.Config{})
	cycle := func(pods []*corev1.Pod, assumed map[string]assumedPod) (*world, engine.Plan, []slotBind) {
		st := build.State(build.Topo("rack"), build.Racks(2, 4))
		binds, empty, warns := heldRoom(pods, assumed, testCfg, now)
		holds, w2 := account(st, pods, assumed, nil, nil, testCfg)
		warns = append(append(warns, w2...), chargeHeld(st, empty)...)
		if len(warns) > 0 {
			t.Fatalf("warnings: %v", warns)
		}
		w := &world{state: st, byID: map[workload.JobID]*kjob{}}
		snap := &engine.Snapshot{State: st, Now: now}
		for _, kj := range buildJobs(pods, nodesOf(assumed), groups, levels, testCfg) {
			w.byID[kj.job.ID] = kj
			if len(kj.bound) > 0 {
				rj, _ := runningJob(kj, holds, assumed, st, now)
				snap.Running = append(snap.Running, rj)
			}
			if kj.pending() && kj.waiting == "" && kj.invalid == "" {
				snap.Pending = append(snap.Pending, engine.PendingJob{Job: kj.job})
			}
		}
		return w, eng.Cycle(snap), binds
	}

	// Cycle 1: the leader alone. The whole group is placed; only the
	// leader is bound, the 3 workers' places go on its binding.
	leader := rack(pod("ready-0").gpus(8).lws("ready", "0", "0", 4)).obj()
	w, plan, _ := cycle([]*corev1.Pod{leader}, map[string]assumedPod{})
	if len(plan.Binds) != 1 || len(plan.Binds[0].Pods) != 4 {
		t.Fatalf("plan: %+v; want the whole group of 4 placed", plan)
	}
	binds := w.holdLater(plan.Binds, now)
	if len(binds[0].Pods) != 1 {
		t.Fatalf("bound %d pods, want the leader alone", len(binds[0].Pods))
	}
	ann := w.bindAnnotations[string(leader.UID)]
	leaderBound := leader.DeepCopy()
	leaderBound.Spec.NodeName = binds[0].Pods[0].Node
	for k, v := range ann {
		leaderBound.Annotations[k] = v
	}
	leaderBound.Annotations[v1alpha1.AnnotationAssignedGPUs] = strings.Join(binds[0].Pods[0].Devices, ",")
	leaderRack, _, _ := strings.Cut(leaderBound.Spec.NodeName, "-")

	// Cycle 2: another 2-node gang arrives that asks for one rack. The
	// leader's rack is held whole, so it goes to the other rack.
	other := []*corev1.Pod{rack(pod("o-0").gpus(8).ann(v1alpha1.AnnotationGang, "o")).obj(),
		rack(pod("o-1").gpus(8).ann(v1alpha1.AnnotationGang, "o")).obj()}
	_, plan, _ = cycle(append([]*corev1.Pod{leaderBound}, other...), map[string]assumedPod{})
	if len(plan.Binds) != 1 {
		t.Fatalf("plan: %+v; want the other gang placed", plan)
	}
	for _, pb := range plan.Binds[0].Pods {
		if r, _, _ := strings.Cut(pb.Node, "-"); r == leaderRack {
			t.Errorf("the other gang got %s, in the rack held for the group (%s)", pb.Node, leaderRack)
		}
	}

	// Cycle 3: LWS created the workers: each is bound into its place,
	// nothing is left for the engine.
	var pods []*corev1.Pod
	pods = append(pods, leaderBound)
	for _, i := range []string{"1", "2", "3"} {
		pods = append(pods, rack(pod("ready-0-"+i).gpus(8).lws("ready", "0", i, 4)).obj())
	}
	_, plan, slotBinds := cycle(pods, map[string]assumedPod{})
	if len(slotBinds) != 3 {
		t.Fatalf("%d workers bound into the held room, want 3", len(slotBinds))
	}
	for _, sb := range slotBinds {
		if r, _, _ := strings.Cut(sb.node, "-"); r != leaderRack {
			t.Errorf("worker %s bound to %s, outside the leader's rack %s", sb.pod.Name, sb.node, leaderRack)
		}
	}
	if len(plan.Binds) != 0 || len(plan.Pending) != 0 {
		t.Errorf("the engine still had work: %+v", plan)
	}
}
