package kube

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// The workload controllers' own objects are read through the dynamic
// client as unstructured objects, at the versions the pinned releases serve
// (JobSet v0.11, LeaderWorkerSet v0.8, KubeRay v1.6). corral reads a handful
// of spec fields; importing the controllers' Go types would pull each one's
// whole dependency tree (controller-runtime, and for Kueue and KubeRay many
// more) into the scheduler for that.
var (
	jobSetGVR     = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	lwsGVR        = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	rayClusterGVR = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
	ownerGVRs     = []schema.GroupVersionResource{jobSetGVR, lwsGVR, rayClusterGVR}
)

// Labels and annotations the controllers put on their pods (from their API
// packages: sigs.k8s.io/jobset/api/jobset/v1alpha2, sigs.k8s.io/lws/api/
// leaderworkerset/v1, ray-operator/controllers/ray/utils, sigs.k8s.io/kueue).
const (
	jobSetNameLabel       = "jobset.sigs.k8s.io/jobset-name"
	jobSetRJobLabel       = "jobset.sigs.k8s.io/replicatedjob-name"
	jobSetExclusiveKey    = "alpha.jobset.sigs.k8s.io/exclusive-topology"
	jobCompletionIndexKey = "batch.kubernetes.io/job-completion-index"
	lwsNameLabel          = "leaderworkerset.sigs.k8s.io/name"
	lwsGroupLabel         = "leaderworkerset.sigs.k8s.io/group-index"
	lwsWorkerIndexLabel   = "leaderworkerset.sigs.k8s.io/worker-index"
	lwsSizeAnnotation     = "leaderworkerset.sigs.k8s.io/size"
	lwsExclusiveKey       = "leaderworkerset.sigs.k8s.io/exclusive-topology"
	rayClusterLabel       = "ray.io/cluster"
	kueueRequiredTopology = "kueue.x-k8s.io/podset-required-topology"
	kueuePreferredTopo    = "kueue.x-k8s.io/podset-preferred-topology"
)

// ownerView reads the objects that own corral's pods. A nil store means the
// resource is not served by the API server (its CRD is not installed).
type ownerView struct {
	jobs        cache.Store // batch/v1 Jobs
	jobSets     cache.Store
	lwss        cache.Store
	rayClusters cache.Store
}

// ownerReader is implemented by lookups that can read owners; lookups
// without it (tests of other parts, running pods) skip these checks.
type ownerReader interface {
	owners() *ownerView
}

func (l lookup) owners() *ownerView {
	return l.c.ownerStores()
}

// laterSet is a part of a gang that its controller creates only after the
// first members are placed (or ready): the engine places it with the rest,
// the adapter holds its room. tmpl is its pod template, for its request.
type laterSet struct {
	count int
	tmpl  *corev1.Pod
	part  string // the exclusive part (child Job) it belongs to; "" none
}

// gangShape is what a pod's owner says of its gang.
type gangShape struct {
	min   int        // gang minimum; 0 when the owner does not say
	total int        // members the owner means to create in all; 0 unknown
	later []laterSet // members created only after the first are placed
	// requiredLabel is the node label of the level every member must share
	// (JobSet / LWS exclusive topology, Kueue's podset-required-topology).
	requiredLabel  string
	preferredLabel string
	// exclusiveLabel is the node label of the level each exclusive part
	// (a JobSet child Job) has a domain of to itself.
	exclusiveLabel string
	waiting        string // not ready to be placed: why
	advice         string // what would end the wait, for explain
	unknown        string // the size cannot be read: why
}

const (
	adviceGone      = "its owner is gone or being deleted: corral places none of its pods (they are removed soon)"
	adviceSuspended = "its owner is suspended: it starts once its queue (e.g. Kueue) admits it or someone resumes it"
)

// controllerGang is the gang key of a controller's pod, "" if none: every
// JobSet pod is one gang (under exclusive placement each child Job is a
// part of it, exclusivePart); each LWS group is one; a RayCluster is one.
func controllerGang(p *corev1.Pod) (key, kind, name string) {
	ns := p.Namespace
	if js := p.Labels[jobSetNameLabel]; js != "" {
		return "jobset/" + ns + "/" + js, "JobSet", js
	}
	if lws := p.Labels[lwsNameLabel]; lws != "" {
		v := lws + "/" + p.Labels[lwsGroupLabel]
		return "leaderworkerset/" + ns + "/" + v, "LeaderWorkerSet", v
	}
	if rc := p.Labels[rayClusterLabel]; rc != "" {
		return "raycluster/" + ns + "/" + rc, "RayCluster", rc
	}
	return "", "", ""
}

