package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// heldCycle builds the snapshot of pods as snapshot.go does for the held
// room (running and pending jobs, the members not created yet) on a fresh
// state and runs the engine on it.
func heldCycle(t *testing.T, eng *engine.Engine, st *cluster.State, pods []*corev1.Pod, groups groupLookup,
	levels map[string]string, now time.Time) (*world, engine.Plan) {
	t.Helper()
	holds, warns := account(st, pods, map[string]assumedPod{}, nil, nil, testCfg)
	if len(warns) > 0 {
		t.Fatalf("warnings: %v", warns)
	}
	w := &world{state: st, byID: map[workload.JobID]*kjob{}}
	snap := &engine.Snapshot{State: st, Now: now}
	for _, kj := range buildJobs(pods, nil, groups, levels, testCfg) {
		w.byID[kj.job.ID] = kj
		if kj.waiting != "" || kj.invalid != "" {
			t.Fatalf("job %s: waiting %q, invalid %q", kj.key, kj.waiting, kj.invalid)
		}
		if lm, ok := laterMembers(kj, map[string]assumedPod{}); ok {
			snap.Later = append(snap.Later, lm)
		}
		if len(kj.bound) > 0 {
			rj, _ := runningJob(kj, holds, nil, st, now)
			snap.Running = append(snap.Running, rj)
		}
		if kj.pending() {
			pj := engine.PendingJob{Job: kj.job}
			if len(kj.bound) > 0 {
				for _, ref := range kj.refs {
					if _, ok := kj.bound[ref]; !ok {
						pj.Waiting = append(pj.Waiting, ref)
					}
				}
			}
			snap.Pending = append(snap.Pending, pj)
		}
	}
	return w, eng.Cycle(snap)
}

// bindAt is p bound to pb's node with its GPUs at time at, as the API
// server shows it after the binding, with the annotations the adapter
// wrote on it.
func bindAt(p *corev1.Pod, pb engine.PodBind, ann map[string]string, at time.Time) *corev1.Pod {
	b := p.DeepCopy()
	b.Spec.NodeName = pb.Node
	if b.Annotations == nil {
		b.Annotations = map[string]string{}
	}
	for k, v := range ann {
		b.Annotations[k] = v
	}
	b.Annotations[v1alpha1.AnnotationAssignedGPUs] = strings.Join(pb.Devices, ",")
	b.Status.Conditions = append(b.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
		Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)})
	return b
}

// TestLaterMembersFact: the snapshot names a LeaderReady group's workers
// not created yet and dates the hold from the gang's first binding, read
// from the pod, so a restarted scheduler keeps the same deadline.
func TestLaterMembersFact(t *testing.T) {
	ov := &ownerView{jobs: store(), lwss: store(lwsObj("ready", "LeaderReady", 4))}
	boundAt := time.Unix(900, 0)
	leader := pod("ready-0").gpus(8).lws("ready", "0", "0", 4).obj()
	cases := map[string]struct {
		pods      []*corev1.Pod
		wantPods  int
		wantSince time.Time
	}{
		"the leader alone, pending": {pods: []*corev1.Pod{leader}, wantPods: 3},
		"the leader bound": {
			pods:     []*corev1.Pod{bindAt(leader, engine.PodBind{Node: "n0"}, nil, boundAt)},
			wantPods: 3, wantSince: boundAt,
		},
		"two workers created": {
			pods: []*corev1.Pod{bindAt(leader, engine.PodBind{Node: "n0"}, nil, boundAt),
				pod("ready-0-1").gpus(8).lws("ready", "0", "1", 4).obj(), pod("ready-0-2").gpus(8).lws("ready", "0", "2", 4).obj()},
			wantPods: 1, wantSince: boundAt,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kj := buildJobs(tc.pods, nil, ownedGroups{ov: ov}, nil, testCfg)[0]
			lm, ok := laterMembers(kj, nil)
			if !ok || len(lm.Pods) != tc.wantPods || !lm.Since.Equal(tc.wantSince) || lm.HoldFor != 5*time.Minute {
				t.Errorf("later members %+v (%v), want %d pods since %v held 5m", lm, ok, tc.wantPods, tc.wantSince)
			}
		})
	}
}

// TestHoldTimeoutAnnotation: a malformed hold timeout makes the job invalid
// with a reason naming the annotation and its form, rather than holding
// room for the default 5m the user did not ask for.
func TestHoldTimeoutAnnotation(t *testing.T) {
	ov := &ownerView{jobs: store(), lwss: store(lwsObj("ready", "LeaderReady", 4))}
	cases := map[string]struct {
		value       string
		wantHold    time.Duration
		wantInvalid string
	}{
		"unset: the default": {value: "", wantHold: 5 * time.Minute},
		"a duration":         {value: "90s", wantHold: 90 * time.Second},
		"no duration":        {value: "10", wantInvalid: `annotation corral.dev/hold-timeout="10": want a positive duration such as 10m (default 5m)`},
		"negative":           {value: "-5m", wantInvalid: `annotation corral.dev/hold-timeout="-5m": want a positive duration such as 10m (default 5m)`},
		"zero":               {value: "0s", wantInvalid: `annotation corral.dev/hold-timeout="0s": want a positive duration such as 10m (default 5m)`},
		"past time.Duration": {value: "9999999h", wantInvalid: `annotation corral.dev/hold-timeout="9999999h": want a positive duration such as 10m (default 5m)`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			leader := pod("ready-0").gpus(8).lws("ready", "0", "0", 4).ann(v1alpha1.AnnotationHoldTimeout, tc.value).obj()
			kj := buildJobs([]*corev1.Pod{leader}, nil, ownedGroups{ov: ov}, nil, testCfg)[0]
			if kj.invalid != tc.wantInvalid {
				t.Fatalf("invalid %q, want %q", kj.invalid, tc.wantInvalid)
			}
			lm, ok := laterMembers(kj, nil)
			if tc.wantInvalid != "" {
				if ok {
					t.Errorf("an invalid job holds room: %+v", lm)
				}
				return
			}
			if !ok || lm.HoldFor != tc.wantHold {
				t.Errorf("later members %+v (%v), want held %v", lm, ok, tc.wantHold)
			}
		})
	}
}

