package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
)

type devUpOptions struct {
	blocks, racks, nodes, gpus int
	dra                        bool
	gpuMode                    string
	kubeconfigOut              string
	keep                       bool
	cycle                      time.Duration
	metricsAddr, healthAddr    string
	logLevel                   string
	startTimeout               time.Duration
	with                       []string
}

// newDevCmd is `corral dev`: local development clusters.
func newDevCmd() *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Run corral on a local fake GPU cluster (kwok) for trying it out",
		Args:  cobra.NoArgs,
	}
	dev.AddCommand(newDevUpCmd())
	return dev
}

func newDevUpCmd() *cobra.Command {
	o := devUpOptions{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local control plane with fake GPU nodes and corral scheduling them",
		Long: `up starts the control plane the integration tests use (etcd, kube-apiserver,
kube-controller-manager and kwok, from bin/; build them with 'make tools'),
installs corral's CRDs and the Topology of examples/topology.yaml (block >
rack), adds blocks × racks × nodes fake H100 nodes (kwok) with --gpus GPUs
each, and runs corral's scheduler in this process. It writes an admin kubeconfig and prints what to
try. Ctrl-C stops everything and removes the working directory.

Each node offers its GPUs one way, never both (--gpu-mode):
  mixed     (default) odd-numbered racks as the extended resource
            nvidia.com/gpu, even-numbered racks as DRA devices, so both
            examples work in one cluster
  extended  every node as nvidia.com/gpu (device-plugin style), for pods with
            resources.limits nvidia.com/gpu, e.g. examples/gang-job-rack.yaml
  dra       every node as DRA devices: one ResourceSlice of driver
            gpu.nvidia.com per node (--gpus devices, two per PCIe root,
            numaNode) and no nvidia.com/gpu capacity; for pods with
            ResourceClaims, e.g. examples/dra-2gpu-same-pcie-root.yaml
corral keeps the two kinds apart: a pod lands only on GPUs of the kind it asks
for. The DeviceClass gpu.nvidia.com is created in every mode.`,
		Example: `  make dev-cluster                              # make tools, then this command
  go run ./cmd/corral dev up
  go run ./cmd/corral dev up --gpu-mode dra
  go run ./cmd/corral dev up --blocks 1 --racks 4 --nodes 8 --keep
  go run ./cmd/corral dev up --with jobset,lws,kuberay,kueue   # make controllers first`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDevUp(cmd, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.blocks, "blocks", 2, "blocks (corral.dev/block=b1, b2, ...)")
	f.IntVar(&o.racks, "racks", 2, "racks per block (corral.dev/rack=r01, r02, ..., numbered across blocks)")
	f.IntVar(&o.nodes, "nodes", 4, "nodes per rack")
	f.IntVar(&o.gpus, "gpus", 8, "GPUs per node")
	f.StringVar(&o.gpuMode, "gpu-mode", "mixed", "how nodes offer GPUs: mixed, extended or dra")
	f.BoolVar(&o.dra, "dra", false, "same as --gpu-mode dra")
	f.StringVar(&o.kubeconfigOut, "kubeconfig-out", "corral-dev.kubeconfig", "where to write the admin kubeconfig (removed on exit unless --keep)")
	f.BoolVar(&o.keep, "keep", false, "keep the working directory (logs, etcd data) and the kubeconfig after exit")
	f.DurationVar(&o.cycle, "cycle-interval", time.Second, "longest time between scheduling cycles")
	f.StringVar(&o.metricsAddr, "metrics-address", "", "serve corral's /metrics here, e.g. 127.0.0.1:8080 (default: off)")
	f.StringVar(&o.healthAddr, "health-address", "", "serve /healthz and /readyz here, e.g. 127.0.0.1:8081 (default: off)")
	f.StringVar(&o.logLevel, "log-level", "info", "scheduler log level: debug, info, warn or error")
	f.DurationVar(&o.startTimeout, "start-timeout", 3*time.Minute, "bound on starting the control plane")
	f.StringSliceVar(&o.with, "with", nil, "also run these workload controllers, built by 'make controllers': jobset, lws, kuberay, kueue (see docs/controllers/)")
	return cmd
}

// devNode is one fake node of the sample cluster.
type devNode struct {
	name, block, rack string
	rackIndex         int // 1-based, across blocks
}

// draNode says whether a node offers its GPUs as DRA devices: every node with
// --gpu-mode dra, none with extended, and the even-numbered racks with mixed.
func (o devUpOptions) draNode(n devNode) bool {
	switch o.mode() {
	case "dra":
		return true
	case "mixed":
		return n.rackIndex%2 == 0
	}
	return false
}

func (o devUpOptions) mode() string {
	if o.dra {
		return "dra"
	}
	return o.gpuMode
}

// devNodes lays out the sample cluster: blocks b1.., racks r01.. numbered
// across blocks (so that a rack label names one rack), nodes
// gpu-<block>-<rack>-<i> as in examples/sample-cluster.yaml.
func devNodes(blocks, racks, nodes int) []devNode {
	var out []devNode
	rack := 0
	for b := 1; b <= blocks; b++ {
		for r := 0; r < racks; r++ {
			rack++
			for n := 0; n < nodes; n++ {
				bl, rk := fmt.Sprintf("b%d", b), fmt.Sprintf("r%02d", rack)
				out = append(out, devNode{name: fmt.Sprintf("gpu-%s-%s-%d", bl, rk, n), block: bl, rack: rk, rackIndex: rack})
			}
		}
	}
	return out
}

func runDevUp(cmd *cobra.Command, o devUpOptions) (err error) {
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if err := o.validate(); err != nil {
		return err
	}
	o.metricsAddr, o.healthAddr = serveAddress(o.metricsAddr), serveAddress(o.healthAddr)
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	controllers, err := devControllers(o.with)
	if err != nil {
		return err
	}
	if missing := framework.ControllersMissing(controllers...); len(missing) > 0 {
		return fmt.Errorf("--with: missing %s; build them with 'make controllers'", strings.Join(missing, ", "))
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return fmt.Errorf("corral dev up reads deploy/crds and examples/ from the repository: %w", err)
	}
	kubeconfigOut, err := filepath.Abs(o.kubeconfigOut)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	fmt.Fprintln(errw, "corral dev: starting etcd, kube-apiserver, kube-controller-manager and kwok ...")
	begin := time.Now()
	c, err := framework.StartCluster(ctx, framework.Options{
		KeepDir:      o.keep,
		StartTimeout: o.startTimeout,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(errw, "corral dev: "+strings.TrimPrefix(format, "framework: ")+"\n", args...)
		},
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while starting the control plane")
		}
		return err
	}

	// Everything below is undone on the way out, in reverse: the scheduler,
	// then the control plane, then the kubeconfig.
	schedCtx, cancelSched := context.WithCancel(context.Background())
	schedDone := make(chan error, 1)
	schedStarted := false
	wroteKubeconfig := false
	defer func() {
		stop() // a second Ctrl-C now kills at once (the kernel then kills the children)
		fmt.Fprintln(errw, "corral dev: stopping (Ctrl-C again to kill at once) ...")
		cancelSched()
		if schedStarted {
			select {
			case <-schedDone:
			case <-time.After(10 * time.Second):
				fmt.Fprintln(errw, "corral dev: the scheduler did not stop within 10s")
			}
		}
		c.Stop()
		if wroteKubeconfig && !o.keep {
			_ = os.Remove(kubeconfigOut)
		}
		if o.keep {
			fmt.Fprintf(errw, "corral dev: stopped; kept %s and %s\n", c.Dir, kubeconfigOut)
		} else {
			fmt.Fprintf(errw, "corral dev: stopped; removed %s\n", c.Dir)
		}
	}()

	// Client-go's own logging (reflectors, the event broadcaster) goes to
	// the scheduler's log file, not the terminal.
	schedLog := filepath.Join(c.Dir, "corral-scheduler.log")
	logFile, err := os.OpenFile(schedLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	klog.LogToStderr(false)
	klog.SetOutput(logFile)

	setupCtx, cancelSetup := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelSetup()
	nodes := devNodes(o.blocks, o.racks, o.nodes)
	if err := setUpDevCluster(setupCtx, c, root, nodes, o); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while setting up the cluster")
		}
		return err
	}
	// Before the scheduler starts: it discovers the controllers' resources
	// once, at start.
	for _, n := range controllers {
		fmt.Fprintf(errw, "corral dev: starting %s ...\n", n)
		if err := c.StartController(setupCtx, n); err != nil {
			return err
		}
	}

	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.QPS, cfg.Burst, cfg.UserAgent = 200, 400, "corral-scheduler"
	client, dyn, err := clientsFor(cfg)
	if err != nil {
		return err
	}
	var reg *prometheus.Registry
	if o.metricsAddr != "" {
		reg = prometheus.NewRegistry()
	}
	opts := kube.Options{CycleInterval: o.cycle,
		Logger: slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: level}))}
	if reg != nil {
		opts.Registry = reg
	}
	sched, err := kube.New(client, dyn, opts)
	if err != nil {
		return err
	}
	schedStarted = true
	go func() { schedDone <- sched.Run(schedCtx) }()
	serveErr := make(chan error, 1)
	if o.metricsAddr != "" || o.healthAddr != "" {
		gatherer := prometheus.Gatherer(prometheus.NewRegistry())
		if reg != nil {
			gatherer = reg
		}
		go func() { serveErr <- kube.Serve(schedCtx, o.metricsAddr, o.healthAddr, gatherer, sched.Ready) }()
	}
	if err := waitSchedulerReady(setupCtx, sched, schedDone); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while starting the scheduler")
		}
		return err
	}

	kc, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfigOut, kc, 0o600); err != nil {
		return fmt.Errorf("--kubeconfig-out: %w", err)
	}
	wroteKubeconfig = true

	printDevSummary(out, devSummary{c: c, root: root, kubeconfig: kubeconfigOut, schedLog: schedLog, nodes: len(nodes),
		o: o, took: time.Since(begin)})

	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(errw)
			return nil
		case err := <-schedDone:
			schedStarted = false
			if err == nil {
				err = errors.New("exited")
			}
			return fmt.Errorf("corral's scheduler stopped: %w (see %s)", err, schedLog)
		case err := <-serveErr:
			if err != nil {
				return err
			}
		case <-tick.C:
			if err := c.Alive(); err != nil {
				return fmt.Errorf("control plane: %w (logs in %s)", err, c.Dir)
			}
		}
	}
}

