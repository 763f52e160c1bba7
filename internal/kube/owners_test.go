package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/workload"
)

// ownedGroups is a lookup that also reads owners, from real client-go
// stores filled with the controllers' objects as the API server returns
// them (unstructured).
type ownedGroups struct {
	fakeGroups
	ov *ownerView
}

func (o ownedGroups) owners() *ownerView { return o.ov }

func store(objs ...any) cache.Store {
	s := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, o := range objs {
		if err := s.Add(o); err != nil {
			panic(err)
		}
	}
	return s
}

// tmpl is a pod template asking for gpus GPUs, as unstructured JSON.
func tmpl(gpus int64) map[string]any {
	return map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c",
		"resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": gpus}, "requests": map[string]any{"cpu": "2", "memory": "4Gi"}}}}}}
}

func jobSetObj(name string, spec map[string]any, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": name, "namespace": "ns"}, "spec": spec}}
	if ann != nil {
		u.SetAnnotations(ann)
	}
	return u
}

func rjob(name string, replicas, parallelism, gpus int64) map[string]any {
	return map[string]any{"name": name, "replicas": replicas, "template": map[string]any{
		"spec": map[string]any{"parallelism": parallelism, "template": tmpl(gpus)}}}
}

func lwsObj(name, policy string, size int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"name": name, "namespace": "ns"},
		"spec":     map[string]any{"startupPolicy": policy, "leaderWorkerTemplate": map[string]any{"size": size, "workerTemplate": tmpl(8)}}}}
}

func rayObj(name string, groups ...map[string]any) *unstructured.Unstructured {
	var gs []any
	for _, g := range groups {
		gs = append(gs, g)
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCluster",
		"metadata": map[string]any{"name": name, "namespace": "ns"},
		"spec":     map[string]any{"headGroupSpec": map[string]any{"template": tmpl(0)}, "workerGroupSpecs": gs}}}
}

func (b *podB) label(k, v string) *podB { b.p.Labels[k] = v; return b }
func (b *podB) jobSet(js, rj string) *podB {
	return b.label(jobSetNameLabel, js).label(jobSetRJobLabel, rj).ann(jobSetNameLabel, js)
}
func (b *podB) lws(name, group, worker string, size int) *podB {
	return b.label(lwsNameLabel, name).label(lwsGroupLabel, group).label(lwsWorkerIndexLabel, worker).
		ann(lwsSizeAnnotation, itoa(size))
}
func itoa(n int) string { return string(rune('0' + n)) } // sizes below 10 in these tests

// exLeader is the leader (completion index 0) of child Job job of the
// exclusive JobSet "ex".
func exLeader(job string, uid types.UID) *corev1.Pod {
	p := pod(job+"-0").gpus(8).jobSet("ex", "w").ann(jobSetExclusiveKey, "corral.dev/rack").ann(jobCompletionIndexKey, "0").obj()
	tr := true
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: uid, Controller: &tr}}
	return p
}

