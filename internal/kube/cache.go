package kube

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/corral-dev/corral/api/v1alpha1"
)

// adapterConfig is what the conversion code needs of the configuration.
type adapterConfig struct {
	schedulerName string
	gpuResource   string
	draDriver     string
	topologyName  string
	nodeSelector  labels.Selector
}

// Group-version-resources read through the dynamic client, so that one
// adapter serves the versions the API server offers.
var (
	podGroupVersions = []schema.GroupVersionResource{
		{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"},  // 1.37
		{Group: "scheduling.k8s.io", Version: "v1alpha2", Resource: "podgroups"}, // 1.36
	}
	topologyGVR = schema.GroupVersionResource{Group: "corral.dev", Version: "v1alpha1", Resource: v1alpha1.TopologyPlural}
	queueGVR    = schema.GroupVersionResource{Group: "corral.dev", Version: "v1alpha1", Resource: v1alpha1.QueuePlural}
)

// Cache is the informer-fed view of the cluster. Informers keep it current;
// a cycle reads it through listers. The assumed map (bindings this process
// made that the informer has not shown yet) is guarded by mu.
type Cache struct {
	cfg     adapterConfig
	factory informers.SharedInformerFactory
	dynF    dynamicinformer.DynamicSharedInformerFactory

	pods        cache.SharedIndexInformer
	nodes       cache.SharedIndexInformer
	jobs        cache.SharedIndexInformer
	slices      cache.SharedIndexInformer
	claims      cache.SharedIndexInformer
	classes     cache.SharedIndexInformer
	namespaces  cache.SharedIndexInformer // their labels, for pod affinity's namespaceSelector
	podGroups   cache.SharedIndexInformer // nil when the API server serves none
	topologies  cache.SharedIndexInformer // nil when the CRD is not installed
	queues      cache.SharedIndexInformer // nil when the CRD is not installed
	podGroupGVR schema.GroupVersionResource
	// ownerInformers read the workload controllers' objects (owners.go),
	// one per resource the API server serves; resources whose CRDs are
	// installed later join them (ownerdiscovery.go). Guarded by ownerMu.
	ownerMu        sync.RWMutex
	ownerInformers map[schema.GroupVersionResource]cache.SharedIndexInformer
	// servedNow asks discovery whether a resource is served.
	servedNow func(schema.GroupVersionResource) bool

	wake chan struct{}
	// cel keeps compiled DRA selectors by expression text, and their
	// verdicts on devices, across cycles.
	cel *selectorCache

	mu      sync.Mutex
	assumed map[string]assumedPod // pod UID -> binding in flight
}

type assumedPod struct {
	node        string
	annotations map[string]string
	at          time.Time
	// namespace and name let a doubted binding be read back.
	namespace, name string
	// doubt: the binding's write failed in a way that leaves its fate
	// unknown (a timeout, a lost connection), or the informer has not
	// shown it for a long time. The pod is still counted as bound, so
	// that nothing is placed on its devices, until the API server says
	// otherwise (binder.settleDoubts).
	doubt bool
}

// doubtful names a binding to read back.
type doubtful struct{ uid, namespace, name, node string }

// NewCache sets up informers; Start runs them.
func NewCache(client kubernetes.Interface, dyn dynamic.Interface, cfg adapterConfig) (*Cache, error) {
	c := &Cache{cfg: cfg, wake: make(chan struct{}, 1), assumed: map[string]assumedPod{}, cel: newCELCache()}
	c.factory = informers.NewSharedInformerFactory(client, 0)
	c.pods = c.factory.Core().V1().Pods().Informer()
	c.nodes = c.factory.Core().V1().Nodes().Informer()
	c.jobs = c.factory.Batch().V1().Jobs().Informer()
	c.slices = c.factory.Resource().V1().ResourceSlices().Informer()
	c.claims = c.factory.Resource().V1().ResourceClaims().Informer()
	c.classes = c.factory.Resource().V1().DeviceClasses().Informer()
	c.namespaces = c.factory.Core().V1().Namespaces().Informer()

	c.dynF = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c.servedNow = func(gvr schema.GroupVersionResource) bool { return isServed(client, gvr) }
	served := servedResources(client)
	for _, gvr := range podGroupVersions {
		if served[gvr] {
			c.podGroupGVR = gvr
			c.podGroups = c.dynF.ForResource(gvr).Informer()
			break
		}
	}
	if served[topologyGVR] {
		c.topologies = c.dynF.ForResource(topologyGVR).Informer()
	}
	if served[queueGVR] {
		c.queues = c.dynF.ForResource(queueGVR).Informer()
	}
	c.ownerInformers = map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	for _, gvr := range ownerGVRs {
		if served[gvr] {
			c.ownerInformers[gvr] = c.dynF.ForResource(gvr).Informer()
		}
	}
	for _, inf := range c.informers() {
		if err := c.wakeOnChange(inf); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// wakeOnChange asks for a cycle on every change the informer sees.
func (c *Cache) wakeOnChange(inf cache.SharedIndexInformer) error {
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.Wake() },
		UpdateFunc: func(any, any) { c.Wake() },
		DeleteFunc: func(any) { c.Wake() },
	})
	return err
}

