package kube

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/workload"
)

// Owner labels of workload controllers whose pods form one gang, beyond
// those whose objects corral reads (owners.go).
var gangLabels = []struct{ kind, label string }{
	{"KubeflowJob", "training.kubeflow.org/job-name"},
}

// groupLookup answers what the adapter knows of a pod's group objects.
type groupLookup interface {
	// jobParallelism returns a batch/v1 Job's parallelism.
	jobParallelism(namespace, name string) (int, bool)
	// podGroup returns an upstream PodGroup's gang minimum and topology key.
	podGroup(namespace, name string) (minCount int, topologyKey string, ok bool)
	// claim returns a ResourceClaim by namespace and name.
	claim(namespace, name string) (*resourcev1.ResourceClaim, bool)
	// deviceClass returns a DeviceClass by name.
	deviceClass(name string) (*resourcev1.DeviceClass, bool)
	// devices is the cycle's DRA inventory, nil where claims are not read.
	devices() *draView
	// eligibility matches node constraints (affinity.go); nil where they
	// are not read (running pods).
	eligibility() *eligibility
}

// kjob is one job as the adapter sees it: the engine's Job plus the pods
// behind each PodRef.
type kjob struct {
	key     string // e.g. "job/ns/name", "podgroup/ns/name", "pod/ns/name"
	job     *workload.Job
	pods    map[workload.PodRef]*corev1.Pod
	refs    []workload.PodRef // in pod-set order
	bound   map[workload.PodRef]string
	group   string // PodGroup name, when the gang came from one
	invalid string // the job cannot be scheduled as written: why
	waiting string // the job is not ready to be scheduled yet: why
	// capped says why the gang minimum is below the declared one (gangmin.go).
	capped string
	// laterFrom is the first pod set of members the controller has not
	// created yet (they exist only in the engine's job, so that the gang
	// is placed whole, and have no pod); -1 when there are none.
	laterFrom int
	// holdFor is how long their room is held once the first pods are bound.
	holdFor time.Duration
	// warnings are problems that do not stop the job, for explain.
	warnings []string
	// waitAdvice is what would end the wait, for explain; empty: the
	// controller is still creating the gang's pods.
	waitAdvice string
}

// isLater reports whether ref names a member not created yet.
func (k *kjob) isLater(ref workload.PodRef) bool {
	return k.laterFrom >= 0 && ref.PodSet >= k.laterFrom
}

// pending reports whether some pod still waits for a node.
func (k *kjob) pending() bool { return len(k.bound) < len(k.refs) }

// gangKey finds which gang a pod belongs to and how its minimum is known.
func gangKey(p *corev1.Pod) (key, kind, name string) {
	ns := p.Namespace
	if g := p.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil && *g.PodGroupName != "" {
		return "podgroup/" + ns + "/" + *g.PodGroupName, "PodGroup", *g.PodGroupName
	}
	if g := p.Annotations[v1alpha1.AnnotationGang]; g != "" {
		return "gang/" + ns + "/" + g, "Gang", g
	}
	if key, kind, name := controllerGang(p); key != "" { // owners.go
		return key, kind, name
	}
	for _, gl := range gangLabels {
		if v := p.Labels[gl.label]; v != "" {
			return strings.ToLower(gl.kind) + "/" + ns + "/" + v, gl.kind, v
		}
	}
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "Job" && strings.HasPrefix(o.APIVersion, "batch/") {
			return "job/" + ns + "/" + o.Name, "Job", o.Name
		}
	}
	return "pod/" + ns + "/" + p.Name, "Pod", p.Name
}

// buildJobs groups corral's non-terminal pods into jobs. Pods that are bound
// (spec.nodeName set, or assumed by a binding in flight) are part of their
// job but not waiting.
func buildJobs(pods []*corev1.Pod, assumed map[string]string, groups groupLookup, levels map[string]string, cfg adapterConfig) []*kjob {
	byKey := map[string][]*corev1.Pod{}
	finished := map[string][]*corev1.Pod{} // by gang key: members that succeeded
	var keys []string
	for _, p := range pods {
		if p.Spec.SchedulerName != cfg.schedulerName || p.DeletionTimestamp != nil {
			continue
		}
		if terminal(p) {
			if p.Status.Phase == corev1.PodSucceeded {
				k, _, _ := gangKey(p)
				finished[k] = append(finished[k], p)
			}
			continue
		}
		k, _, _ := gangKey(p)
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], p)
	}
	sort.Strings(keys)
	var out []*kjob
	for _, k := range keys {
		members := byKey[k]
		sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
		out = append(out, newJob(k, members, finished[k], assumed, groups, levels, cfg))
	}
	return out
}