// setUpDevCluster installs the CRDs, the Topology, the DeviceClass and the
// nodes (with their ResourceSlices under --dra), and waits for the nodes.
func setUpDevCluster(ctx context.Context, c *framework.Cluster, root string, nodes []devNode, o devUpOptions) error {
	if err := c.InstallCRDs(ctx, filepath.Join(root, "deploy", "crds")); err != nil {
		return err
	}
	if err := c.CreateFromFile(ctx, filepath.Join(root, "examples", "topology.yaml")); err != nil {
		return fmt.Errorf("examples/topology.yaml: %w", err)
	}
	if _, err := c.CreateGPUDeviceClass(ctx, framework.GPUDriver); err != nil {
		return fmt.Errorf("DeviceClass %s: %w", framework.GPUDriver, err)
	}
	for _, n := range nodes {
		spec := framework.NodeSpec{Name: n.name, CPU: "96", Memory: "1Ti", Labels: map[string]string{
			"corral.dev/block": n.block, "corral.dev/rack": n.rack, v1alpha1.LabelGPUModel: "H100",
		}}
		dra := o.draNode(n)
		if !dra {
			spec.GPUs = o.gpus
		}
		if _, err := c.AddGPUNode(ctx, spec); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		if dra {
			if _, err := c.AddGPUResourceSlice(ctx, n.name, framework.GPUSliceSpec{GPUs: o.gpus}); err != nil {
				return fmt.Errorf("ResourceSlice of node %s: %w", n.name, err)
			}
		}
	}
	for _, n := range nodes {
		if err := c.WaitNodeReady(ctx, n.name); err != nil {
			return err
		}
	}
	return nil
}

