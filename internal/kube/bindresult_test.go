package kube

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// injected is a fault for the fake API server's binding endpoint: err is
// returned before the binding lands, or after it (the answer is lost).
type injected struct {
	err   error
	after bool
}

// bindingAPI makes the fake clientset bind as kube-apiserver does
// (pkg/registry/core/pod/storage: a pod with a node gets a 409 "already
// assigned"), with a fault injected into the next binding, and counts
// the binding writes that reached it.
func bindingAPI(client *fake.Clientset, fault *injected, calls *int) {
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		*calls++
		b := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
		if fault != nil && fault.err != nil && !fault.after {
			return true, nil, fault.err
		}
		obj, err := client.Tracker().Get(podsGVR, a.GetNamespace(), b.Name)
		if err != nil {
			return true, nil, err
		}
		p := obj.(*corev1.Pod).DeepCopy()
		if p.Spec.NodeName != "" {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods/binding"}, p.Name,
				fmt.Errorf("pod %v is already assigned to node %q", p.Name, p.Spec.NodeName))
		}
		p.Spec.NodeName = b.Target.Name
		// The API server copies the binding's annotations onto the pod.
		for k, v := range b.Annotations {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[k] = v
		}
		if err := client.Tracker().Update(podsGVR, p, p.Namespace); err != nil {
			return true, nil, err
		}
		if fault != nil && fault.after {
			return true, nil, fault.err
		}
		return true, nil, nil
	})
}

func TestClassifyBind(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods/binding"}
	refused := &errorWithCause{msg: "dial tcp 127.0.0.1:6443: connect: connection refused", cause: syscall.ECONNREFUSED}
	cases := map[string]struct {
		err  error
		done bool
		kind bindFailure
	}{
		"already assigned to the same node": {apierrors.NewConflict(gr, "p", errors.New(`pod p is already assigned to node "n1"`)), true, ""},
		"already assigned to another node":  {apierrors.NewConflict(gr, "p", errors.New(`pod p is already assigned to node "n2"`)), false, failElsewhere},
		"already exists":                    {apierrors.NewAlreadyExists(gr, "p"), true, ""},
		"conflict":                          {apierrors.NewConflict(gr, "p", errors.New("UID precondition failed")), false, failConflict},
		"gone":                              {apierrors.NewNotFound(gr, "p"), false, failGone},
		"server timeout":                    {apierrors.NewTimeoutError("etcd slow", 1), false, failTimeout},
		"client deadline":                   {fmt.Errorf("post: %w", context.DeadlineExceeded), false, failTimeout},
		"connection refused":                {refused, false, failUnavailable},
		"unavailable":                       {apierrors.NewServiceUnavailable("starting"), false, failUnavailable},
		"internal error":                    {apierrors.NewInternalError(errors.New("boom")), false, failServer},
		"fenced":                            {fmt.Errorf("x: %w", &FencedError{Lost: true}), false, failFenced},
		"something else":                    {errors.New("odd"), false, failOther},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			done, kind := classifyBind(tc.err, "n1")
			if done != tc.done || kind != tc.kind {
				t.Errorf("got done=%v kind=%q, want done=%v kind=%q", done, kind, tc.done, tc.kind)
			}
		})
	}
}

type errorWithCause struct {
	msg   string
	cause error
}

func (e *errorWithCause) Error() string { return e.msg }
func (e *errorWithCause) Unwrap() error { return e.cause }