func (c *Cache) informers() []cache.SharedIndexInformer {
	out := []cache.SharedIndexInformer{c.pods, c.nodes, c.jobs, c.slices, c.claims, c.classes, c.namespaces}
	if c.podGroups != nil {
		out = append(out, c.podGroups)
	}
	if c.topologies != nil {
		out = append(out, c.topologies)
	}
	if c.queues != nil {
		out = append(out, c.queues)
	}
	for _, gvr := range ownerGVRs {
		if inf := c.ownerInformer(gvr); inf != nil {
			out = append(out, inf)
		}
	}
	return out
}

// servedResources asks discovery which of the optional resources exist.
func servedResources(client kubernetes.Interface) map[schema.GroupVersionResource]bool {
	out := map[schema.GroupVersionResource]bool{}
	for _, gvr := range append(append(append([]schema.GroupVersionResource(nil), podGroupVersions...), topologyGVR, queueGVR), ownerGVRs...) {
		out[gvr] = isServed(client, gvr)
	}
	return out
}

func isServed(client kubernetes.Interface, gvr schema.GroupVersionResource) bool {
	list, err := client.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true
		}
	}
	return false
}

// Start runs the informers and waits for their first lists.
func (c *Cache) Start(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	c.dynF.Start(ctx.Done())
	var synced []cache.InformerSynced
	for _, inf := range c.informers() {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("informer caches did not sync: %w", ctx.Err())
	}
	go c.discoverOwners(ctx, ownerRediscoverEvery) // ownerdiscovery.go
	return nil
}

// Wake asks for a cycle soon; it never blocks.
func (c *Cache) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Woken delivers wake-ups.
func (c *Cache) Woken() <-chan struct{} { return c.wake }

// assume records a binding this process made, so that the next snapshot
// counts the pod as bound before the informer shows it.
func (c *Cache) assume(p *corev1.Pod, node string, annotations map[string]string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.assumed[string(p.UID)] = assumedPod{node: node, annotations: annotations, at: now, namespace: p.Namespace, name: p.Name}
}

// doubt marks an assumed binding whose fate is unknown.
func (c *Cache) doubt(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.assumed[uid]; ok {
		a.doubt = true
		c.assumed[uid] = a
	}
}

// confirm clears a doubt: the API server showed the binding.
func (c *Cache) confirm(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.assumed[uid]; ok {
		a.doubt = false
		c.assumed[uid] = a
	}
}

// doubts lists the assumed bindings to read back, in UID order.
func (c *Cache) doubts() []doubtful {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []doubtful
	for uid, a := range c.assumed {
		if a.doubt && a.name != "" {
			out = append(out, doubtful{uid: uid, namespace: a.namespace, name: a.name, node: a.node})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].uid < out[j].uid })
	return out
}

// forget drops an assumption (the binding failed).
func (c *Cache) forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.assumed, uid)
}

// assumedNow returns the assumptions still needed: a pod whose informer copy
// is bound, or gone, no longer needs one. One the informer has not shown
// bound for a minute is not dropped but doubted: its informer may be cut
// off from a restarted API server, and dropping it would free devices the
// pod may hold; the next cycle reads it back (binder.settleDoubts).
func (c *Cache) assumedNow(pods []*corev1.Pod, now time.Time) map[string]assumedPod {
	byUID := map[string]*corev1.Pod{}
	for _, p := range pods {
		byUID[string(p.UID)] = p
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]assumedPod{}
	for uid, a := range c.assumed {
		p, ok := byUID[uid]
		if !ok || p.Spec.NodeName != "" {
			delete(c.assumed, uid)
			continue
		}
		if now.Sub(a.at) > time.Minute && !a.doubt {
			a.doubt = true
			c.assumed[uid] = a
		}
		out[uid] = a
	}
	return out
}

// lists of typed objects, sorted by namespace/name for determinism.

