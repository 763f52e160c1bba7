package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
)

// Options configure the Kubernetes driver.
type Options struct {
	SchedulerName string
	GPUResource   string
	DRADriver     string
	TopologyName  string
	NodeSelector  string        // label selector of the nodes corral may use; "" = all
	CycleInterval time.Duration // a cycle runs at least this often; events wake it sooner
	Logger        *slog.Logger
	Registry      prometheus.Registerer // nil: metrics are not registered
	Clock         func() time.Time      // nil: the wall clock
	// BindWorkers is how many gangs bind at once (default 32).
	BindWorkers int
	// BindDelay pauses between the bindings of one gang's pods. Tests use it
	// to kill the scheduler mid-gang; leave it zero otherwise.
	BindDelay time.Duration
	// CordonFailedNodes cordons a node when corral remediates a failure on
	// it (health.go); off by default, since a health agent may own cordons.
	CordonFailedNodes bool
	// Spares are GPUs held back for replacing failed ranks (docs/health.md).
	Spares []cycle.Spare
	// Backfill tunes reservations, starvation and runtime limits; Pools
	// hold capacity for classes of jobs (docs/backfill.md).
	Backfill engine.BackfillConfig
	// CheckpointWait, ReclaimMaxLost and ReclaimGrace tune preemption
	// (engine.Config's fields of the same names; zero: the defaults).
	CheckpointWait, ReclaimMaxLost, ReclaimGrace time.Duration
	// MaxLostPerWork bounds what a priority preemption throws away, as a
	// multiple of the preemptor's expected work (engine.Config's field;
	// zero: the default, negative: no bound).
	MaxLostPerWork float64
	Pools          []cycle.Pool
	// Fence, shared with RunElected, lets the scheduler write only while
	// its Lease is provably held (fence.go); nil without leader election.
	Fence *Fence
	// RuntimeHistory is the ConfigMap that keeps the learned runtimes
	// across restarts and leader changes (historystore.go); zero keeps them
	// in memory only.
	RuntimeHistory types.NamespacedName
}

// Scheduler drives the engine against a cluster.
type Scheduler struct {
	opts     Options
	client   kubernetes.Interface
	cache    *Cache
	engine   *engine.Engine
	binder   *binder
	reporter *reporter
	metrics  *metrics
	log      *slog.Logger
	ready    atomic.Bool
	events   events.EventBroadcaster
	health   *healthState
	// runtimes learns completed runtimes for estimates (history.go).
	runtimes runtimeHistory
	// checkpoints keeps each running job's reported checkpoints
	// (running.go).
	checkpoints checkpointHistory
	// wasFenced: the last cycle wrote nothing for want of the Lease (logs
	// say so once per episode).
	wasFenced bool
	// snapshotWarnings and planWarnings log each warning once while it
	// lasts (warnlog.go).
	snapshotWarnings, planWarnings warnLog
}

// CycleResult summarises one cycle, for logs and tests.
type CycleResult struct {
	Plan           engine.Plan
	PodsBound      int
	PodsEvicted    int
	BindErrors     []error
	EvictErrors    []error
	RefusedJobs    int
	PendingJobs    int
	InvalidJobs    int
	WaitingForPods int
}

