package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/test/integration/framework"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure corral against a real API server",
	}
	cmd.AddCommand(newBenchE2ECmd())
	return cmd
}

type e2eOptions struct {
	nodes, gpusPerNode, pods, gangs, gangSize, workers, qps int
	jsonFile                                                string
}

// e2eResult is one scheduler's run of one scenario.
type e2eResult struct {
	Scenario  string `json:"scenario"`
	Scheduler string `json:"scheduler"`
	Pods      int    `json:"pods"`
	Bound     int    `json:"bound"`
	// FromStartS: scheduler process start to the last binding seen.
	FromStartS float64 `json:"from_start_s"`
	// FirstToLastS: first to last binding seen.
	FirstToLastS float64 `json:"first_to_last_s"`
	PodsPerS     float64 `json:"pods_per_s"` // Bound / FirstToLastS
	PeakRSSMiB   float64 `json:"peak_rss_mib"`
	PartialGangs int     `json:"partial_gangs,omitempty"`
}

func newBenchE2ECmd() *cobra.Command {
	o := e2eOptions{}
	cmd := &cobra.Command{
		Use:   "e2e",
		Short: "Pods bound per second through a real API server with kwok nodes, corral beside kube-scheduler",
		Long: `e2e starts the test control plane (bin/, see 'make tools'), adds kwok nodes
with 8 GPUs each, and measures, one after the other in the same cluster:
  1. kube-scheduler v1.36.3 binding --pods single-GPU pods (plain pods: it has no gangs),
  2. corral binding the same number of single-GPU pods,
  3. corral binding --gangs gangs of --gang-size single-GPU pods.
The pods of each run exist before its scheduler starts, so creation speed is
not measured. Each scheduler runs as its own process; its peak RSS is read
from /proc.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return runE2E(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.nodes, "nodes", 1000, "kwok nodes (20 per rack)")
	f.IntVar(&o.gpusPerNode, "gpus-per-node", 16, "GPUs per node: room for every run's pods at once")
	f.IntVar(&o.pods, "pods", 5000, "single-GPU pods per scheduler")
	f.IntVar(&o.gangs, "gangs", 500, "gangs for corral")
	f.IntVar(&o.gangSize, "gang-size", 8, "pods per gang (1 GPU each)")
	f.IntVar(&o.workers, "workers", 32, "parallel API writers when creating objects")
	f.IntVar(&o.qps, "qps", 1000, "client QPS of both schedulers (burst is twice)")
	f.StringVar(&o.jsonFile, "json", "", "also write the results as JSON")
	return cmd
}

// validate checks the flags before the control plane starts: a count
// below 1 would leave the benchmark waiting for nodes or pods that never
// come, a --json file that cannot be written would lose the results.
func (o e2eOptions) validate() error {
	for _, f := range []struct {
		flag string
		v    int
	}{{"--nodes", o.nodes}, {"--gpus-per-node", o.gpusPerNode}, {"--pods", o.pods}, {"--gangs", o.gangs},
		{"--gang-size", o.gangSize}, {"--workers", o.workers}, {"--qps", o.qps}} {
		if f.v < 1 {
			return fmt.Errorf("%s %d: must be at least 1", f.flag, f.v)
		}
	}
	// Every run's pods stay until the end (see the command's help).
	if need, have := 2*o.pods+o.gangs*o.gangSize, o.nodes*o.gpusPerNode; need > have {
		return fmt.Errorf("--nodes %d × --gpus-per-node %d = %d GPUs, below the %d single-GPU pods of the three runs (2 × --pods + --gangs × --gang-size)",
			o.nodes, o.gpusPerNode, have, need)
	}
	return checkFileWritable("--json", o.jsonFile)
}

func runE2E(ctx context.Context, out io.Writer, o e2eOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	logf := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	// Both schedulers get the same client rate limits, high enough that the
	// limiter is not what is measured.
	c, err := framework.StartCluster(ctx, framework.Options{Logf: func(string, ...any) {},
		SchedulerQPS: o.qps, SchedulerBurst: 2 * o.qps})
	if err != nil {
		return err
	}
	defer c.Stop()
	logf("control plane up in %.1fs", c.StartupDuration.Seconds())
	cfg := *c.RESTConfig
	cfg.QPS, cfg.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := parallel(o.nodes, o.workers, func(i int) error {
		_, err := c.AddGPUNode(ctx, framework.NodeSpec{Name: fmt.Sprintf("n%04d", i), GPUs: o.gpusPerNode, CPU: "256", Memory: "2Ti",
			Labels: map[string]string{"corral.dev/rack": fmt.Sprintf("r%03d", i/20), v1alpha1.LabelGPUModel: "H100"}})
		return err
	}); err != nil {
		return err
	}
	if err := waitReady(ctx, client, o.nodes); err != nil {
		return err
	}
	logf("%d kwok nodes Ready in %.1fs", o.nodes, time.Since(t0).Seconds())

	self, err := os.Executable()
	if err != nil {
		return err
	}
	var results []e2eResult
	run := func(scenario, scheduler, ns string, pods []*corev1.Pod, start func() (func() (int64, error), func(), error)) error {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := waitServiceAccount(ctx, client, ns); err != nil {
			return err
		}
		w := newBindWatch(client, ns)
		defer w.stop()
		if err := parallel(len(pods), o.workers, func(i int) error {
			_, err := client.CoreV1().Pods(ns).Create(ctx, pods[i], metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
		began := time.Now()
		rss, stop, err := start()
		if err != nil {
			return err
		}
		last := w.waitAll(ctx, len(pods), 10*time.Minute)
		res := e2eResult{Scenario: scenario, Scheduler: scheduler, Pods: len(pods), Bound: w.count()}
		first, lastAt := w.span()
		res.FromStartS = lastAt.Sub(began).Seconds()
		res.FirstToLastS = lastAt.Sub(first).Seconds()
		if res.FirstToLastS > 0 {
			res.PodsPerS = float64(res.Bound) / res.FirstToLastS
		}
		if b, err := rss(); err == nil {
			res.PeakRSSMiB = float64(b) / (1 << 20)
		}
		stop()
		_ = last
		if scenario == "gangs" {
			res.PartialGangs = partialGangs(ctx, client, ns)
		}
		results = append(results, res)
		logf("%-8s %-15s %5d/%d pods bound, %.1fs from start, %.0f pods/s, peak RSS %.0f MiB",
			scenario, scheduler, res.Bound, res.Pods, res.FromStartS, res.PodsPerS, res.PeakRSSMiB)
		return nil
	}
	startCorral := func(tag string) func() (func() (int64, error), func(), error) {
		return func() (func() (int64, error), func(), error) {
			logPath := filepath.Join(c.Dir, "corral-"+tag+".log")
			f, err := os.Create(logPath)
			if err != nil {
				return nil, nil, err
			}
			cmd := exec.Command(self, "scheduler", "--kubeconfig", c.Kubeconfig, "--leader-elect=false",
				"--metrics-address", "", "--health-address", "", "--cycle-interval", "200ms",
				"--kube-api-qps", fmt.Sprint(o.qps), "--kube-api-burst", fmt.Sprint(2*o.qps))
			cmd.Stdout, cmd.Stderr = f, f
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			pid := cmd.Process.Pid
			rss := func() (int64, error) { return framework.PeakRSSOf(pid) }
			stop := func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait(); f.Close() }
			return rss, stop, nil
		}
	}
	podsFor := func(ns, scheduler string, n int, gang func(i int) string) []*corev1.Pod {
		var out []*corev1.Pod
		for i := 0; i < n; i++ {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%05d", i), Namespace: ns, Annotations: map[string]string{}},
				Spec: corev1.PodSpec{SchedulerName: scheduler, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
						Limits:   framework.GPUQuantity(1)}}}}}
			if gang != nil {
				p.Annotations[v1alpha1.AnnotationGang] = gang(i)
			}
			out = append(out, p)
		}
		return out
	}

	// kube-scheduler goes first, on the emptiest cluster; corral's runs see
	// the pods of the runs before them (nothing is deleted in between:
	// kwok removes pods slowly, and the nodes have room for all runs).
	if err := run("pods", "kube-scheduler", "bench-kube", podsFor("bench-kube", "default-scheduler", o.pods, nil),
		func() (func() (int64, error), func(), error) {
			if err := c.StartKubeScheduler(); err != nil {
				return nil, nil, err
			}
			return func() (int64, error) { return c.PeakRSS(framework.KubeScheduler) }, func() {}, nil
		}); err != nil {
		return err
	}
	if err := run("pods", "corral", "bench-corral", podsFor("bench-corral", "corral", o.pods, nil), startCorral("pods")); err != nil {
		return err
	}
	size := o.gangSize
	if err := run("gangs", "corral", "bench-gangs", podsFor("bench-gangs", "corral", o.gangs*size,
		func(i int) string { return fmt.Sprintf("g%04d", i/size) }), startCorral("gangs")); err != nil {
		return err
	}
	if o.jsonFile != "" {
		b, _ := json.MarshalIndent(map[string]any{"nodes": o.nodes, "machine": machine(), "results": results}, "", "  ")
		if err := os.WriteFile(o.jsonFile, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func waitReady(ctx context.Context, client kubernetes.Interface, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			ready := 0
			for _, nd := range list.Items {
				for _, cond := range nd.Status.Conditions {
					if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			if ready >= n {
				return nil
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("nodes not Ready after 5 minutes")
}

func waitServiceAccount(ctx context.Context, client kubernetes.Interface, ns string) error {
	for i := 0; i < 300; i++ {
		if _, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no default ServiceAccount in %s", ns)
}

// partialGangs counts gangs with some but not all pods bound.
func partialGangs(ctx context.Context, client kubernetes.Interface, ns string) int {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return -1
	}
	bound, total := map[string]int{}, map[string]int{}
	for _, p := range list.Items {
		g := p.Annotations[v1alpha1.AnnotationGang]
		total[g]++
		if p.Spec.NodeName != "" {
			bound[g]++
		}
	}
	n := 0
	for g, t := range total {
		if bound[g] > 0 && bound[g] < t {
			n++
		}
	}
	return n
}

// bindWatch records when each pod of a namespace is first seen bound.
type bindWatch struct {
	mu     sync.Mutex
	at     map[string]time.Time
	cancel context.CancelFunc
	wake   chan struct{}
}

func newBindWatch(client kubernetes.Interface, ns string) *bindWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &bindWatch{at: map[string]time.Time{}, cancel: cancel, wake: make(chan struct{}, 1)}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	see := func(o any) {
		p, ok := o.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		w.mu.Lock()
		if _, seen := w.at[p.Name]; !seen {
			w.at[p.Name] = time.Now()
		}
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, n any) { see(n) }})
	f.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	return w
}

func (w *bindWatch) stop() { w.cancel() }

func (w *bindWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.at)
}

func (w *bindWatch) span() (first, last time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.at {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}

// waitAll waits until n pods are bound, or no binding has come for 20 s, or
// the timeout passes.
func (w *bindWatch) waitAll(ctx context.Context, n int, timeout time.Duration) time.Time {
	deadline := time.After(timeout)
	for w.count() < n {
		select {
		case <-w.wake:
		case <-time.After(20 * time.Second):
			_, last := w.span()
			return last
		case <-deadline:
			_, last := w.span()
			return last
		case <-ctx.Done():
			_, last := w.span()
			return last
		}
	}
	_, last := w.span()
	return last
}