func newJob(key string, members, finished []*corev1.Pod, assumed map[string]string, groups groupLookup, levels map[string]string, cfg adapterConfig) *kjob {
	first := members[0]
	_, kind, name := gangKey(first)
	kj := &kjob{key: key, pods: map[workload.PodRef]*corev1.Pod{}, bound: map[workload.PodRef]string{}, laterFrom: -1}
	// The queue is resolved against the Queue objects later (world.admit).
	j := &workload.Job{ID: workload.JobID(key), Namespace: first.Namespace, Queue: first.Labels[v1alpha1.LabelQueue],
		Source: first.Namespace + "/" + first.Name}
	if j.Queue == "" {
		j.Queue = "default"
	}
	j.User = jobUser(first)
	kj.job = j
	var problems []string
	// Pod sets: pods with equal requests (and, under exclusive placement,
	// of one child Job), in name order of their first pod.
	type set struct {
		req  workload.Request
		part string
		pods []*corev1.Pod
	}
	var sets []*set
	for _, p := range members {
		req, err := podRequest(p, cfg.gpuResource, cfg.draDriver, groups)
		if nr, ok := err.(errNotReady); ok {
			kj.waiting = fmt.Sprintf("pod %s: %s", p.Name, nr.msg)
			continue
		}
		if err != nil {
			// The pod stays in its job so that it is told why: the job is
			// invalid and never placed.
			problems = append(problems, fmt.Sprintf("pod %s: %v", p.Name, err))
			req = workload.Request{CPUMilli: req.CPUMilli, MemMiB: req.MemMiB}
		}
		if p.Spec.Priority != nil && *p.Spec.Priority > j.Priority {
			j.Priority = *p.Spec.Priority
		}
		if j.Submit.IsZero() || p.CreationTimestamp.Time.Before(j.Submit) {
			j.Submit = p.CreationTimestamp.Time
		}
		placed := false
		part := exclusivePart(p) // owners.go
		for _, s := range sets {
			if s.req.Equal(req) && s.part == part {
				s.pods = append(s.pods, p)
				placed = true
				break
			}
		}
		if !placed {
			sets = append(sets, &set{req: req, part: part, pods: []*corev1.Pod{p}})
		}
	}
	for si, s := range sets {
		j.PodSets = append(j.PodSets, workload.PodSet{Name: fmt.Sprintf("set-%d", si), Count: len(s.pods), Request: s.req, Group: s.part})
		for i, p := range s.pods {
			ref := workload.PodRef{Job: j.ID, PodSet: si, Index: i}
			kj.pods[ref] = p
			kj.refs = append(kj.refs, ref)
			if p.Spec.NodeName != "" {
				kj.bound[ref] = p.Spec.NodeName
			} else if n, ok := assumed[string(p.UID)]; ok {
				kj.bound[ref] = n
			}
		}
	}

	// The gang minimum and topology: annotations win over what the owner says.
	minMembers, canExist := 0, -1
	var shape gangShape
	if or, ok := groups.(ownerReader); ok {
		shape = or.owners().shapeOf(kind, name, members, finished) // owners.go
		minMembers = shape.min
	}
	if g := gatedPods(members); g != "" {
		kj.waiting = g
		kj.waitAdvice = "the pods carry scheduling gates: whoever set them (Kueue removes its own when it admits the workload) must remove them first"
	} else if shape.waiting != "" {
		kj.waiting, kj.waitAdvice = shape.waiting, shape.advice
	}
	switch kind {
	case "Job":
		if par, ok := groups.jobParallelism(first.Namespace, name); ok {
			minMembers, canExist = par, par
		}
	case "PodGroup":
		kj.group = name
		mc, topoKey, ok := groups.podGroup(first.Namespace, name)
		if !ok {
			kj.waiting = fmt.Sprintf("PodGroup %s/%s does not exist yet", first.Namespace, name)
		}
		minMembers = mc
		if topoKey != "" {
			if lv, ok := levelByLabel(levels, topoKey); ok {
				j.Topology.Required = lv
			} else {
				problems = append(problems, fmt.Sprintf("PodGroup topology key %q is not a level of the cluster's Topology", topoKey))
			}
		}
	}
	ann := first.Annotations
	minByAnnotation := false
	if v := ann[v1alpha1.AnnotationMinMembers]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			problems = append(problems, fmt.Sprintf("annotation %s=%q: want a positive integer", v1alpha1.AnnotationMinMembers, v))
		} else {
			minMembers, minByAnnotation = n, true
		}
	}
	minMembers, kj.capped = capGangMin(minMembers, canExist, kind, name)
	j.MinMembers = minMembers
	// Levels the owner or Kueue names by node label (owners.go).
	for _, t := range []struct {
		label, what string
		dst         *string
	}{
		{shape.requiredLabel, kind + " exclusive topology", &j.Topology.Required},
		{shape.exclusiveLabel, kind + " exclusive topology", &j.Topology.Exclusive},
		{ann[kueueRequiredTopology], "annotation " + kueueRequiredTopology, &j.Topology.Required},
		{ann[kueuePreferredTopo], "annotation " + kueuePreferredTopo, &j.Topology.Preferred},
	} {
		if t.label == "" || *t.dst != "" {
			continue
		}
		if lv, ok := levelByLabel(levels, t.label); ok {
			*t.dst = lv
		} else if t.dst != &j.Topology.Preferred {
			problems = append(problems, fmt.Sprintf("%s %q is not the node label of a level of the cluster's Topology", t.what, t.label))
		}
	}
	if v := ann[v1alpha1.AnnotationRequiredTopology]; v != "" {
		j.Topology.Required = v
	}
	if v := ann[v1alpha1.AnnotationPreferredTopology]; v != "" {
		j.Topology.Preferred = v
	}
	problems = append(problems, coLocate(j, members, groups.eligibility(), levels)...) // affinity.go
	// A preferred level the Topology lacks is the engine's to ignore, with
	// a warning (Plan.Warnings), as in `corral sim`.
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{
		{v1alpha1.AnnotationExpectedRuntime, &j.ExpectedRuntime},
		{v1alpha1.AnnotationCheckpointInterval, &j.CheckpointInterval},
		{v1alpha1.AnnotationRestartOverhead, &j.RestartOverhead},
		{v1alpha1.AnnotationMinRuntime, &j.MinRuntime},
	} {
		if v := ann[d.key]; v != "" {
			dur, err := time.ParseDuration(v)
			if err != nil || dur < 0 {
				problems = append(problems, fmt.Sprintf("annotation %s=%q: want a duration such as 6h", d.key, v))
			} else {
				*d.dst = dur
			}
		}
	}
	problems = append(problems, readRuntimeLimits(j, first, kind, name, groups)...) // issue 6
	j.Preemptible = true
	if v := ann[v1alpha1.AnnotationPreemptible]; v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("annotation %s=%q: want true or false", v1alpha1.AnnotationPreemptible, v))
		} else {
			j.Preemptible = b
		}
	}
	problems = append(problems, remediationFromAnnotations(j, ann)...) // health.go
	if len(problems) > 0 {
		kj.invalid = strings.Join(problems, "; ")
		return kj
	}
	if kj.waiting == "" && !minByAnnotation && shape.unknown != "" {
		kj.waiting = fmt.Sprintf("the gang's size is unknown: %s; set the annotation %s on the pod template",
			shape.unknown, v1alpha1.AnnotationMinMembers)
		kj.waitAdvice = fmt.Sprintf("install the controller's CRD and let corral read it (then restart corral), or set %s on the pod template",
			v1alpha1.AnnotationMinMembers)
	}
	if kj.waiting == "" && len(shape.later) > 0 && !minByAnnotation {
		// The controller creates the rest only after these are placed: the
		// engine places the whole gang, binds the pods that exist and holds
		// the others' room (engine/later.go; the facts: holds.go).
		if why := kj.addLater(shape.later, cfg, groups); why != "" {
			problems = append(problems, why)
			kj.invalid = strings.Join(problems, "; ")
			return kj
		}
		hold, why := holdTimeout(first)
		if why != "" {
			problems = append(problems, why)
			kj.invalid = strings.Join(problems, "; ")
			return kj
		}
		kj.holdFor = hold
	}
	if exist := len(members) + kj.laterCount(); minMembers > exist && kj.waiting == "" {
		kj.waiting = gangWaitMessage(exist, minMembers)
	}
	return kj
}

