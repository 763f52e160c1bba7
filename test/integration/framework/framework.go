// Package framework starts a real Kubernetes control plane on loopback for
// corral's integration tests (and for `corral dev up`): etcd, kube-apiserver,
// kube-controller-manager, kwok (fake nodes and pod life cycle) and optionally
// kube-scheduler, all built by `make tools` (hack/tools/build.sh) into
// <repo>/bin. Nothing at test time needs a shell, openssl, Docker or network
// access beyond 127.0.0.1.
//
// Typical use:
//
//	c := framework.Start(t, framework.Options{})
//	node, err := c.AddGPUNode(ctx, framework.NodeSpec{Name: "gpu-0", GPUs: 8})
//	err = c.WaitNodeReady(ctx, node.Name)
package framework

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// DefaultFeatureGates are passed to kube-apiserver, kube-controller-manager
// and kube-scheduler (all of them register the same kube feature gates).
// Options.FeatureGates is merged over this map.
//
// For v1.36: DynamicResourceAllocation is GA and locked to true (setting it
// only logs a warning); GenericWorkload and GangScheduling are alpha (Workload
// and PodGroup in scheduling.k8s.io/v1alpha2); DRAWorkloadResourceClaims is
// alpha (PodGroup-level ResourceClaims, needs GenericWorkload);
// DRADeviceTaintRules is beta but off by default because its API
// (resource.k8s.io/v1beta2 devicetaintrules) is off by default. The other DRA
// betas listed are already on by default in 1.36 and are set explicitly so
// that the scheduler code can rely on them. (DRAPrioritizedList is GA and
// on in 1.36; setting GA gates only produces warnings, so it is left out.)
var DefaultFeatureGates = map[string]bool{
	"GenericWorkload":              true,
	"GangScheduling":               true,
	"DynamicResourceAllocation":    true,
	"DRAWorkloadResourceClaims":    true,
	"DRADeviceTaintRules":          true,
	"DRADeviceTaints":              true,
	"DRAExtendedResource":          true,
	"DRAPartitionableDevices":      true,
	"DRAConsumableCapacity":        true,
	"DRADeviceBindingConditions":   true,
	"DRAResourceClaimDeviceStatus": true,
}

// DefaultRuntimeConfig is kube-apiserver's --runtime-config.
// Options.RuntimeConfig is merged over it.
var DefaultRuntimeConfig = map[string]string{
	"scheduling.k8s.io/v1alpha2":               "true", // Workload, PodGroup
	"resource.k8s.io/v1":                       "true", // DRA (on by default; explicit)
	"resource.k8s.io/v1beta2/devicetaintrules": "true", // DeviceTaintRule (DRADeviceTaintRules)
}

// Static identities in the token file. Everything is in system:masters: this
// is a throw-away test cluster, and separate user names still make the audit
// trail / apiserver logs readable.
const (
	AdminUser = "corral-admin"

	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
	saIssuer    = "https://kubernetes.default.svc.cluster.local"
)

// Options configures StartCluster. The zero value starts etcd,
// kube-apiserver, kube-controller-manager and kwok.
type Options struct {
	// KubeScheduler also starts the stock kube-scheduler (for side-by-side
	// benchmarks). Off by default: corral is the scheduler under test.
	KubeScheduler bool

	// BinDir overrides $CORRAL_BIN / <repo root>/bin.
	BinDir string
	// Dir is the working directory (certs, etcd data, kubeconfigs, logs).
	// Default: a new temporary directory, removed by Stop (kept if KeepDir).
	Dir     string
	KeepDir bool

	// FeatureGates / RuntimeConfig are merged over DefaultFeatureGates /
	// DefaultRuntimeConfig.
	FeatureGates  map[string]bool
	RuntimeConfig map[string]string

	// Extra flags, appended last (so they override ours).
	ExtraEtcdArgs              []string
	ExtraAPIServerArgs         []string
	ExtraControllerManagerArgs []string
	ExtraSchedulerArgs         []string
	ExtraKwokArgs              []string
	// ExtraKwokStages are additional kwok Stage files (e.g. a completion
	// stage for bare pods; the stock pod-complete only fires for Job pods).
	ExtraKwokStages []string

	// SchedulerQPS and SchedulerBurst set kube-scheduler's client rate
	// limits (default 200 and 400).
	SchedulerQPS   int
	SchedulerBurst int

	// StartTimeout bounds the whole start-up (default 90s).
	StartTimeout time.Duration
	// APIServerVerbosity is kube-apiserver's -v (default 1).
	APIServerVerbosity int

	// Logf receives progress messages (Start uses t.Logf). Optional.
	Logf func(format string, args ...any)
}