// exclusivePart is the child Job of a JobSet pod under exclusive
// placement (JobSet copies its annotation onto the pods), "" otherwise:
// the part of the gang that gets a domain to itself.
func exclusivePart(p *corev1.Pod) string {
	if p.Labels[jobSetNameLabel] == "" || p.Annotations[jobSetExclusiveKey] == "" {
		return ""
	}
	return controllingOwner(p, "Job")
}

func controllingOwner(p *corev1.Pod, kind string) string {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == kind {
			return o.Name
		}
	}
	return ""
}

// shapeOf reads the gang of members (pods of one gang key) from its owner.
// finished are the gang's pods that already succeeded: they will not run
// again, so the gang waits for the others only.
func (ov *ownerView) shapeOf(kind, name string, members, finished []*corev1.Pod) gangShape {
	first := members[0]
	ns := first.Namespace
	var s gangShape
	// A pod whose controlling Job is gone or being deleted is never placed:
	// its owner no longer wants it (the garbage collector removes it soon).
	for _, p := range members {
		for _, o := range p.OwnerReferences {
			if o.Controller == nil || !*o.Controller || o.Kind != "Job" || !strings.HasPrefix(o.APIVersion, "batch/") || ov.jobs == nil {
				continue
			}
			obj, ok, _ := ov.jobs.GetByKey(ns + "/" + o.Name)
			if !ok {
				s.waiting, s.advice = fmt.Sprintf("its Job %s/%s does not exist (deleted, or not seen yet)", ns, o.Name), adviceGone
				return s
			}
			j := obj.(*batchv1.Job)
			if o.UID != "" && j.UID != o.UID {
				s.waiting, s.advice = fmt.Sprintf("its Job %s/%s was deleted and created again", ns, o.Name), adviceGone
				return s
			}
			if j.DeletionTimestamp != nil {
				s.waiting, s.advice = fmt.Sprintf("its Job %s/%s is being deleted", ns, o.Name), adviceGone
				return s
			}
		}
	}
	switch kind {
	case "JobSet":
		return ov.jobSetShape(ns, name, members, finished)
	case "LeaderWorkerSet":
		lws, _, _ := strings.Cut(name, "/")
		return ov.lwsShape(ns, lws, members)
	case "RayCluster":
		return ov.rayShape(ns, name)
	}
	return s
}

// object reads an owner and says why it cannot be used, if it cannot.
func object(store cache.Store, resource, kindName, ns, name string) (*unstructured.Unstructured, gangShape, bool) {
	var s gangShape
	if store == nil {
		s.unknown = fmt.Sprintf("the %s resource is not served, so the %s's size cannot be read", resource, kindName)
		return nil, s, false
	}
	o, ok, _ := store.GetByKey(ns + "/" + name)
	if !ok {
		s.waiting, s.advice = fmt.Sprintf("its %s %s/%s does not exist (deleted, or not seen yet)", kindName, ns, name), adviceGone
		return nil, s, false
	}
	u := o.(*unstructured.Unstructured)
	if u.GetDeletionTimestamp() != nil {
		s.waiting, s.advice = fmt.Sprintf("its %s %s/%s is being deleted", kindName, ns, name), adviceGone
		return nil, s, false
	}
	if susp, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend"); susp {
		s.waiting, s.advice = fmt.Sprintf("its %s %s/%s is suspended (a queue such as Kueue has not admitted it)", kindName, ns, name), adviceSuspended
		return nil, s, false
	}
	return u, s, true
}