// addLater adds the members the controller has not created yet to the
// engine's job, as pod sets without pods. It returns a problem when their
// template cannot be read.
func (k *kjob) addLater(later []laterSet, cfg adapterConfig, groups groupLookup) string {
	k.laterFrom = len(k.job.PodSets)
	for i, l := range later {
		if l.tmpl == nil {
			return "the owner's template of the members it creates later cannot be read"
		}
		req, err := podRequest(l.tmpl, cfg.gpuResource, cfg.draDriver, groups)
		if err != nil {
			return fmt.Sprintf("the members created later: %v", err)
		}
		if req.DRA {
			// Their claims do not exist yet: nothing could be held for them.
			return "members created later ask for DRA claims; corral cannot hold their devices: set " +
				v1alpha1.AnnotationMinMembers + " to the pods created first"
		}
		k.job.PodSets = append(k.job.PodSets, workload.PodSet{Name: fmt.Sprintf("later-%d", i), Count: l.count, Request: req, Group: l.part})
	}
	return ""
}

func (k *kjob) laterCount() int {
	n := 0
	if k.laterFrom >= 0 {
		for _, ps := range k.job.PodSets[k.laterFrom:] {
			n += ps.Count
		}
	}
	return n
}

// jobUser is who submitted the pod's job (docs/api.md): the
// corral.dev/user annotation, else the label of that name, else nobody.
// No fallback to the namespace: it names a team, which the queue keys of
// the runtime history already learn from, and a team filed as one user
// would mix its users' runtimes under a name that claims to be narrower.
func jobUser(p *corev1.Pod) string {
	if u := strings.TrimSpace(p.Annotations[v1alpha1.AnnotationUser]); u != "" {
		return u
	}
	return p.Labels[v1alpha1.LabelUser]
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func levelByLabel(levels map[string]string, label string) (string, bool) {
	for name, l := range levels {
		if l == label {
			return name, true
		}
	}
	return "", false
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