// Cluster is a running control plane.
type Cluster struct {
	// Dir holds certs, etcd data, kubeconfigs and one log file per component
	// (etcd.log, kube-apiserver.log, kube-controller-manager.log, kwok.log,
	// kube-scheduler.log).
	Dir string
	// Kubeconfig is the path of an admin kubeconfig (static token in
	// system:masters, CA embedded); usable with `bin/kubectl --kubeconfig`.
	Kubeconfig string
	// Host is https://127.0.0.1:<port>.
	Host       string
	RESTConfig *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	// EtcdURL is etcd's client URL (http, loopback).
	EtcdURL string
	// StartupDuration is how long StartCluster took.
	StartupDuration time.Duration

	opts    Options
	bins    *binaries
	pki     *pkiFiles
	spawner *spawner
	ownsDir bool

	mu    sync.Mutex
	procs map[string]*process // by component name
	order []string            // start order

	// apiArgs and adminToken restart kube-apiserver as it was (chaos.go).
	apiArgs    []string
	adminToken string

	stopOnce sync.Once
}

// Component names (also the log file base names).
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kwok                  = "kwok"
)

// Start starts a cluster for a test and registers its shutdown with
// t.Cleanup. If the binaries are missing, the test is skipped when
// CORRAL_SKIP_INTEGRATION=1 and fails (telling you to run `make tools`)
// otherwise. When the test fails, the last 50 lines of the kube-apiserver
// log (and of any component that died) are printed and the working directory
// is kept.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 90 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	c, err := StartCluster(ctx, opts)
	if err != nil {
		var missing *MissingBinariesError
		if errors.As(err, &missing) {
			if os.Getenv("CORRAL_SKIP_INTEGRATION") == "1" {
				t.Skipf("CORRAL_SKIP_INTEGRATION=1: %v", err)
			}
			t.Fatalf("%v\n(set CORRAL_SKIP_INTEGRATION=1 to skip integration tests instead)", err)
		}
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(func() {
		failed := t.Failed()
		if failed {
			c.opts.KeepDir = true
		}
		c.stopProcesses()
		if failed {
			c.logFailureDiagnostics(t.Logf)
		}
		c.cleanupDir()
	})
	return c
}

// StartCluster starts the control plane. ctx bounds the start-up only; the
// processes run until Stop. On error everything started so far is stopped.
func StartCluster(ctx context.Context, opts Options) (c *Cluster, err error) {
	begin := time.Now()
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.StartTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.StartTimeout)
		defer cancel()
	} else if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
	}

	bins, err := findBinaries(opts)
	if err != nil {
		return nil, err
	}

	c = &Cluster{opts: opts, bins: bins, procs: map[string]*process{}}
	if opts.Dir != "" {
		if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
			return nil, err
		}
		c.Dir, _ = filepath.Abs(opts.Dir)
	} else {
		if c.Dir, err = os.MkdirTemp("", "corral-cp-"); err != nil {
			return nil, err
		}
		c.ownsDir = true
	}
	c.spawner = newSpawner()
	defer func() {
		if err != nil {
			c.stopProcesses()
			err = fmt.Errorf("%w%s", err, c.diagnostics())
			c.cleanupDir()
			c = nil
		}
	}()

	// Certificates are generated while etcd boots.
	type pkiResult struct {
		p   *pkiFiles
		err error
	}
	pkiCh := make(chan pkiResult, 1)
	go func() {
		p, err := generatePKI(filepath.Join(c.Dir, "pki"), net.ParseIP(serviceIP))
		pkiCh <- pkiResult{p, err}
	}()

	t0 := time.Now()
	if err := c.startEtcd(ctx); err != nil {
		return c, err
	}
	opts.Logf("framework: etcd ready at %s (%.1fs)", c.EtcdURL, time.Since(t0).Seconds())

	var pr pkiResult
	select {
	case pr = <-pkiCh:
	case <-ctx.Done():
		return c, fmt.Errorf("generating certificates: %w", ctx.Err())
	}
	if pr.err != nil {
		return c, pr.err
	}
	c.pki = pr.p

	tokens, err := c.writeTokenFile()
	if err != nil {
		return c, err
	}

	t0 = time.Now()
	if err := c.startAPIServer(ctx, tokens); err != nil {
		return c, err
	}
	opts.Logf("framework: kube-apiserver ready at %s (%.1fs)", c.Host, time.Since(t0).Seconds())

	if err := c.writeKubeconfigs(tokens); err != nil {
		return c, err
	}
	if err := c.buildClients(tokens[AdminUser]); err != nil {
		return c, err
	}

	t0 = time.Now()
	if err := c.startControllerManager(); err != nil {
		return c, err
	}
	if opts.KubeScheduler {
		if err := c.startScheduler(); err != nil {
			return c, err
		}
	}
	if err := c.startKwok(); err != nil {
		return c, err
	}

	// kube-controller-manager creates the "default" ServiceAccount in every
	// namespace; pods cannot be created before it exists. Waiting for it in
	// "default" also proves KCM is up and talking to the apiserver.
	if err := c.waitServiceAccount(ctx, metav1.NamespaceDefault, "default"); err != nil {
		return c, fmt.Errorf("waiting for kube-controller-manager to create default/default ServiceAccount: %w", err)
	}
	if err := c.checkAlive(); err != nil {
		return c, err
	}
	opts.Logf("framework: controllers running (%.1fs); control plane up in %.1fs, logs in %s",
		time.Since(t0).Seconds(), time.Since(begin).Seconds(), c.Dir)
	c.StartupDuration = time.Since(begin)
	return c, nil
}