// TestLeaderReadyThroughTheEngine follows an LWS group under LeaderReady
// through the real engine on 2 racks of 4 nodes: the leader arrives alone,
// the engine places the whole group of 4 in one rack, the leader is bound
// and the plan holds the workers' room; in the next cycles, decided from
// the pods alone, a 2-node gang that would fit in that rack is kept out of
// it, and the workers, once created, are bound beside the leader; past the
// hold timeout the room is anyone's.
func TestLeaderReadyThroughTheEngine(t *testing.T) {
	levels := map[string]string{"rack": "corral.dev/rack"}
	ov := &ownerView{jobs: store(), lwss: store(lwsObj("ready", "LeaderReady", 4))}
	groups := ownedGroups{ov: ov}
	rack := func(b *podB) *podB { return b.ann(v1alpha1.AnnotationRequiredTopology, "rack") }
	now := time.Unix(1000, 0)
	eng := engine.New(engine.Config{})
	state := func() *cluster.State { return build.State(build.Topo("rack"), build.Racks(2, 4)) }

	// Cycle 1: the leader alone. The whole group is placed; only the
	// leader is bound, the 3 workers' room is held.
	leader := rack(pod("ready-0").gpus(8).lws("ready", "0", "0", 4)).obj()
	w, plan := heldCycle(t, eng, state(), []*corev1.Pod{leader}, groups, levels, now)
	if len(plan.Binds) != 1 || len(plan.Binds[0].Pods) != 1 || len(plan.Held) != 1 || plan.Held[0].Pods != 3 {
		t.Fatalf("plan: binds %+v, held %+v; want the leader bound and 3 workers' room held", plan.Binds, plan.Held)
	}
	msgs := w.annotateHeld(plan.Binds, plan.Held)
	ann := w.bindAnnotations[string(leader.UID)]
	if ann[v1alpha1.AnnotationHeldRoom] == "" || msgs[string(leader.UID)] == "" {
		t.Errorf("the leader's binding carries no held room: %v", ann)
	}
	leaderBound := bindAt(leader, plan.Binds[0].Pods[0], ann, now)
	leaderRack, _, _ := strings.Cut(leaderBound.Spec.NodeName, "-")

	// Cycle 2 (any scheduler, a restarted one too): another 2-node gang
	// asks for one rack. The leader's rack is held, so it goes elsewhere.
	other := []*corev1.Pod{rack(pod("o-0").gpus(8).ann(v1alpha1.AnnotationGang, "o")).obj(),
		rack(pod("o-1").gpus(8).ann(v1alpha1.AnnotationGang, "o")).obj()}
	for _, at := range []struct {
		name     string
		now      time.Time
		inRackOK bool
	}{{"within the hold", now.Add(time.Minute), false}, {"past the hold", now.Add(6 * time.Minute), true}} {
		_, plan = heldCycle(t, eng, state(), append([]*corev1.Pod{leaderBound}, other...), groups, levels, at.now)
		if len(plan.Binds) != 1 {
			t.Fatalf("%s: plan %+v; want the other gang placed", at.name, plan)
		}
		inRack := 0
		for _, pb := range plan.Binds[0].Pods {
			if r, _, _ := strings.Cut(pb.Node, "-"); r == leaderRack {
				inRack++
			}
		}
		if !at.inRackOK && inRack > 0 {
			t.Errorf("%s: the other gang got %d nodes in the rack held for the group (%s)", at.name, inRack, leaderRack)
		}
		if held := len(plan.Held) > 0; held == at.inRackOK {
			t.Errorf("%s: held %+v", at.name, plan.Held)
		}
	}

	// Cycle 3: LWS created the workers: the engine binds them beside the
	// leader.
	pods := []*corev1.Pod{leaderBound}
	for _, i := range []string{"1", "2", "3"} {
		pods = append(pods, rack(pod("ready-0-"+i).gpus(8).lws("ready", "0", i, 4)).obj())
	}
	_, plan = heldCycle(t, eng, state(), pods, groups, levels, now.Add(2*time.Minute))
	if len(plan.Binds) != 1 || len(plan.Binds[0].Pods) != 3 || len(plan.Pending) != 0 {
		t.Fatalf("plan: %+v; want the 3 workers bound", plan)
	}
	for _, pb := range plan.Binds[0].Pods {
		if r, _, _ := strings.Cut(pb.Node, "-"); r != leaderRack {
			t.Errorf("worker %v bound to %s, outside the leader's rack %s", pb.Pod, pb.Node, leaderRack)
		}
	}
}
