package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/kube"
)

type schedulerOptions struct {
	config        string
	kubeconfig    string
	name          string
	gpuResource   string
	draDriver     string
	topology      string
	nodeSelector  string
	cycle         time.Duration
	metricsAddr   string
	healthAddr    string
	leaderElect   bool
	leaseNS       string
	leaseName     string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	leaseID       string
	bindDelay     time.Duration
	cordonFailed  bool
	spares        string
	// runtimeHistory is the ConfigMap keeping learned runtimes
	// ("name" in the Lease's namespace, or "namespace/name"; "0" or "": off).
	runtimeHistory string
	// Backfill settings, as corral sim names them; pools come from the
	// configuration file only.
	reservations, reservationsPerQueue int
	starveAfter                        time.Duration
	onMaxRuntime                       string
	// Preemption settings, as corral sim names them.
	checkpointWait, reclaimMaxLost, reclaimGrace time.Duration
	maxLostPerWork                               float64
	pools                                        []v1alpha1.PoolConfig
	logLevel                                     string
	qps                                          float32
	burst                                        int
}

func newSchedulerCmd() *cobra.Command {
	o := schedulerOptions{}
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Schedule the pods of a Kubernetes cluster whose schedulerName is corral",
		Long: `scheduler watches the cluster through informers and places every pod with
spec.schedulerName: corral as part of its gang, binding through the API
(ResourceClaims first, then pods/binding). Pending pods get PodScheduled=False
with corral's reason. With --leader-elect, replicas share a Lease and one is
active.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyConfigFile(&o, cmd.Flags().Changed); err != nil {
				return err
			}
			return runScheduler(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "SchedulerConfiguration file (docs/api.md); flags given explicitly override it")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG)")
	f.StringVar(&o.name, "scheduler-name", "corral", "spec.schedulerName of the pods to schedule")
	f.StringVar(&o.gpuResource, "gpu-resource", "nvidia.com/gpu", "extended resource of whole GPUs")
	f.StringVar(&o.draDriver, "dra-driver", "gpu.nvidia.com", "DRA driver whose GPUs corral allocates")
	f.StringVar(&o.topology, "topology", "", "Topology object to use (default: the only one)")
	f.StringVar(&o.nodeSelector, "node-selector", "", "label selector of the nodes corral may use")
	f.DurationVar(&o.cycle, "cycle-interval", time.Second, "longest time between cycles (events wake it sooner)")
	f.StringVar(&o.metricsAddr, "metrics-address", ":8080", `address of /metrics (empty or "0": off)`)
	f.StringVar(&o.healthAddr, "health-address", ":8081", `address of /healthz and /readyz (empty or "0": off)`)
	f.BoolVar(&o.leaderElect, "leader-elect", true, "elect one active replica through a Lease")
	f.StringVar(&o.leaseNS, "leader-elect-namespace", "corral-system", "namespace of the Lease")
	f.StringVar(&o.leaseName, "leader-elect-name", "corral-scheduler", "name of the Lease")
	f.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "Lease duration")
	f.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing")
	f.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates retry")
	f.StringVar(&o.leaseID, "leader-elect-identity", "", "identity in the Lease (default: hostname + random suffix)")
	f.DurationVar(&o.bindDelay, "debug-bind-delay", 0, "pause between the bindings of a gang's pods (tests only)")
	f.BoolVar(&o.cordonFailed, "cordon-failed-nodes", false, "cordon a node when corral remediates a GPU or node failure on it (docs/health.md)")
	f.IntVar(&o.reservations, "reservations", 0, "blocked jobs given a reservation per cycle (0: 1; negative: only starved jobs; docs/backfill.md)")
	f.IntVar(&o.reservationsPerQueue, "reservations-per-queue", 0, "reservations per queue per cycle (0: 1)")
	f.DurationVar(&o.starveAfter, "starve-after", 0, "wait after which a job is reserved ahead of everything (0: 24h; negative: off)")
	f.DurationVar(&o.checkpointWait, "checkpoint-wait", 0, "longest wait for preemption victims' next checkpoint (0: 20m; negative: never wait)")
	f.DurationVar(&o.reclaimMaxLost, "reclaim-max-lost", 0, "reclaim spares a borrower that would lose more progress than this since its last checkpoint, for --reclaim-grace (0: 6h; negative: spare none)")
	f.DurationVar(&o.reclaimGrace, "reclaim-grace", 0, "how long after a job's submission reclaim spares such borrowers for it (0: 24h)")
	f.Float64Var(&o.maxLostPerWork, "max-lost-per-work", 0, "a priority preemption may throw away at most this many times the preemptor's expected work, its GPUs × expected runtime (0: 2; negative: no bound)")
	f.StringVar(&o.onMaxRuntime, "on-max-runtime", "", "Terminate (default) or Requeue a job past its max runtime")
	f.StringVar(&o.spares, "spares", "", `GPUs held back for replacing failed ranks, e.g. "rack=8" or "rack=8,cluster=16@team-a" (docs/health.md#spares)`)
	f.StringVar(&o.runtimeHistory, "runtime-history", v1alpha1.DefaultRuntimeHistory,
		`ConfigMap keeping the runtimes learned from completed jobs across restarts: "name" (in --leader-elect-namespace) or "namespace/name"; "0" keeps them in memory only`)
	_ = f.MarkHidden("debug-bind-delay")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.Float32Var(&o.qps, "kube-api-qps", 200, "client QPS to the API server")
	f.IntVar(&o.burst, "kube-api-burst", 400, "client burst to the API server")
	return cmd
}

// applyConfigFile fills the options from a SchedulerConfiguration file;
// flags set on the command line win over the file.
func applyConfigFile(o *schedulerOptions, changed func(string) bool) error {
	if o.config == "" {
		return nil
	}
	c, err := v1alpha1.LoadConfig(o.config)
	if err != nil {
		return err
	}
	maxLostPerWork, err := c.Preemption.MaxLostPerWork.Float()
	if err != nil { // LoadConfig validated it: only a bug gets here
		return fmt.Errorf("preemption.maxLostPerWork: %w", err)
	}
	set := func(flag string, apply func()) {
		if !changed(flag) {
			apply()
		}
	}
	set("scheduler-name", func() { o.name = c.SchedulerName })
	set("gpu-resource", func() { o.gpuResource = c.GPUResourceName })
	set("dra-driver", func() { o.draDriver = c.DRADriver })
	set("cordon-failed-nodes", func() { o.cordonFailed = c.CordonFailedNodes })
	set("spares", func() { o.spares = sparesSpec(c.Spares) })
	set("reservations", func() { o.reservations = c.Backfill.MaxReservations })
	set("reservations-per-queue", func() { o.reservationsPerQueue = c.Backfill.MaxReservationsPerQueue })
	set("starve-after", func() { o.starveAfter = c.Backfill.StarveAfter.Duration })
	set("on-max-runtime", func() { o.onMaxRuntime = c.Backfill.OnMaxRuntime })
	set("checkpoint-wait", func() { o.checkpointWait = c.Preemption.CheckpointWait.Duration })
	set("reclaim-max-lost", func() { o.reclaimMaxLost = c.Preemption.ReclaimMaxLost.Duration })
	set("reclaim-grace", func() { o.reclaimGrace = c.Preemption.ReclaimGrace.Duration })
	set("max-lost-per-work", func() { o.maxLostPerWork = maxLostPerWork })
	set("runtime-history", func() { o.runtimeHistory = c.RuntimeHistory })
	o.pools = c.Pools
	set("topology", func() { o.topology = c.TopologyName })
	set("node-selector", func() { o.nodeSelector = c.ManagedNodeSelector })
	set("cycle-interval", func() { o.cycle = c.CycleInterval.Duration })
	set("metrics-address", func() { o.metricsAddr = serveAddress(c.MetricsAddress) })
	set("health-address", func() { o.healthAddr = serveAddress(c.HealthAddress) })
	le := c.LeaderElection
	set("leader-elect", func() { o.leaderElect = le.IsEnabled() })
	set("leader-elect-namespace", func() { o.leaseNS = le.Namespace })
	set("leader-elect-name", func() { o.leaseName = le.LeaseName })
	set("leader-elect-lease-duration", func() { o.leaseDuration = le.LeaseDuration.Duration })
	set("leader-elect-renew-deadline", func() { o.renewDeadline = le.RenewDeadline.Duration })
	set("leader-elect-retry-period", func() { o.retryPeriod = le.RetryPeriod.Duration })
	return nil
}

// restConfig loads the kubeconfig the flags or environment name.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		if c, err := rest.InClusterConfig(); err == nil {
			return c, nil
		}
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		return nil, fmt.Errorf("no kubeconfig: pass --kubeconfig or set KUBECONFIG")
	}
	return clientcmd.BuildConfigFromFlags("", path)
}