func (c *Cache) listPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, o := range c.pods.GetStore().List() {
		out = append(out, o.(*corev1.Pod))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (c *Cache) listNodes() []*corev1.Node {
	var out []*corev1.Node
	for _, o := range c.nodes.GetStore().List() {
		out = append(out, o.(*corev1.Node))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *Cache) listSlices() []*resourcev1.ResourceSlice {
	var out []*resourcev1.ResourceSlice
	for _, o := range c.slices.GetStore().List() {
		out = append(out, o.(*resourcev1.ResourceSlice))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *Cache) listClaims() []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for _, o := range c.claims.GetStore().List() {
		out = append(out, o.(*resourcev1.ResourceClaim))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// topologyChoice records which Topology objects the last snapshot used and
// why others were not, for their status.
type topologyChoice struct {
	inUse   string
	invalid map[string]string // name -> why
	notUsed []string
}

// chooseTopology reads the Topology object in use: level names to node
// labels, in order, widest first, and which objects were used or not. No
// object (or no CRD) means a flat cluster.
func (c *Cache) chooseTopology() (names []string, labelOf map[string]string, choice topologyChoice, err error) {
	names, labelOf, chosen, objs, err := c.readTopology()
	choice.invalid = map[string]string{}
	for _, o := range objs {
		switch {
		case chosen != nil && o.GetName() == chosen.GetName() && err == nil:
			choice.inUse = o.GetName()
		case chosen != nil && o.GetName() == chosen.GetName():
			choice.invalid[o.GetName()] = err.Error()
		default:
			choice.notUsed = append(choice.notUsed, o.GetName())
		}
	}
	return names, labelOf, choice, err
}

func (c *Cache) readTopology() (names []string, labelOf map[string]string, chosen *unstructured.Unstructured, objs []*unstructured.Unstructured, err error) {
	labelOf = map[string]string{}
	if c.topologies == nil {
		return nil, labelOf, nil, nil, nil
	}
	for _, o := range c.topologies.GetStore().List() {
		objs = append(objs, o.(*unstructured.Unstructured))
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
	switch {
	case c.cfg.topologyName != "":
		for _, o := range objs {
			if o.GetName() == c.cfg.topologyName {
				chosen = o
			}
		}
		if chosen == nil {
			return nil, labelOf, nil, objs, fmt.Errorf("Topology %q not found", c.cfg.topologyName)
		}
	case len(objs) == 1:
		chosen = objs[0]
	case len(objs) > 1:
		return nil, labelOf, nil, objs, fmt.Errorf("%d Topology objects and no topologyName in the configuration", len(objs))
	default:
		return nil, labelOf, nil, objs, nil
	}
	var t v1alpha1.Topology
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(chosen.Object, &t); err != nil {
		return nil, labelOf, chosen, objs, fmt.Errorf("Topology %s: %v", chosen.GetName(), err)
	}
	if err := t.Validate(); err != nil {
		return nil, labelOf, chosen, objs, fmt.Errorf("Topology %s: %v", chosen.GetName(), err)
	}
	for _, l := range t.Spec.Levels {
		names = append(names, l.Name)
		labelOf[l.Name] = l.NodeLabel
	}
	return names, labelOf, chosen, objs, nil
}

// readQueues reads the Queue objects. One that does not decode is kept by
// name and parent, with the error, so that its status can say why it is
// left out.
func (c *Cache) readQueues(models []string) *queueSet {
	if c.queues == nil {
		return newQueueSet(nil, nil, c.cfg.gpuResource, models)
	}
	var objs []*v1alpha1.Queue
	unreadable := map[string]string{}
	for _, o := range c.queues.GetStore().List() {
		u := o.(*unstructured.Unstructured)
		var q v1alpha1.Queue
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &q); err != nil {
			parent, _, _ := unstructured.NestedString(u.Object, "spec", "parent")
			q = v1alpha1.Queue{}
			q.Name, q.Spec.Parent = u.GetName(), parent
			unreadable[q.Name] = fmt.Sprintf("the spec does not decode: %v", err)
		}
		objs = append(objs, &q)
	}
	return newQueueSet(objs, unreadable, c.cfg.gpuResource, models)
}

// lookup implements groupLookup over the informer stores.
type lookup struct {
	c   *Cache
	dra *draView // nil until the cycle's DRA inventory is read
	// elig matches the cycle's node constraints; nil until it is built.
	elig *eligibility
}

func (l lookup) jobParallelism(ns, name string) (int, bool) {
	o, ok, err := l.c.jobs.GetStore().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return 0, false
	}
	j := o.(*batchv1.Job)
	par := 1
	if j.Spec.Parallelism != nil {
		par = int(*j.Spec.Parallelism)
	}
	// The Job controller runs at most the completions still missing: the
	// last wave of a Job with completions > parallelism is smaller.
	if j.Spec.Completions != nil {
		if left := int(*j.Spec.Completions) - int(j.Status.Succeeded); left < par {
			par = max(left, 1)
		}
	}
	return par, true
}

func (l lookup) podGroup(ns, name string) (int, string, bool) {
	if l.c.podGroups == nil {
		return 0, "", false
	}
	o, ok, err := l.c.podGroups.GetStore().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return 0, "", false
	}
	u := o.(*unstructured.Unstructured)
	minCount, _, _ := unstructured.NestedInt64(u.Object, "spec", "schedulingPolicy", "gang", "minCount")
	key := ""
	if topo, ok, _ := unstructured.NestedSlice(u.Object, "spec", "schedulingConstraints", "topology"); ok && len(topo) > 0 {
		if m, ok := topo[0].(map[string]any); ok {
			key, _ = m["key"].(string)
		}
	}
	return int(minCount), key, true
}

func (l lookup) claim(ns, name string) (*resourcev1.ResourceClaim, bool) {
	o, ok, err := l.c.claims.GetStore().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	return o.(*resourcev1.ResourceClaim), true
}

func (l lookup) deviceClass(name string) (*resourcev1.DeviceClass, bool) {
	o, ok, err := l.c.classes.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	return o.(*resourcev1.DeviceClass), true
}

func (l lookup) devices() *draView { return l.dra }

func (l lookup) eligibility() *eligibility { return l.elig }