// Stop terminates all components (SIGTERM, then SIGKILL after a grace
// period) and removes the working directory unless it was given in
// Options.Dir or Options.KeepDir is set. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopProcesses()
	c.cleanupDir()
}

// LogFile returns the log file of a component (Etcd, KubeAPIServer, ...).
func (c *Cluster) LogFile(component string) string {
	return filepath.Join(c.Dir, component+".log")
}

// checkAlive returns an error naming every component that has exited.
func (c *Cluster) checkAlive() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var dead []string
	for _, name := range c.order {
		if ok, err := c.procs[name].unexpectedExit(); ok {
			dead = append(dead, fmt.Sprintf("%s exited (%v)", name, err))
		}
	}
	if len(dead) > 0 {
		return errors.New(strings.Join(dead, "; "))
	}
	return nil
}

func (c *Cluster) stopProcesses() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		var clients, apiserver, etcd []*process
		for _, name := range c.order {
			switch name {
			case Etcd:
				etcd = append(etcd, c.procs[name])
			case KubeAPIServer:
				apiserver = append(apiserver, c.procs[name])
			default:
				clients = append(clients, c.procs[name])
			}
		}
		c.mu.Unlock()
		// Clients first, then the apiserver, then etcd, so nobody logs a
		// storm of connection errors while shutting down.
		stopProcesses(clients, 3*time.Second)
		stopProcesses(apiserver, 5*time.Second)
		stopProcesses(etcd, 3*time.Second)
		if c.spawner != nil {
			c.spawner.close()
		}
	})
}

func (c *Cluster) cleanupDir() {
	if c.ownsDir && !c.opts.KeepDir && c.Dir != "" {
		_ = os.RemoveAll(c.Dir)
	}
}

// diagnostics is appended to start-up errors: the tail of the log of every
// component that died or, if none did, of every component.
func (c *Cluster) diagnostics() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	shown := false
	for _, name := range c.order {
		if p := c.procs[name]; p.diedEarly() {
			_, err := p.exited()
			fmt.Fprintf(&b, "\n--- %s exited (%v); last 50 lines of %s:\n%s", name, err, p.logPath, tailFile(p.logPath, 50))
			shown = true
		}
	}
	if !shown {
		// Nothing crashed (a timeout): show every component's recent output.
		for _, name := range c.order {
			p := c.procs[name]
			fmt.Fprintf(&b, "\n--- last 30 lines of %s:\n%s", p.logPath, tailFile(p.logPath, 30))
		}
	}
	return b.String()
}

// logFailureDiagnostics prints what helps after a failed test.
func (c *Cluster) logFailureDiagnostics(logf func(string, ...any)) {
	c.mu.Lock()
	order := slices.Clone(c.order)
	procs := maps.Clone(c.procs)
	c.mu.Unlock()
	for _, name := range order {
		p := procs[name]
		if name == KubeAPIServer {
			continue
		}
		if p.diedEarly() {
			logf("%s had exited before the end of the test; last 50 lines of %s:\n%s", name, p.logPath, tailFile(p.logPath, 50))
		}
	}
	logf("last 50 lines of %s:\n%s", c.LogFile(KubeAPIServer), tailFile(c.LogFile(KubeAPIServer), 50))
	logf("control-plane logs and data kept in %s", c.Dir)
}

// diedEarly: exited, and not because we stopped it.
func (p *process) diedEarly() bool {
	select {
	case <-p.done:
	default:
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// stopped is set when we signal; a process already dead at that point
	// was skipped by stopProcesses, so stopped stays false.
	return !p.stopped
}

func (c *Cluster) addProcess(p *process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.procs[p.name]; !ok {
		c.order = append(c.order, p.name)
	}
	c.procs[p.name] = p
}

// ---------------------------------------------------------------- etcd

// ---------------------------------------------------------------- apiserver

// ---------------------------------------------------------------- kubeconfigs, clients

// ---------------------------------------------------------------- controllers

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