// waitSchedulerReady waits until the scheduler's caches have synced.
func waitSchedulerReady(ctx context.Context, s *kube.Scheduler, done <-chan error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !s.Ready() {
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("exited")
			}
			return fmt.Errorf("corral's scheduler: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("corral's scheduler did not sync its caches: %w", ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

type devSummary struct {
	c          *framework.Cluster
	root       string
	kubeconfig string
	schedLog   string
	nodes      int
	o          devUpOptions
	took       time.Duration
}

func printDevSummary(w io.Writer, s devSummary) {
	o := s.o
	// Paths as the user types them: relative when run from the repository
	// root (as `make dev-cluster` does), absolute otherwise.
	wd, _ := os.Getwd()
	rel := func(p string) string { return userPath(s.root, wd, p) }
	kubectl := kubectlPath(s.root, wd, os.Getenv("CORRAL_BIN"))
	gpus := "nvidia.com/gpu (extended resource)"
	examples := []string{rel("examples/gang-job-rack.yaml")}
	podHint := "<pod>"
	switch o.mode() {
	case "dra":
		gpus = "DRA devices (ResourceSlices of driver gpu.nvidia.com)"
		examples = []string{rel("examples/dra-2gpu-same-pcie-root.yaml")}
		podHint = "two-gpus"
	case "mixed":
		gpus = "nvidia.com/gpu on odd racks, DRA devices on even racks"
		examples = append(examples, rel("examples/dra-2gpu-same-pcie-root.yaml"))
		podHint = "two-gpus"
	}
	fmt.Fprintf(w, "\ncorral dev cluster up in %.1fs: %d kwok nodes (%d blocks × %d racks × %d nodes), %d GPUs each as %s\n",
		s.took.Seconds(), s.nodes, o.blocks, o.racks, o.nodes, o.gpus, gpus)
	fmt.Fprintf(w, "  API server     %s\n", s.c.Host)
	fmt.Fprintf(w, "  kubeconfig     %s\n", s.kubeconfig)
	fmt.Fprintf(w, "  scheduler log  %s\n", s.schedLog)
	keep := "removed on exit; --keep keeps it"
	if o.keep {
		keep = "kept on exit"
	}
	fmt.Fprintf(w, "  logs and data  %s (%s)\n", s.c.Dir, keep)
	fmt.Fprintf(w, "\nTry it in another terminal:\n\n")
	cmds := []string{
		"export KUBECONFIG=" + s.kubeconfig,
		kubectl + " get nodes -L corral.dev/block,corral.dev/rack",
	}
	for _, e := range examples {
		cmds = append(cmds, kubectl+" apply -f "+e)
	}
	cmds = append(cmds, kubectl+" get pods -o wide")
	if o.mode() != "extended" {
		cmds = append(cmds, kubectl+" get resourceclaims -o yaml")
	}
	explain := "go run ./cmd/corral explain default/" + podHint
	if wd, err := os.Getwd(); err != nil || wd != s.root {
		explain = "(cd " + s.root + " && " + explain + ")"
	}
	cmds = append(cmds, explain)
	for _, c := range cmds {
		fmt.Fprintf(w, "  %s\n", c)
	}
	fmt.Fprintf(w, "\nkwok completes a Job's pods as soon as they run (the pod annotation\npod-complete.stage.kwok.x-k8s.io/delay: 1h keeps them running); explain answers\nfor pending and running pods.\n")
	fmt.Fprintf(w, "\nCtrl-C stops the cluster.\n")
}

// devControllers reads --with: the controllers to run, in the order they
// start (Kueue after the others, so that it manages their kinds).
func devControllers(with []string) ([]framework.Controller, error) {
	want := map[framework.Controller]bool{}
	for _, w := range with {
		n := framework.Controller(strings.TrimSpace(w))
		if !slices.Contains(framework.Controllers, n) {
			return nil, fmt.Errorf("--with %q: want jobset, lws, kuberay or kueue", w)
		}
		want[n] = true
	}
	var out []framework.Controller
	for _, n := range framework.Controllers {
		if want[n] {
			out = append(out, n)
		}
	}
	return out, nil
}

// userPath is p, a path inside the repository, as the user types it:
// relative when they are at the repository root (as `make dev-cluster`
// runs), absolute otherwise.
func userPath(root, wd, p string) string {
	if wd == root {
		return p
	}
	return filepath.Join(root, p)
}

// kubectlPath is the kubectl the dev cluster was started beside: the one
// in $CORRAL_BIN when that is set (the framework took its binaries from
// there), else the repository's bin/.
func kubectlPath(root, wd, corralBin string) string {
	if corralBin != "" {
		if abs, err := filepath.Abs(corralBin); err == nil {
			corralBin = abs
		}
		return filepath.Join(corralBin, "kubectl")
	}
	return userPath(root, wd, "bin/kubectl")
}
