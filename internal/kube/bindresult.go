package kube

import (
	"context"
	"errors"
	"net"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// bindFailure is what kind of error a binding write met. The kinds differ
// in what they say about the write: a conflict or a refused connection
// means it did not land; a timeout, a reset connection or a server error
// leave it unknown, so the pod is read back before corral decides.
type bindFailure string

const (
	failConflict    bindFailure = "conflict"        // 409 other than "already assigned"
	failElsewhere   bindFailure = "bound-elsewhere" // the pod is bound to another node
	failGone        bindFailure = "pod-gone"        // 404: the pod was deleted
	failTimeout     bindFailure = "timeout"         // client or server timeout
	failUnavailable bindFailure = "unavailable"     // connection refused or reset, 503, 429
	failServer      bindFailure = "server-error"    // other 5xx
	failFenced      bindFailure = "fenced"          // not sent: the Lease is not provably held
	failOther       bindFailure = "other"
)

// landed reports whether a failure of this kind proves the write did not
// take effect; for the others the pod must be read back.
func (f bindFailure) definite() bool {
	switch f {
	case failConflict, failElsewhere, failGone, failFenced:
		return true
	}
	return false
}

// alreadyAssigned matches kube-apiserver's refusal to bind a pod that has a
// node (pkg/registry/core/pod/storage: "pod %v is already assigned to node
// %q", a 409 Conflict).
var alreadyAssigned = regexp.MustCompile(`is already assigned to node "([^"]*)"`)

// classifyBind reads a binding error. done is true when the error means
// the binding corral asked for is in place already (a retried write whose
// first try landed): that is a success, not a failure.
func classifyBind(err error, node string) (done bool, kind bindFailure) {
	var fenced *FencedError
	if errors.As(err, &fenced) {
		return false, failFenced
	}
	if m := alreadyAssigned.FindStringSubmatch(err.Error()); m != nil {
		if m[1] == node {
			return true, ""
		}
		return false, failElsewhere
	}
	var netErr net.Error
	switch {
	case apierrors.IsAlreadyExists(err):
		return true, ""
	case apierrors.IsNotFound(err):
		return false, failGone
	case apierrors.IsConflict(err):
		return false, failConflict
	case utilnet.IsConnectionRefused(err):
		return false, failUnavailable
	case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &netErr) && netErr.Timeout()):
		return false, failTimeout
	case apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsProbableEOF(err):
		return false, failUnavailable
	case apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err):
		return false, failServer
	}
	if se, ok := err.(apierrors.APIStatus); ok && se.Status().Code >= 500 {
		return false, failServer
	}
	return false, failOther
}

// bindMetrics count binding writes by outcome: bound, already done (the
// API had the binding: a retry of a write that landed, or an error whose
// write landed), and real failures by kind.
type bindMetrics struct {
	results  *prometheus.CounterVec
	failures *prometheus.CounterVec
}

func newBindMetrics() *bindMetrics {
	return &bindMetrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_binding_writes_total",
			Help: "Pod binding writes by result: bound; already-done (the API server had the binding already, so it counts as bound); failed."},
			[]string{"result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_binding_write_failures_total",
			Help: "Pod binding writes that failed, by kind (conflict, bound-elsewhere, pod-gone, timeout, unavailable, server-error, fenced, other)."},
			[]string{"kind"}),
	}
}

func (m *bindMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.results, m.failures}
}

// readBack is how long corral waits to read a pod back after a binding
// whose fate is unknown; an API server that cannot answer that fast is
// asked again at the start of the next cycle.
const readBack = 3 * time.Second

// settle decides the fate of a binding write that failed: it reads the pod
// from the API server (not the informer, which may lag or be cut off) and
// keeps, corrects or drops the assumption. It returns nil when the pod is
// bound where corral wanted it.
func (b *binder) settle(ctx context.Context, pod *corev1.Pod, node string, err error) error {
	done, kind := classifyBind(err, node)
	if done {
		b.metrics.results.WithLabelValues("already-done").Inc()
		return nil
	}
	if !kind.definite() {
		rctx, cancel := context.WithTimeout(ctx, readBack)
		live, gerr := b.client.CoreV1().Pods(pod.Namespace).Get(rctx, pod.Name, metav1.GetOptions{})
		cancel()
		switch {
		case gerr == nil && live.UID == pod.UID && live.Spec.NodeName == node:
			// The write landed; only its answer was lost.
			b.metrics.results.WithLabelValues("already-done").Inc()
			return nil
		case gerr == nil && live.UID == pod.UID && live.Spec.NodeName != "":
			kind = failElsewhere
		case gerr == nil || apierrors.IsNotFound(gerr):
			// Not bound (or gone): the write did not land.
		default:
			// Unknown still: keep counting the pod where it may be bound,
			// so that nothing else is placed on its devices, and read it
			// back next cycle.
			b.cache.doubt(string(pod.UID))
			b.metrics.results.WithLabelValues("failed").Inc()
			b.metrics.failures.WithLabelValues(string(kind)).Inc()
			return err
		}
	}
	b.cache.forget(string(pod.UID))
	b.metrics.results.WithLabelValues("failed").Inc()
	b.metrics.failures.WithLabelValues(string(kind)).Inc()
	return err
}

// settleDoubts reads back, from the API server, every pod whose binding's
// fate corral does not know yet, and keeps the assumption only where the
// pod is bound as assumed. Called at the start of a cycle; pods the API
// server cannot answer for stay in doubt (still counted as bound).
func (b *binder) settleDoubts(ctx context.Context) {
	for _, d := range b.cache.doubts() {
		rctx, cancel := context.WithTimeout(ctx, readBack)
		live, err := b.client.CoreV1().Pods(d.namespace).Get(rctx, d.name, metav1.GetOptions{})
		cancel()
		switch {
		case err == nil && string(live.UID) == d.uid && live.Spec.NodeName == d.node:
			b.cache.confirm(d.uid)
		case err == nil || apierrors.IsNotFound(err):
			b.cache.forget(d.uid)
		}
	}
}