func TestOwnerShapes(t *testing.T) {
	now := metav1.NewTime(time.Unix(500, 0))
	deleting := jobSetObj("gone", map[string]any{"replicatedJobs": []any{rjob("w", 1, 2, 8)}}, nil)
	deleting.SetDeletionTimestamp(&now)
	ov := &ownerView{
		jobs: store(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "u-train"}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "dying", Namespace: "ns", UID: "u-dying", DeletionTimestamp: &now}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ex-w-0", Namespace: "ns", UID: "u-ex"}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ex-w-1", Namespace: "ns", UID: "u-ex1"}}),
		jobSets: store(
			jobSetObj("js", map[string]any{"replicatedJobs": []any{rjob("driver", 1, 1, 0), rjob("w", 2, 2, 8)}}, nil),
			jobSetObj("ordered", map[string]any{"startupPolicy": map[string]any{"startupPolicyOrder": "InOrder"},
				"replicatedJobs": []any{rjob("driver", 1, 1, 0), rjob("w", 1, 2, 8)}}, nil),
			jobSetObj("paused", map[string]any{"suspend": true, "replicatedJobs": []any{rjob("w", 1, 1, 8)}}, nil),
			jobSetObj("ex", map[string]any{"replicatedJobs": []any{rjob("w", 2, 4, 8)}}, map[string]string{jobSetExclusiveKey: "corral.dev/rack"}),
			deleting),
		lwss:        store(lwsObj("ready", "LeaderReady", 4), lwsObj("created", "LeaderCreated", 4)),
		rayClusters: store(rayObj("rc", map[string]any{"minReplicas": int64(2), "numOfHosts": int64(2)}, map[string]any{"minReplicas": int64(3), "suspend": true})),
	}
	groups := ownedGroups{fakeGroups: fakeGroups{parallelism: map[string]int{"train": 2}}, ov: ov}
	levels := map[string]string{"rack": "corral.dev/rack"}
	req := func(gpus int) workload.Request { return workload.Request{CPUMilli: 2000, MemMiB: 4096, GPUs: gpus} }
	t8 := func(n int, js, rj string) []*corev1.Pod {
		var out []*corev1.Pod
		for i := 0; i < n; i++ {
			out = append(out, pod(rj+"-"+itoa(i)).gpus(8).jobSet(js, rj).obj())
		}
		return out
	}
	type shape struct {
		View   jobView
		Later  int // members held for, not created yet
		Sets   int
		LaterR workload.Request
		// Exclusive is the job's exclusive level; Parts each pod set's
		// exclusive part (nil when none has one).
		Exclusive string
		Parts     []string
	}
	get := func(kj *kjob) shape {
		s := shape{View: view(kj), Later: kj.laterCount(), Sets: len(kj.job.PodSets), Exclusive: kj.job.Topology.Exclusive}
		for _, ps := range kj.job.PodSets {
			if ps.Group != "" {
				s.Parts = nil
				for _, ps := range kj.job.PodSets {
					s.Parts = append(s.Parts, ps.Group)
				}
				break
			}
		}
		if kj.laterFrom >= 0 {
			s.LaterR = kj.job.PodSets[kj.laterFrom].Request
		}
		return s
	}
	cases := map[string]struct {
		pods []*corev1.Pod
		ov   *ownerView // nil: the view above
		want []shape
	}{
		"a JobSet is one gang of every replicated job's replicas × parallelism": {
			pods: append(t8(4, "js", "w"), pod("driver-0").jobSet("js", "driver").obj()),
			want: []shape{{View: jobView{Key: "jobset/ns/js", Pods: 5, Min: 5, Request: req(0)}, Sets: 2}},
		},
		"a JobSet whose pods do not all exist waits, counting them": {
			pods: t8(3, "js", "w"),
			want: []shape{{View: jobView{Key: "jobset/ns/js", Pods: 3, Min: 5, Request: req(8), Waiting: "gang waits for its pods: 3 of 5 pods exist"}, Sets: 1}},
		},
		"a JobSet with InOrder startup holds room for the replicated jobs not created yet": {
			pods: []*corev1.Pod{pod("driver-0").jobSet("ordered", "driver").obj()},
			want: []shape{{View: jobView{Key: "jobset/ns/ordered", Pods: 1, Min: 3, Request: req(0)}, Later: 2, Sets: 2, LaterR: req(8)}},
		},
		"a JobSet whose driver finished before its workers were placed: the workers are the gang": {
			pods: append(t8(4, "js", "w"), pod("driver-0").jobSet("js", "driver").phase(corev1.PodSucceeded).obj()),
			want: []shape{{View: jobView{Key: "jobset/ns/js", Pods: 4, Min: 4, Request: req(8)}, Sets: 1}},
		},
		"InOrder: a replicated job whose pods all finished is not held for again": {
			pods: append(t8(2, "ordered", "w"), pod("driver-0").jobSet("ordered", "driver").phase(corev1.PodSucceeded).obj()),
			want: []shape{{View: jobView{Key: "jobset/ns/ordered", Pods: 2, Min: 2, Request: req(8)}, Sets: 1}},
		},
		"a finished pod still leaves the gang waiting for members not created": {
			pods: append(t8(3, "js", "w"), pod("driver-0").jobSet("js", "driver").phase(corev1.PodSucceeded).obj()),
			want: []shape{{View: jobView{Key: "jobset/ns/js", Pods: 3, Min: 4, Request: req(8), Waiting: "gang waits for its pods: 3 of 4 pods exist"}, Sets: 1}},
		},
		"a suspended JobSet (Kueue has not admitted it) is never placed": {
			pods: t8(1, "paused", "w"),
			want: []shape{{View: jobView{Key: "jobset/ns/paused", Pods: 1, Request: req(8),
				Waiting: "its JobSet ns/paused is suspended (a queue such as Kueue has not admitted it)"}, Sets: 1}},
		},
		"a JobSet being deleted is never placed": {
			pods: t8(2, "gone", "w"),
			want: []shape{{View: jobView{Key: "jobset/ns/gone", Pods: 2, Request: req(8), Waiting: "its JobSet ns/gone is being deleted"}, Sets: 1}},
		},
		"a JobSet that does not exist is never placed": {
			pods: t8(2, "nope", "w"),
			want: []shape{{View: jobView{Key: "jobset/ns/nope", Pods: 2, Request: req(8), Waiting: "its JobSet ns/nope does not exist (deleted, or not seen yet)"}, Sets: 1}},
		},
		"without the JobSet resource the size is unknown and the reason names the annotation": {
			pods: t8(2, "js", "w"),
			ov:   &ownerView{jobs: store()},
			want: []shape{{View: jobView{Key: "jobset/ns/js", Pods: 2, Request: req(8),
				Waiting: "the gang's size is unknown: the jobsets.jobset.x-k8s.io resource is not served, so the JobSet's size cannot be read; set the annotation corral.dev/min-members on the pod template"}, Sets: 1}},
		},
		"the min-members annotation answers when the owner cannot": {
			pods: []*corev1.Pod{pod("w-0").gpus(8).jobSet("js", "w").ann(v1alpha1.AnnotationMinMembers, "1").obj()},
			ov:   &ownerView{jobs: store()},
			want: []shape{{View: jobView{Key: "jobset/ns/js", Pods: 1, Min: 1, Request: req(8)}, Sets: 1}},
		},
		"JobSet exclusive placement: one gang, each child Job a part with a rack to itself, its followers held for": {
			pods: []*corev1.Pod{exLeader("ex-w-0", "u-ex"), exLeader("ex-w-1", "u-ex1")},
			want: []shape{{View: jobView{Key: "jobset/ns/ex", Pods: 2, Min: 8, Request: req(8)}, Later: 6, Sets: 4, LaterR: req(8),
				Exclusive: "rack", Parts: []string{"ex-w-0", "ex-w-1", "ex-w-0", "ex-w-1"}}},
		},
		"JobSet exclusive placement: a child Job whose leader does not exist yet is waited for": {
			pods: []*corev1.Pod{exLeader("ex-w-0", "u-ex")},
			want: []shape{{View: jobView{Key: "jobset/ns/ex", Pods: 1, Min: 8, Request: req(8), Waiting: "gang waits for its pods: 4 of 8 pods exist"},
				Later: 3, Sets: 2, LaterR: req(8), Exclusive: "rack", Parts: []string{"ex-w-0", "ex-w-0"}}},
		},
		"LWS LeaderReady: the leader is placed with its workers' room held": {
			pods: []*corev1.Pod{pod("ready-0").gpus(8).lws("ready", "0", "0", 4).obj()},
			want: []shape{{View: jobView{Key: "leaderworkerset/ns/ready/0", Pods: 1, Min: 4, Request: req(8)}, Later: 3, Sets: 2, LaterR: req(8)}},
		},
		"LWS LeaderCreated: the group waits for its workers": {
			pods: []*corev1.Pod{pod("created-0").gpus(8).lws("created", "0", "0", 4).obj()},
			want: []shape{{View: jobView{Key: "leaderworkerset/ns/created/0", Pods: 1, Min: 4, Request: req(8), Waiting: "gang waits for its pods: 1 of 4 pods exist"}, Sets: 1}},
		},
		"LWS without its resource: the size from the pods' annotation": {
			pods: []*corev1.Pod{pod("ready-0").gpus(8).lws("ready", "1", "0", 2).obj(), pod("ready-0-1").gpus(8).lws("ready", "1", "1", 2).obj()},
			ov:   &ownerView{jobs: store()},
			want: []shape{{View: jobView{Key: "leaderworkerset/ns/ready/1", Pods: 2, Min: 2, Request: req(8)}, Sets: 1}},
		},
		"RayCluster: head and the workers' minimum start together, more are elastic": {
			pods: func() []*corev1.Pod {
				out := []*corev1.Pod{pod("head").label(rayClusterLabel, "rc").obj()}
				for i := 0; i < 6; i++ {
					out = append(out, pod("w-"+itoa(i)).gpus(8).label(rayClusterLabel, "rc").obj())
				}
				return out
			}(),
			want: []shape{{View: jobView{Key: "raycluster/ns/rc", Pods: 7, Min: 5, Request: req(0)}, Sets: 2}},
		},
		"a pod with scheduling gates (Kueue admission) is never placed": {
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := pod("g").gpus(1).obj()
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
				return p
			}()},
			want: []shape{{View: jobView{Key: "pod/ns/g", Pods: 1, Request: req(1), Waiting: "1 of 1 pods wait for their scheduling gates to be removed (kueue.x-k8s.io/admission)"}, Sets: 1}},
		},
		"Kueue's required topology annotation names the level by node label": {
			pods: []*corev1.Pod{pod("k").gpus(1).ann(kueueRequiredTopology, "corral.dev/rack").obj()},
			want: []shape{{View: jobView{Key: "pod/ns/k", Pods: 1, Required: "rack", Request: req(1)}, Sets: 1}},
		},
		"a pod whose Job is being deleted is never placed": {
			pods: []*corev1.Pod{pod("d-0").gpus(1).ownedByJob("dying").obj()},
			want: []shape{{View: jobView{Key: "job/ns/dying", Pods: 1, Request: req(1), Waiting: "its Job ns/dying is being deleted"}, Sets: 1}},
		},
		"a pod whose Job is gone is never placed": {
			pods: []*corev1.Pod{pod("o-0").gpus(1).ownedByJob("orphan").obj()},
			want: []shape{{View: jobView{Key: "job/ns/orphan", Pods: 1, Request: req(1), Waiting: "its Job ns/orphan does not exist (deleted, or not seen yet)"}, Sets: 1}},
		},
		"a Job's pods still form a gang of its parallelism": {
			pods: []*corev1.Pod{pod("t-0").gpus(1).ownedByJob("train").obj(), pod("t-1").gpus(1).ownedByJob("train").obj()},
			want: []shape{{View: jobView{Key: "job/ns/train", Pods: 2, Min: 2, Request: req(1)}, Sets: 1}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := groups
			if tc.ov != nil {
				g.ov = tc.ov
			}
			var got []shape
			for _, kj := range buildJobs(tc.pods, nil, g, levels, testCfg) {
				got = append(got, get(kj))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("jobs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWaitAdvice: explain's advice for a waiting gang says what would end
// the wait, not "corral places it once all pods exist" when they never will.
func TestWaitAdvice(t *testing.T) {
	now := metav1.NewTime(time.Unix(500, 0))
	paused := jobSetObj("paused", map[string]any{"suspend": true, "replicatedJobs": []any{rjob("w", 1, 1, 8)}}, nil)
	gone := jobSetObj("gone", map[string]any{"replicatedJobs": []any{rjob("w", 1, 1, 8)}}, nil)
	gone.SetDeletionTimestamp(&now)
	groups := ownedGroups{ov: &ownerView{jobs: store(), jobSets: store(paused, gone)}}
	gated := pod("g").gpus(1).obj()
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}}
	cases := map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"suspended": {pod("p").gpus(8).jobSet("paused", "w").obj(), adviceSuspended},
		"deleting":  {pod("d").gpus(8).jobSet("gone", "w").obj(), adviceGone},
		"gated":     {gated, "the pods carry scheduling gates: whoever set them (Kueue removes its own when it admits the workload) must remove them first"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kj := buildJobs([]*corev1.Pod{tc.pod}, nil, groups, nil, testCfg)[0]
			if kj.waitAdvice != tc.want {
				t.Errorf("advice %q, want %q", kj.waitAdvice, tc.want)
			}
		})
	}
}