// New prepares a scheduler; Run starts it.
func New(client kubernetes.Interface, dyn dynamic.Interface, opts Options) (*Scheduler, error) {
	if opts.SchedulerName == "" {
		opts.SchedulerName = "corral"
	}
	if opts.GPUResource == "" {
		opts.GPUResource = "nvidia.com/gpu"
	}
	if opts.DRADriver == "" {
		opts.DRADriver = "gpu.nvidia.com"
	}
	if opts.CycleInterval <= 0 {
		opts.CycleInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.BindWorkers <= 0 {
		opts.BindWorkers = 32
	}
	cfg := adapterConfig{schedulerName: opts.SchedulerName, gpuResource: opts.GPUResource,
		draDriver: opts.DRADriver, topologyName: opts.TopologyName}
	if opts.NodeSelector != "" {
		sel, err := labels.Parse(opts.NodeSelector)
		if err != nil {
			return nil, fmt.Errorf("node selector %q: %w", opts.NodeSelector, err)
		}
		cfg.nodeSelector = sel
	}
	c, err := NewCache(client, dyn, cfg)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{opts: opts, client: client, cache: c, engine: engine.New(engine.Config{Policy: engine.Corral, Backfill: opts.Backfill,
		CheckpointWait: opts.CheckpointWait, ReclaimMaxLost: opts.ReclaimMaxLost, ReclaimGrace: opts.ReclaimGrace,
		MaxLostPerWork: opts.MaxLostPerWork}),
		log: opts.Logger, metrics: newMetrics(opts.Registry, opts.Clock()), health: newHealthState(opts.Registry)}
	s.runtimes.store = historyStore{ref: opts.RuntimeHistory}
	s.runtimes.loaded = !s.runtimes.store.enabled()
	s.binder = &binder{client: client, cache: c, now: opts.Clock, delay: opts.BindDelay, fence: opts.Fence,
		metrics: s.metrics.binds, log: opts.Logger}
	s.events = events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	s.reporter = &reporter{client: client, dynamic: dyn, recorder: s.events.NewRecorder(scheme.Scheme, opts.SchedulerName),
		now: opts.Clock, fence: opts.Fence}
	return s, nil
}

// Ready reports whether the caches have synced and cycles run.
func (s *Scheduler) Ready() bool { return s.ready.Load() }

// Run starts the informers and schedules until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	s.events.StartRecordingToSink(ctx.Done())
	defer s.events.Shutdown()
	if err := s.cache.Start(ctx); err != nil {
		return err
	}
	s.loadHistory(ctx)
	defer func() {
		// What completed since the last save, written while this process
		// may still hold the Lease.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.saveHistory(ctx, true)
	}()
	s.ready.Store(true)
	s.log.Info("caches synced; scheduling", "scheduler", s.opts.SchedulerName)
	ticker := time.NewTicker(s.opts.CycleInterval)
	defer ticker.Stop()
	for {
		res, err := s.safeCycle(ctx)
		var fenced *FencedError
		switch {
		case errors.As(err, &fenced):
			if !s.wasFenced {
				s.log.Warn("writing nothing until the Lease is renewed", "err", err)
			}
			s.wasFenced = true
		case err != nil:
			s.log.Error("cycle failed", "err", err)
		case s.wasFenced:
			s.wasFenced = false
			s.log.Info("the Lease is held again; writing")
		case res.PodsBound > 0 || res.PodsEvicted > 0 || len(res.BindErrors) > 0 || len(res.EvictErrors) > 0:
			s.log.Info("cycle", "bound", res.PodsBound, "evicted", res.PodsEvicted, "pending_jobs", res.PendingJobs,
				"bind_errors", len(res.BindErrors), "evict_errors", len(res.EvictErrors))
		}
		for _, e := range res.BindErrors {
			s.log.Warn("binding failed", "err", e)
		}
		for _, e := range res.EvictErrors {
			s.log.Warn("eviction failed", "err", e)
		}
		s.saveHistory(ctx, false)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-s.cache.Woken():
			// Let a burst of events settle into one cycle.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// safeCycle runs a cycle and turns a panic into an error: every cycle is
// rebuilt from the API server, so one bad cycle must not stop the next.
func (s *Scheduler) safeCycle(ctx context.Context) (res CycleResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.metrics.cyclePanics.Inc()
			err = fmt.Errorf("cycle panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return s.Cycle(ctx)
}

// complete adds to a world's snapshot what the cache does not hold: health
// (failures, suspects, spares, replacement pins), the runtime history and
// the configured pools. Cycle and Explain both use it, so that explain
// sees what a cycle sees.
func (s *Scheduler) complete(w *world, now time.Time) {
	s.addHealth(w, now) // health.go
	s.runtimes.track(w, w.pods)
	s.checkpoints.observe(w.snap.Running)
	w.snap.Runtimes = &s.runtimes.hist
	w.snap.Pools = s.opts.Pools
}

// fenced checks the fence before a batch of writes and counts a closed one.
func (s *Scheduler) fenced() error {
	err := s.opts.Fence.Check()
	if err != nil {
		s.metrics.fencedCycles.Inc()
	}
	return err
}