// jobSetShape: the whole JobSet is one gang of every replicated job's
// replicas × parallelism. With startupPolicyOrder InOrder the JobSet
// controller creates a replicated job only once the one before it is
// ready, so the later ones are held for. With exclusive placement each
// child Job is a part of the gang with a domain of the named level to
// itself; JobSet's pod webhook refuses a child Job's followers until its
// leader (completion index 0) is bound, so each child's followers are held
// for in its leader's domain. Pods that succeeded count as created (an
// InOrder replicated job whose pods all finished is not held for again) and
// leave the minimum: a driver that completes before its workers are placed
// must not keep them waiting for it.
func (ov *ownerView) jobSetShape(ns, name string, members, finished []*corev1.Pod) gangShape {
	u, s, ok := object(ov.jobSets, "jobsets.jobset.x-k8s.io", "JobSet", ns, name)
	if !ok {
		return s
	}
	rjs, _, _ := unstructured.NestedSlice(u.Object, "spec", "replicatedJobs")
	order, _, _ := unstructured.NestedString(u.Object, "spec", "startupPolicy", "startupPolicyOrder")
	exclusive := u.GetAnnotations()[jobSetExclusiveKey]
	have := map[string]int{}
	children := map[string][]*corev1.Pod{} // child Job -> its pods, under exclusive placement
	var childNames []string
	for _, p := range finished {
		have[p.Labels[jobSetRJobLabel]]++
	}
	for _, p := range members {
		have[p.Labels[jobSetRJobLabel]]++
		if part := exclusivePart(p); part != "" {
			if _, ok := children[part]; !ok {
				childNames = append(childNames, part)
			}
			children[part] = append(children[part], p)
		}
	}
	for _, r := range rjs {
		rj, _ := r.(map[string]any)
		rjName, _, _ := unstructured.NestedString(rj, "name")
		replicas, found, _ := nestedInt(rj, "replicas")
		if !found {
			replicas = 1
		}
		par := jobParallelismOf(rj)
		tmpl := podFromTemplate(rj, ns, "template", "spec", "template")
		if ex := tmplAnnotation(rj, jobSetExclusiveKey); exclusive == "" && ex != "" {
			exclusive = ex
		}
		want := int(replicas) * par
		if len(children) > 0 && order == "InOrder" && have[rjName] == 0 {
			// Not created yet under InOrder: its child Jobs have no names
			// to hold room by, so it is placed when it comes (its pods'
			// own anti-affinity keeps it exclusive against running pods).
			continue
		}
		s.total += want
		if len(children) > 0 {
			// Each child Job of this replicated job whose leader exists
			// and followers not all yet: they come once the leader is
			// bound, and their room is held until they do.
			for _, c := range childNames {
				pods := children[c]
				if pods[0].Labels[jobSetRJobLabel] == rjName && hasLeader(pods) && par > len(pods) {
					s.later = append(s.later, laterSet{count: par - len(pods), tmpl: tmpl, part: c})
				}
			}
			continue
		}
		if order == "InOrder" && have[rjName] == 0 && want > 0 {
			s.later = append(s.later, laterSet{count: want, tmpl: tmpl})
		}
	}
	if len(children) > 0 {
		s.exclusiveLabel = exclusive
	}
	s.min = max(s.total-len(finished), min(s.total, 1))
	return s
}

// hasLeader reports whether a child Job's leader (completion index 0) is
// among members.
func hasLeader(members []*corev1.Pod) bool {
	for _, p := range members {
		if p.Annotations[jobCompletionIndexKey] == "0" || p.Labels[jobCompletionIndexKey] == "0" {
			return true
		}
	}
	return false
}

// jobParallelismOf is the pods a child Job template runs at once:
// parallelism (default 1), at most its completions.
func jobParallelismOf(rj map[string]any) int {
	par, found, _ := nestedInt(rj, "template", "spec", "parallelism")
	if !found {
		par = 1
	}
	if c, found, _ := nestedInt(rj, "template", "spec", "completions"); found && c < par {
		par = c
	}
	return int(max(par, 0))
}

func tmplAnnotation(obj map[string]any, key string) string {
	v, _, _ := unstructured.NestedString(obj, "template", "metadata", "annotations", key)
	return v
}

// podFromTemplate turns a pod template inside obj (at path) into a pod,
// so that its request is read as a pod's is. nil when absent or unreadable.
func podFromTemplate(obj map[string]any, ns string, path ...string) *corev1.Pod {
	m, found, _ := unstructured.NestedMap(obj, path...)
	if !found {
		return nil
	}
	var t corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &t); err != nil {
		return nil
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Annotations: t.Annotations, Labels: t.Labels}, Spec: t.Spec}
}