// clientsFor makes the typed and the dynamic client of one config, the pair
// the adapter (kube.New) and the listings take.
func clientsFor(cfg *rest.Config) (*kubernetes.Clientset, *dynamic.DynamicClient, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return client, dyn, nil
}

func runScheduler(o schedulerOptions) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if err := o.validate(); err != nil {
		return err
	}
	o.metricsAddr, o.healthAddr = serveAddress(o.metricsAddr), serveAddress(o.healthAddr)
	opts, err := o.adapterOptions()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.UserAgent = "corral-scheduler"
	// The leader elector renews the Lease through a client of its own; the
	// scheduler's client refuses every write while the fence is closed
	// (internal/kube/fence.go): writes stop RenewDeadline after the last
	// successful renewal, before another replica may take the Lease.
	electionClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var fence *kube.Fence
	if o.leaderElect {
		fence = kube.NewFence(o.renewDeadline, nil)
		cfg = rest.CopyConfig(cfg)
		cfg.Wrap(fence.WrapTransport)
	}
	client, dyn, err := clientsFor(cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	opts.Logger, opts.Registry, opts.Fence = log, reg, fence
	sched, err := kube.New(client, dyn, opts)
	if err != nil {
		return err
	}
	// A stand-by replica is ready: it serves its purpose by waiting for the
	// Lease. The active one is ready once its caches have synced.
	var leading atomic.Bool
	ready := func() bool { return !leading.Load() || sched.Ready() }
	serveErr := make(chan error, 1)
	go func() { serveErr <- kube.Serve(ctx, o.metricsAddr, o.healthAddr, reg, ready) }()

	le := kube.LeaderElection{Enabled: o.leaderElect, Namespace: o.leaseNS, LeaseName: o.leaseName, Identity: o.leaseID,
		LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod, Fence: fence}
	var runErr error
	err = kube.RunElected(ctx, electionClient, le, log, func(ctx context.Context) {
		leading.Store(true)
		runErr = sched.Run(ctx)
	})
	if err != nil {
		return err
	}
	select {
	case e := <-serveErr:
		if e != nil {
			return e
		}
	default:
	}
	return runErr
}

