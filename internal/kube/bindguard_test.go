package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// ownedJob is a batch/v1 Job controlled by the JobSet with jsUID.
func ownedJob(name string, uid, jsUID types.UID) *batchv1.Job {
	t := true
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "js", UID: jsUID, Controller: &t}}}}
}

func withUID(u *unstructured.Unstructured, uid types.UID, deleting bool) *unstructured.Unstructured {
	u.SetUID(uid)
	if deleting {
		now := metav1.NewTime(time.Unix(200, 0))
		u.SetDeletionTimestamp(&now)
	}
	return u
}

// TestUnbindable: right before a binding is sent, the informers' current
// state of the pod and of its owners decides; each case fails without
// its check.
func TestUnbindable(t *testing.T) {
	deleting := metav1.NewTime(time.Unix(200, 0))
	jobPod := func() *podB {
		b := pod("p").gpus(8).ownedByJob("js-w-0").jobSet("js", "w")
		b.p.OwnerReferences[0].UID = "job-1"
		return b
	}
	cases := []struct {
		name    string
		pod     *corev1.Pod // as the cycle saw it
		current *corev1.Pod // in the pod informer now; nil: gone
		jobs    []*batchv1.Job
		jobSets []*unstructured.Unstructured
		lwss    []*unstructured.Unstructured
		rays    []*unstructured.Unstructured
		want    string
	}{
		{name: "a pod of no owner", pod: pod("p").obj(), current: pod("p").obj()},
		{name: "pod deleted", pod: pod("p").obj(), want: "pod ns/p was deleted"},
		{name: "pod replaced", pod: pod("p").obj(), current: func() *corev1.Pod { p := pod("p").obj(); p.UID = "other"; return p }(),
			want: "created again"},
		{name: "pod being deleted", pod: pod("p").obj(), current: func() *corev1.Pod { p := pod("p").obj(); p.DeletionTimestamp = &deleting; return p }(),
			want: "pod ns/p is being deleted"},
		{name: "JobSet and Job alive", pod: jobPod().obj(), current: jobPod().obj(),
			jobs: []*batchv1.Job{ownedJob("js-w-0", "job-1", "js-1")}, jobSets: []*unstructured.Unstructured{withUID(jobSetObj("js", nil, nil), "js-1", false)}},
		{name: "Job gone", pod: jobPod().obj(), current: jobPod().obj(),
			jobSets: []*unstructured.Unstructured{withUID(jobSetObj("js", nil, nil), "js-1", false)}, want: "its Job ns/js-w-0 was deleted"},
		{name: "JobSet being deleted", pod: jobPod().obj(), current: jobPod().obj(),
			jobs: []*batchv1.Job{ownedJob("js-w-0", "job-1", "js-1")}, jobSets: []*unstructured.Unstructured{withUID(jobSetObj("js", nil, nil), "js-1", true)},
			want: "its JobSet ns/js is being deleted"},
		{name: "JobSet deleted and created again", pod: jobPod().obj(), current: jobPod().obj(),
			jobs: []*batchv1.Job{ownedJob("js-w-0", "job-1", "js-1")}, jobSets: []*unstructured.Unstructured{withUID(jobSetObj("js", nil, nil), "js-2", false)},
			want: "its JobSet ns/js was deleted and created again"},
		{name: "JobSet gone, its Job still seen", pod: jobPod().obj(), current: jobPod().obj(),
			jobs: []*batchv1.Job{ownedJob("js-w-0", "job-1", "js-1")}, want: "its JobSet ns/js was deleted"},
		{name: "LeaderWorkerSet gone", pod: pod("p").lws("serve", "0", "0", 4).obj(), current: pod("p").lws("serve", "0", "0", 4).obj(),
			lwss: []*unstructured.Unstructured{}, want: "its LeaderWorkerSet ns/serve was deleted"},
		{name: "RayCluster replaced", pod: rayPod("ray-1").obj(), current: rayPod("ray-1").obj(),
			rays: []*unstructured.Unstructured{withUID(rayObj("ray"), "ray-2", false)}, want: "its RayCluster ns/ray was deleted and created again"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.current != nil {
				objs = append(objs, tc.current)
			}
			c := cacheWith(t, objs...)
			for _, j := range tc.jobs {
				must(t, c.jobs.GetStore().Add(j))
			}
			fill := func(gvr schema.GroupVersionResource, objs []*unstructured.Unstructured) {
				if objs == nil {
					return
				}
				inf := c.dynF.ForResource(gvr).Informer()
				for _, o := range objs {
					must(t, inf.GetStore().Add(o))
				}
				c.ownerInformers[gvr] = inf
			}
			fill(jobSetGVR, tc.jobSets)
			if tc.jobs != nil && tc.jobSets == nil && strings.Contains(tc.want, "JobSet") {
				fill(jobSetGVR, []*unstructured.Unstructured{})
			}
			fill(lwsGVR, tc.lwss)
			fill(rayClusterGVR, tc.rays)
			got := c.unbindable(tc.pod)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("unbindable = %q, want %q", got, tc.want)
			}
		})
	}
}

