package kube

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/engine"
)

// claimFinalizer protects an allocated claim until the controller manager
// deallocates it; without it an allocation would never be released.
const claimFinalizer = "resource.kubernetes.io/delete-protection"

// binder writes one gang's decision to the API server: each pod's claims
// first, then its binding.
type binder struct {
	client kubernetes.Interface
	cache  *Cache
	now    func() time.Time
	delay  time.Duration
	// fence closes every write when the Lease is not provably held
	// (fence.go); nil without leader election.
	fence   *Fence
	metrics *bindMetrics
	log     *slog.Logger // nil: no per-binding debug lines
	// blocked remembers when a PodDisruptionBudget last refused a pod's
	// eviction (see evictionBackoff). Used by the cycle goroutine only.
	blocked map[types.UID]time.Time
}

// bindGang binds every pod of a GangBind in order. It stops at the first
// failure: the pods bound so far stay bound (their placement is valid and the
// next cycle places the rest of the gang beside them), and the error says
// which pod failed.
func (b *binder) bindGang(ctx context.Context, w *world, gb engine.GangBind) (bound int, err error) {
	kj := w.byID[gb.Job]
	if kj == nil {
		return 0, fmt.Errorf("plan names unknown job %s", gb.Job)
	}
	// A gang whose pods or owner went away since the snapshot binds no pod
	// at all (bindguard.go); bindPod checks each pod again as it is sent.
	for _, pb := range gb.Pods {
		if pod := kj.pods[pb.Pod]; pod != nil {
			if why := b.cache.unbindable(pod); why != "" {
				return 0, fmt.Errorf("not bound: %s", why)
			}
		}
	}
	for i, pb := range gb.Pods {
		if i > 0 && b.delay > 0 {
			time.Sleep(b.delay)
		}
		pod := kj.pods[pb.Pod]
		if pod == nil {
			return bound, fmt.Errorf("plan names unknown pod %s", pb.Pod)
		}
		if err := b.bindPod(ctx, w, pod, pb); err != nil {
			return bound, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		bound++
	}
	return bound, nil
}

func (b *binder) bindPod(ctx context.Context, w *world, pod *corev1.Pod, pb engine.PodBind) error {
	if why := b.cache.unbindable(pod); why != "" {
		return fmt.Errorf("not bound: %s", why)
	}
	ann := map[string]string{}
	if len(pb.Devices) > 0 {
		ann[v1alpha1.AnnotationAssignedGPUs] = strings.Join(pb.Devices, ",")
	}
	if len(pb.NICs) > 0 {
		ann[v1alpha1.AnnotationAssignedNICs] = strings.Join(pb.NICs, ",")
	}
	if n, ok := w.state.NodeIndex(pb.Node); ok {
		if m := assignedMIG(w.state, n, pb.Alloc.Devices); m != "" {
			ann[v1alpha1.AnnotationAssignedMIG] = m
		}
	}
	for k, v := range w.bindAnnotations[string(pod.UID)] { // holds.go
		ann[k] = v
	}
	if plans := w.claimPlans(string(pod.UID)); len(plans) > 0 {
		if err := b.allocateClaims(ctx, w, pod, pb, plans); err != nil {
			return err
		}
		// The devices are named by the claims; the annotation would only
		// duplicate them.
		delete(ann, v1alpha1.AnnotationAssignedGPUs)
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, Annotations: ann},
		Target:     corev1.ObjectReference{Kind: "Node", Name: pb.Node},
	}
	// Assume first: a cycle that starts while the call is in flight must
	// already count the pod as placed.
	b.cache.assume(pod, pb.Node, ann, b.now())
	err := b.fence.Check()
	if err == nil {
		if b.log != nil {
			// Every binding write is logged as it is sent: the chaos tests
			// read these to prove a stale leader sent none.
			b.log.Debug("binding", "pod", pod.Namespace+"/"+pod.Name, "node", pb.Node)
		}
		err = b.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	}
	if err == nil {
		b.metrics.results.WithLabelValues("bound").Inc()
		return nil
	}
	// A failed write may have landed (its answer lost), or may be the
	// retry of one that did: settle asks the API server, not the informer.
	if err := b.settle(ctx, pod, pb.Node, err); err != nil {
		return fmt.Errorf("binding to %s: %w", pb.Node, err)
	}
	return nil
}

// claimPlans is how the pod's chosen devices fill its unallocated claims.
func (w *world) claimPlans(podUID string) []claimPlan {
	if w.dra == nil || len(w.claims[podUID]) == 0 {
		return nil
	}
	return w.dra.plans[podUID]
}

// allocateClaims writes the devices the engine chose into the pod's claims:
// the delete-protection finalizer first, then status.allocation with
// reservedFor the pod, as kube-scheduler does. The chosen devices fill the
// claims' requests in order (a firstAvailable request under the name of the
// alternative chosen, "request/subrequest"). Devices with shared counters
// are reserved first, so two partitions of one GPU chosen in one cycle are
// never both allocated.
func (b *binder) allocateClaims(ctx context.Context, w *world, pod *corev1.Pod, pb engine.PodBind, plans []claimPlan) error {
	if err := b.fence.Check(); err != nil {
		return err
	}
	if err := w.dra.reserve(pb.Node, pb.Devices); err != nil {
		return err
	}
	devices := append([]string(nil), pb.Devices...)
	for _, plan := range plans {
		cl := plan.claim
		var results []resourcev1.DeviceRequestAllocationResult
		for _, part := range plan.parts {
			count := part.count
			if part.all {
				count = len(devices)
			}
			if len(devices) < count || count == 0 {
				return fmt.Errorf("claim %s: plan chose too few devices", cl.Name)
			}
			for _, d := range devices[:count] {
				results = append(results, resourcev1.DeviceRequestAllocationResult{
					Request: part.result, Driver: b.cache.cfg.draDriver, Pool: w.poolOf(pb.Node, d), Device: d,
				})
			}
			devices = devices[count:]
		}
		c, err := b.client.ResourceV1().ResourceClaims(cl.Namespace).Get(ctx, cl.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Allocation != nil {
			return fmt.Errorf("claim %s was allocated by someone else meanwhile", cl.Name)
		}
		if !hasString(c.Finalizers, claimFinalizer) {
			c.Finalizers = append(c.Finalizers, claimFinalizer)
			if c, err = b.client.ResourceV1().ResourceClaims(cl.Namespace).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("claim %s: adding finalizer: %w", cl.Name, err)
			}
		}
		c.Status.Allocation = &resourcev1.AllocationResult{
			Devices: resourcev1.DeviceAllocationResult{Results: results},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{pb.Node}}},
			}}},
		}
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
			Resource: "pods", Name: pod.Name, UID: pod.UID,
		})
		if _, err := b.client.ResourceV1().ResourceClaims(cl.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				return fmt.Errorf("claim %s changed while allocating; will retry", cl.Name)
			}
			return fmt.Errorf("claim %s: writing allocation: %w", cl.Name, err)
		}
	}
	return nil
}

func hasString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// poolOf is the DRA pool of a device on a node (the driver's convention is
// the node's name).
func (w *world) poolOf(node, device string) string {
	if p, ok := w.pools[node][device]; ok {
		return p
	}
	return node
}
