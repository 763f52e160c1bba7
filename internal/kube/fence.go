package kube

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Fence lets corral write to the API server only while its Lease is
// provably held. Leader election alone does not guarantee that: a leader
// paused (SIGSTOP, a long GC, a frozen VM) past its Lease resumes believing
// it still leads, and client-go tells it otherwise only after its next
// failed renewal, seconds later. Meanwhile another replica has taken the
// Lease and binds pods on the same GPUs.
//
// The rule: writes may go on for Window after the moment the request of
// the last successful renewal was sent, measured on the local monotonic
// clock (time.Now's monotonic reading, which runs on while the process is
// stopped). Another replica cannot take the Lease before LeaseDuration has
// passed on its own clock since it saw that renewal, which was after the
// request was sent; Window = RenewDeadline < LeaseDuration leaves the
// difference for writes in flight and for clocks that tick at slightly
// different rates.
//
// A nil *Fence is always open: leader election is off.
type Fence struct {
	now    func() time.Time
	window time.Duration

	mu      sync.Mutex
	renewed time.Time // when the last successful renewal was sent; zero: none yet
	lost    bool      // the Lease was released or another holder seen
}

// NewFence makes a closed fence that opens on the first renewal. now nil
// means time.Now (whose monotonic reading the fence relies on).
func NewFence(window time.Duration, now func() time.Time) *Fence {
	if now == nil {
		now = time.Now
	}
	return &Fence{now: now, window: window}
}

// FencedError says why a write was not made.
type FencedError struct {
	Since  time.Duration // since the last successful renewal; <0: none ever
	Window time.Duration
	Lost   bool
}

func (e *FencedError) Error() string {
	switch {
	case e.Lost:
		return "not writing: the Lease is lost"
	case e.Since < 0:
		return "not writing: the Lease has not been renewed yet"
	default:
		return fmt.Sprintf("not writing: the Lease was last renewed %s ago, writes stop %s after a renewal",
			e.Since.Round(time.Millisecond), e.Window)
	}
}

// Check returns nil while writes may go on, a *FencedError otherwise.
func (f *Fence) Check() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.lost:
		return &FencedError{Lost: true, Window: f.window}
	case f.renewed.IsZero():
		return &FencedError{Since: -1, Window: f.window}
	}
	if since := f.now().Sub(f.renewed); since >= f.window || since < 0 {
		return &FencedError{Since: since, Window: f.window}
	}
	return nil
}

// Bound returns ctx cut off when the fence closes, so that a write started
// just before the deadline cannot still be in flight long after it. With
// the fence closed the context is already done.
func (f *Fence) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if f == nil {
		return context.WithCancel(ctx)
	}
	f.mu.Lock()
	deadline := f.renewed.Add(f.window)
	closed := f.lost || f.renewed.IsZero()
	f.mu.Unlock()
	if closed {
		c, cancel := context.WithCancel(ctx)
		cancel()
		return c, cancel
	}
	// The deadline is on the wall clock, as contexts are; the monotonic
	// check in Check stays the rule, this only bounds a write in flight.
	return context.WithTimeout(ctx, deadline.Sub(f.now()))
}

// renewedAt records a successful renewal whose request was sent at sent.
func (f *Fence) renewedAt(sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sent.After(f.renewed) {
		f.renewed = sent
	}
	f.lost = false
}

// close shuts the fence at once (the Lease was released or lost).
func (f *Fence) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost = true
}

// fencedLock feeds a Fence from the leader elector's lock: every Create or
// Update of the Lease naming this replica that the API server accepted is
// a renewal, dated when its request was sent.
type fencedLock struct {
	resourcelock.Interface
	fence *Fence
}

func (l fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.fence.now()
	err := l.Interface.Create(ctx, ler)
	l.observe(ler, sent, err)
	return err
}

func (l fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.fence.now()
	err := l.Interface.Update(ctx, ler)
	l.observe(ler, sent, err)
	return err
}

func (l fencedLock) observe(ler resourcelock.LeaderElectionRecord, sent time.Time, err error) {
	switch {
	case ler.HolderIdentity != l.Identity():
		// Releasing the Lease (ReleaseOnCancel writes an empty holder):
		// stop writing before the release is even sent.
		l.fence.close()
	case err == nil:
		l.fence.renewedAt(sent)
	}
}

// WrapTransport refuses every mutating request while the fence is closed,
// before it reaches the network: the last line behind the checks the cycle
// makes before each batch of writes, covering writes made elsewhere
// (events, health, MIG). The client the leader elector uses must not be
// wrapped, or the Lease could never be renewed.
func (f *Fence) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	if f == nil {
		return rt
	}
	return fencedTransport{rt: rt, fence: f}
}

type fencedTransport struct {
	rt    http.RoundTripper
	fence *Fence
}

func (t fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.rt.RoundTrip(req)
	}
	if err := t.fence.Check(); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.rt.RoundTrip(req)
}