// sparesSpec writes the configuration file's spares in the --spares syntax.
func sparesSpec(cs []v1alpha1.SpareConfig) string {
	items := make([]string, 0, len(cs))
	for _, c := range cs {
		item := c.Level
		if c.Domain != "" {
			item += "/" + c.Domain
		}
		item += "=" + strconv.Itoa(c.GPUs)
		if c.Queue != "" {
			item += "@" + c.Queue
		}
		items = append(items, item)
	}
	return strings.Join(items, ",")
}

// adapterOptions is what the flags and configuration file ask of the
// Kubernetes adapter (logger and metrics registry aside); corral scheduler
// and corral explain both use it, so that explain decides as the scheduler
// does.
func (o schedulerOptions) adapterOptions() (kube.Options, error) {
	spares, err := cycle.ParseSpares(o.spares)
	if err != nil {
		return kube.Options{}, fmt.Errorf("--spares: %w", err)
	}
	if m := o.onMaxRuntime; m != "" && m != string(engine.Terminate) && m != string(engine.Requeue) {
		return kube.Options{}, fmt.Errorf("--on-max-runtime %q: want Terminate or Requeue", m)
	}
	var history types.NamespacedName
	if h := o.runtimeHistory; h != "" && h != v1alpha1.RuntimeHistoryOff {
		ns, name, err := v1alpha1.SplitRuntimeHistory(h, o.leaseNS)
		if err != nil {
			return kube.Options{}, fmt.Errorf("--runtime-history: %w", err)
		}
		history = types.NamespacedName{Namespace: ns, Name: name}
	}
	var pools []cycle.Pool
	for _, pc := range o.pools {
		pools = append(pools, cycle.Pool{Name: pc.Name, Class: pc.Class, NodeLabels: pc.NodeLabels,
			GPUs: pc.GPUs, Model: pc.Model, Others: cycle.PoolAccess(pc.Others)})
	}
	return kube.Options{
		SchedulerName: o.name, GPUResource: o.gpuResource, DRADriver: o.draDriver,
		TopologyName: o.topology, NodeSelector: o.nodeSelector, CycleInterval: o.cycle,
		BindDelay: o.bindDelay, CordonFailedNodes: o.cordonFailed, Spares: spares,
		Backfill: engine.BackfillConfig{MaxReservations: o.reservations, MaxReservationsPerQueue: o.reservationsPerQueue,
			StarveAfter: o.starveAfter, OnMaxRuntime: engine.MaxRuntimeAction(o.onMaxRuntime)},
		CheckpointWait: o.checkpointWait, ReclaimMaxLost: o.reclaimMaxLost, ReclaimGrace: o.reclaimGrace,
		MaxLostPerWork: o.maxLostPerWork, Pools: pools, RuntimeHistory: history,
	}, nil
}