// TestBindPodSettlesFromTheAPI: a failed binding is decided by what the API
// server holds, never retried once it landed, and a pod whose fate is
// unknown stays counted as bound until it can be read back.
func TestBindPodSettlesFromTheAPI(t *testing.T) {
	refused := &errorWithCause{msg: "connect: connection refused", cause: syscall.ECONNREFUSED}
	cases := map[string]struct {
		boundTo   string // the pod's node before corral binds it
		fault     *injected
		readFails bool // reading the pod back fails too
		fenced    bool
		wantErr   bool
		calls     int    // binding writes that reached the API server
		assumed   bool   // the pod is still counted as bound on n1
		doubt     bool   // ... with its fate unknown
		result    string // corral_binding_writes_total label counted once
		failure   string // corral_binding_write_failures_total label counted once
	}{
		"bound":                     {calls: 1, assumed: true, result: "bound"},
		"a retry of a landed write": {boundTo: "n1", calls: 1, assumed: true, result: "already-done"},
		"bound by someone else":     {boundTo: "n2", calls: 1, wantErr: true, result: "failed", failure: "bound-elsewhere"},
		"timeout, the write landed": {fault: &injected{err: apierrors.NewTimeoutError("slow", 1), after: true}, calls: 1,
			assumed: true, result: "already-done"},
		"timeout, the write was lost": {fault: &injected{err: apierrors.NewTimeoutError("slow", 1)}, calls: 1,
			wantErr: true, result: "failed", failure: "timeout"},
		"server error, the write landed": {fault: &injected{err: apierrors.NewInternalError(errors.New("boom")), after: true},
			calls: 1, assumed: true, result: "already-done"},
		"conflict": {fault: &injected{err: apierrors.NewConflict(schema.GroupResource{Resource: "pods/binding"}, "p",
			errors.New("UID precondition failed"))}, calls: 1, wantErr: true, result: "failed", failure: "conflict"},
		"connection refused and no read back": {fault: &injected{err: refused}, readFails: true, calls: 1, wantErr: true,
			assumed: true, doubt: true, result: "failed", failure: "unavailable"},
		"fenced": {fenced: true, calls: 0, wantErr: true, result: "failed", failure: "fenced"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := pod("p").gpus(1).boundTo(tc.boundTo).obj()
			client := fake.NewClientset(p)
			calls := 0
			bindingAPI(client, tc.fault, &calls)
			if tc.readFails {
				client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, refused
				})
			}
			clk := newFakeClock()
			var fence *Fence
			if tc.fenced {
				fence = NewFence(10*time.Second, clk.Now) // never renewed: closed
			}
			c := &Cache{assumed: map[string]assumedPod{}}
			b := &binder{client: client, cache: c, now: clk.Now, fence: fence, metrics: newBindMetrics()}
			w := &world{state: build.State(build.Topo(), []cluster.Node{build.Node().Name("n1").Obj()})}
			err := b.bindPod(context.Background(), w, p, engine.PodBind{Node: "n1"})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if calls != tc.calls {
				t.Errorf("%d binding writes reached the API server, want %d", calls, tc.calls)
			}
			a, ok := c.assumed[string(p.UID)]
			if ok != tc.assumed || a.doubt != tc.doubt {
				t.Errorf("assumed=%v doubt=%v, want %v %v", ok, a.doubt, tc.assumed, tc.doubt)
			}
			if got := counterValue(b.metrics.results.WithLabelValues(tc.result)); got != 1 {
				t.Errorf("result %q counted %v times, want 1", tc.result, got)
			}
			if tc.failure != "" {
				if got := counterValue(b.metrics.failures.WithLabelValues(tc.failure)); got != 1 {
					t.Errorf("failure %q counted %v times, want 1", tc.failure, got)
				}
			}
		})
	}
}

// TestSettleDoubts: a binding whose fate was unknown is read back at the
// next cycle: kept where the API server has it, dropped where it has not.
func TestSettleDoubts(t *testing.T) {
	landed := pod("landed").gpus(1).boundTo("n1").obj()
	lost := pod("lost").gpus(1).obj()
	client := fake.NewClientset(landed, lost)
	c := &Cache{assumed: map[string]assumedPod{}}
	now := time.Unix(1000, 0)
	for _, p := range []*corev1.Pod{landed, lost} {
		c.assume(p, "n1", nil, now)
		c.doubt(string(p.UID))
	}
	c.assume(pod("gone").obj(), "n1", nil, now)
	c.doubt("uid-gone")
	b := &binder{client: client, cache: c, metrics: newBindMetrics()}
	b.settleDoubts(context.Background())
	if a, ok := c.assumed[string(landed.UID)]; !ok || a.doubt {
		t.Errorf("landed binding: assumed=%v doubt=%v, want kept and confirmed", ok, a.doubt)
	}
	if _, ok := c.assumed[string(lost.UID)]; ok {
		t.Error("lost binding still assumed")
	}
	if _, ok := c.assumed["uid-gone"]; ok {
		t.Error("deleted pod still assumed")
	}
}

// TestAssumptionsAreDoubtedNotDropped: an assumption the informer has not
// confirmed for a minute is read back, not dropped (dropping it would free
// the devices a bound pod holds while the informer is cut off).
func TestAssumptionsAreDoubtedNotDropped(t *testing.T) {
	p := pod("p").gpus(1).obj()
	c := &Cache{assumed: map[string]assumedPod{}}
	t0 := time.Unix(1000, 0)
	c.assume(p, "n1", nil, t0)
	if got := c.assumedNow([]*corev1.Pod{p}, t0.Add(30*time.Second)); len(got) != 1 || got[string(p.UID)].doubt {
		t.Fatalf("fresh assumption: %+v, want kept, not doubted", got)
	}
	got := c.assumedNow([]*corev1.Pod{p}, t0.Add(2*time.Minute))
	if a, ok := got[string(p.UID)]; !ok || !a.doubt {
		t.Fatalf("old assumption: %+v, want kept and doubted", got)
	}
	if d := c.doubts(); len(d) != 1 || d[0].name != "p" || d[0].node != "n1" {
		t.Errorf("doubts %+v", d)
	}
	bound := p.DeepCopy()
	bound.Spec.NodeName = "n1"
	if got := c.assumedNow([]*corev1.Pod{bound}, t0.Add(3*time.Minute)); len(got) != 0 {
		t.Errorf("the informer shows it bound, still assumed: %+v", got)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
