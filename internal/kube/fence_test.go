package kube

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeClock is a settable clock for fences and binders.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestFenceWindow(t *testing.T) {
	type step struct {
		advance time.Duration
		renew   bool // a renewal whose request is sent now
		lose    bool
		open    bool
	}
	cases := map[string][]step{
		"closed until the first renewal": {{open: false}, {advance: time.Second, open: false}, {renew: true, open: true}},
		"open within the window, closed at its end": {
			{renew: true, open: true}, {advance: 9 * time.Second, open: true}, {advance: time.Second, open: false}},
		"each renewal reopens it": {
			{renew: true, open: true}, {advance: 8 * time.Second, renew: true, open: true}, {advance: 8 * time.Second, open: true},
			{advance: 2 * time.Second, open: false}},
		// The stale leader: stopped 31 s, the others took the Lease
		// after 20 s; on resuming it must not write.
		"a leader resumed after a pause writes nothing": {{renew: true, open: true}, {advance: 31 * time.Second, open: false}},
		"lost closes it at once, a new renewal reopens it": {
			{renew: true, open: true}, {lose: true, open: false}, {advance: time.Second, renew: true, open: true}},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			f := NewFence(10*time.Second, clk.Now)
			for i, s := range steps {
				clk.Step(s.advance)
				if s.renew {
					f.renewedAt(clk.Now())
				}
				if s.lose {
					f.close()
				}
				err := f.Check()
				if (err == nil) != s.open {
					t.Fatalf("step %d: open=%v, want %v (err %v)", i, err == nil, s.open, err)
				}
				var fe *FencedError
				if err != nil && !errors.As(err, &fe) {
					t.Fatalf("step %d: error %T is not a *FencedError", i, err)
				}
			}
		})
	}
}

func TestFenceNilIsOpen(t *testing.T) {
	var f *Fence
	if err := f.Check(); err != nil {
		t.Fatalf("nil fence closed: %v", err)
	}
	ctx, cancel := f.Bound(context.Background())
	defer cancel()
	if ctx.Err() != nil {
		t.Fatal("nil fence ended the context")
	}
}

func TestFenceBoundEndsWritesInFlight(t *testing.T) {
	clk := newFakeClock()
	f := NewFence(10*time.Second, clk.Now)
	ctx, cancel := f.Bound(context.Background())
	cancel()
	if ctx.Err() == nil {
		t.Fatal("a closed fence gave a live context")
	}
	f.renewedAt(clk.Now())
	clk.Step(4 * time.Second)
	ctx, cancel = f.Bound(context.Background())
	defer cancel()
	dl, ok := ctx.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	// 6 s of the window are left; the deadline is set on the real clock.
	if left := time.Until(dl); left <= 5*time.Second || left > 6*time.Second {
		t.Errorf("deadline in %s, want about 6s", left)
	}
}

// TestFencedLockFeedsTheFence runs the real Lease lock on a fake clientset
// through the wrapper the elector uses.
func TestFencedLockFeedsTheFence(t *testing.T) {
	clk := newFakeClock()
	f := NewFence(10*time.Second, clk.Now)
	client := fake.NewClientset()
	lock := fencedLock{fence: f, Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "corral-system", Name: "corral"},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "me"},
	}}
	ctx := context.Background()
	rec := resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 15,
		RenewTime: metav1.NewTime(clk.Now()), AcquireTime: metav1.NewTime(clk.Now())}
	if err := lock.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatalf("acquired, still fenced: %v", err)
	}
	clk.Step(11 * time.Second)
	if f.Check() == nil {
		t.Fatal("no renewal for 11s, fence open")
	}
	if _, _, err := lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatalf("renewed, still fenced: %v", err)
	}
	// Releasing (ReleaseOnCancel writes an empty holder) closes it.
	rec.HolderIdentity = ""
	if err := lock.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if f.Check() == nil {
		t.Fatal("released, fence open")
	}
}

func TestFenceTransportRefusesWrites(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method]++
		mu.Unlock()
	}))
	defer srv.Close()
	clk := newFakeClock()
	f := NewFence(10*time.Second, clk.Now)
	hc := &http.Client{Transport: f.WrapTransport(http.DefaultTransport)}
	do := func(method string) error {
		req, _ := http.NewRequest(method, srv.URL, nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if err := do(m); err == nil {
			t.Errorf("%s went through a closed fence", m)
		}
	}
	if err := do(http.MethodGet); err != nil {
		t.Errorf("GET refused: %v", err)
	}
	f.renewedAt(clk.Now())
	if err := do(http.MethodPost); err != nil {
		t.Errorf("POST refused with the Lease held: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[http.MethodGet] != 1 || seen[http.MethodPost] != 1 || seen[http.MethodPut]+seen[http.MethodPatch]+seen[http.MethodDelete] != 0 {
		t.Errorf("server saw %v, want one GET and one POST", seen)
	}
}

// TestCycleWritesNothingWhileFenced: a scheduler whose Lease renewal is
// older than the window (a leader resumed after a pause) runs no write at
// all; once renewed it binds.
func TestCycleWritesNothingWhileFenced(t *testing.T) {
	clk := newFakeClock()
	fence := NewFence(10*time.Second, clk.Now)
	p := pod("p").gpus(1).obj()
	client := fake.NewClientset(p)
	calls := 0
	bindingAPI(client, nil, &calls)
	s, err := New(client, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Options{Fence: fence, Clock: clk.Now,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	must(t, s.cache.nodes.GetStore().Add(rackNode("n1", "a", 8)))
	must(t, s.cache.pods.GetStore().Add(p))
	writes := func() int {
		n := 0
		for _, a := range client.Actions() {
			switch a.GetVerb() {
			case "get", "list", "watch":
			default:
				n++
			}
		}
		return n
	}
	fence.renewedAt(clk.Now())
	clk.Step(31 * time.Second)
	res, err := s.Cycle(context.Background())
	var fe *FencedError
	if !errors.As(err, &fe) {
		t.Fatalf("stale leader's cycle: err %v, want a FencedError", err)
	}
	if res.PodsBound != 0 || writes() != 0 {
		t.Fatalf("stale leader wrote: %d bound, %d writes %v", res.PodsBound, writes(), client.Actions())
	}
	fence.renewedAt(clk.Now())
	res, err = s.Cycle(context.Background())
	if err != nil || res.PodsBound != 1 || calls != 1 {
		t.Fatalf("renewed leader: err %v, %d bound, %d binding writes", err, res.PodsBound, calls)
	}
}