func rayPod(uid types.UID) *podB {
	t := true
	b := pod("p").gpus(8).label(rayClusterLabel, "ray")
	b.p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "ray", UID: uid, Controller: &t}}
	return b
}

// TestBindGangRefusesADeletedOwner: a gang whose JobSet is being deleted
// since the snapshot sends no binding at all.
func TestBindGangRefusesADeletedOwner(t *testing.T) {
	pods := []*corev1.Pod{pod("a").gpus(8).jobSet("js", "w").obj(), pod("b").gpus(8).jobSet("js", "w").obj()}
	c := cacheWith(t, pods[0], pods[1])
	inf := c.dynF.ForResource(jobSetGVR).Informer()
	must(t, inf.GetStore().Add(withUID(jobSetObj("js", nil, nil), "js-1", true)))
	c.ownerInformers[jobSetGVR] = inf
	client := fake.NewClientset(pods[0], pods[1])
	calls := 0
	bindingAPI(client, nil, &calls)
	b := &binder{client: client, cache: c, now: func() time.Time { return time.Unix(300, 0) }, metrics: newBindMetrics()}
	kj := &kjob{key: "jobset/ns/js", pods: map[workload.PodRef]*corev1.Pod{
		{Job: "j", PodSet: 0, Index: 0}: pods[0], {Job: "j", PodSet: 0, Index: 1}: pods[1]}}
	w := &world{state: build.State(build.Topo(), []cluster.Node{build.Node().Name("n1").Obj()}), byID: map[workload.JobID]*kjob{"j": kj}}
	gb := engine.GangBind{Job: "j", Pods: []engine.PodBind{
		{Placed: cluster.Placed{Pod: workload.PodRef{Job: "j", PodSet: 0, Index: 0}}, Node: "n1"},
		{Placed: cluster.Placed{Pod: workload.PodRef{Job: "j", PodSet: 0, Index: 1}}, Node: "n1"}}}
	n, err := b.bindGang(context.Background(), w, gb)
	if n != 0 || err == nil || !strings.Contains(err.Error(), "its JobSet ns/js is being deleted") {
		t.Errorf("bindGang = %d, %v; want 0 bound and the JobSet's deletion", n, err)
	}
	if calls != 0 {
		t.Errorf("%d binding writes sent for a gang whose owner is being deleted", calls)
	}
	if _, ok := c.assumed[string(pods[0].UID)]; ok {
		t.Errorf("a pod not bound is assumed bound")
	}
}

// TestOwnersDiscoveredLater: a controller's CRD installed after corral
// started is found by the next discovery round, and its objects are read
// from then on.
func TestOwnersDiscoveredLater(t *testing.T) {
	client := fake.NewClientset()
	js := withUID(jobSetObj("js", map[string]any{"replicatedJobs": []any{rjob("w", 2, 2, 8)}}, nil), "js-1", false)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{jobSetGVR: "JobSetList"}, js)
	c, err := NewCache(client, dyn, testCfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if c.addServedOwners(ctx) || c.ownerStores().jobSets != nil {
		t.Fatal("JobSets read before their CRD is served")
	}
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "jobset.x-k8s.io/v1alpha2",
		APIResources: []metav1.APIResource{{Name: "jobsets", Kind: "JobSet", Namespaced: true}}}}
	if !c.addServedOwners(ctx) {
		t.Fatal("the JobSet resource served now was not added")
	}
	st := c.ownerStores().jobSets
	if st == nil {
		t.Fatal("no JobSet store after discovery")
	}
	if _, ok, _ := st.GetByKey("ns/js"); !ok {
		t.Errorf("the JobSet is not in the store")
	}
	if c.addServedOwners(ctx) {
		t.Errorf("a resource already read was added again")
	}
}