// lwsShape: each group (a leader and its workers) is a gang of the group's
// size, which LWS writes on every pod. With startupPolicy LeaderReady LWS
// creates the workers only once the leader is ready, so they are held for.
func (ov *ownerView) lwsShape(ns, name string, members []*corev1.Pod) gangShape {
	var s gangShape
	size, err := strconv.Atoi(members[0].Annotations[lwsSizeAnnotation])
	if err != nil || size < 1 {
		size = 0
	}
	u, os, ok := object(ov.lwss, "leaderworkersets.leaderworkerset.x-k8s.io", "LeaderWorkerSet", ns, name)
	if !ok {
		if os.waiting != "" {
			return os
		}
		// Not served: the size is on the pods, the startup policy is not.
		s.min, s.total = size, size
		if size == 0 {
			s.unknown = os.unknown
		}
		return s
	}
	if size == 0 {
		if v, found, _ := nestedInt(u.Object, "spec", "leaderWorkerTemplate", "size"); found {
			size = int(v)
		}
	}
	s.min, s.total = size, size
	s.requiredLabel = u.GetAnnotations()[lwsExclusiveKey]
	policy, _, _ := unstructured.NestedString(u.Object, "spec", "startupPolicy")
	if policy == "LeaderReady" && size > len(members) && lwsHasLeader(members) {
		tmpl := podFromTemplate(u.Object, ns, "spec", "leaderWorkerTemplate", "workerTemplate")
		s.later = []laterSet{{count: size - len(members), tmpl: tmpl}}
	}
	return s
}

// lwsHasLeader reports whether the group's leader is among members: the
// workers it lacks are created only after the leader is ready.
func lwsHasLeader(members []*corev1.Pod) bool {
	for _, p := range members {
		if p.Labels[lwsWorkerIndexLabel] == "0" {
			return true
		}
	}
	return false
}

// rayShape: the head and every worker group's minimum (times its hosts
// per replica) start together; workers above the minimum, which the
// autoscaler adds and removes, are elastic members.
func (ov *ownerView) rayShape(ns, name string) gangShape {
	u, s, ok := object(ov.rayClusters, "rayclusters.ray.io", "RayCluster", ns, name)
	if !ok {
		return s
	}
	s.min = 1
	groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "workerGroupSpecs")
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		if susp, _, _ := unstructured.NestedBool(gm, "suspend"); susp {
			continue
		}
		minR, _, _ := nestedInt(gm, "minReplicas")
		hosts, found, _ := nestedInt(gm, "numOfHosts")
		if !found || hosts < 1 {
			hosts = 1
		}
		s.min += int(max(minR, 0) * hosts)
	}
	s.total = s.min
	return s
}

// gatedPods names members that still carry scheduling gates (Kueue's
// admission or topology gate, or any other): kube-scheduler does not
// place them, and neither does corral.
func gatedPods(members []*corev1.Pod) string {
	var gated []string
	gates := map[string]bool{}
	for _, p := range members {
		if len(p.Spec.SchedulingGates) == 0 {
			continue
		}
		gated = append(gated, p.Name)
		for _, g := range p.Spec.SchedulingGates {
			gates[g.Name] = true
		}
	}
	if len(gated) == 0 {
		return ""
	}
	var names []string
	for g := range gates {
		names = append(names, g)
	}
	sort.Strings(names)
	return fmt.Sprintf("%d of %d pods wait for their scheduling gates to be removed (%s)", len(gated), len(members), strings.Join(names, ", "))
}

// nestedInt reads an integer field: int64 as the API server's JSON decodes
// it, or float64 as a generic YAML or JSON decoder does.
func nestedInt(obj map[string]any, fields ...string) (int64, bool, error) {
	v, found, err := unstructured.NestedFieldNoCopy(obj, fields...)
	if !found || err != nil {
		return 0, found, err
	}
	switch n := v.(type) {
	case int64:
		return n, true, nil
	case int:
		return int64(n), true, nil
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true, nil
		}
	}
	return 0, false, fmt.Errorf("%s: %v is not an integer", strings.Join(fields, "."), v)
}
