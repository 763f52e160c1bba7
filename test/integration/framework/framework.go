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
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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

func (c *Cluster) startEtcd(ctx context.Context) error {
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		clientPort, err := freePort()
		if err != nil {
			return err
		}
		peerPort, err := freePort()
		if err != nil {
			return err
		}
		clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
		dataDir := filepath.Join(c.Dir, "etcd-data")
		_ = os.RemoveAll(dataDir)
		args := []string{
			"--name=corral",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=corral=" + peerURL,
			"--initial-cluster-state=new",
			"--unsafe-no-fsync", // test data only: skip fsync (big speed-up)
			"--log-level=warn",
		}
		args = append(args, c.opts.ExtraEtcdArgs...)
		p, err := startProcess(c.spawner, Etcd, c.bins.etcd, args, nil, c.Dir, c.LogFile(Etcd))
		if err != nil {
			return err
		}
		c.addProcess(p)
		lastErr = waitHTTP(ctx, p, 30*time.Second, func(hc *http.Client) (bool, string) {
			return probe(hc, clientURL+"/health", "", `"health":"true"`)
		}, nil)
		if lastErr == nil {
			c.EtcdURL = clientURL
			return nil
		}
		stopProcesses([]*process{p}, time.Second)
		if !fileContains(p.logPath, "address already in use") {
			break
		}
		c.opts.Logf("framework: etcd port collision, retrying (attempt %d)", attempt)
	}
	return fmt.Errorf("etcd did not become healthy: %w", lastErr)
}

// ---------------------------------------------------------------- apiserver

// writeTokenFile writes the static token file; returns user -> token.
func (c *Cluster) writeTokenFile() (map[string]string, error) {
	users := []string{AdminUser, "system:kube-controller-manager", "system:kube-scheduler", "kwok"}
	tokens := map[string]string{}
	var b strings.Builder
	for _, u := range users {
		tokens[u] = randomToken()
		// token,user,uid,"group1,group2"
		fmt.Fprintf(&b, "%s,%s,%s,\"system:masters\"\n", tokens[u], u, u)
	}
	path := filepath.Join(c.Dir, "pki", "tokens.csv")
	return tokens, os.WriteFile(path, []byte(b.String()), 0o600)
}

func joinGates(m map[string]bool) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.FormatBool(m[k])
	}
	return strings.Join(parts, ",")
}

func (c *Cluster) featureGates() string {
	m := maps.Clone(DefaultFeatureGates)
	maps.Copy(m, c.opts.FeatureGates)
	return joinGates(m)
}

func (c *Cluster) runtimeConfig() string {
	m := maps.Clone(DefaultRuntimeConfig)
	maps.Copy(m, c.opts.RuntimeConfig)
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func (c *Cluster) startAPIServer(ctx context.Context, tokens map[string]string) error {
	v := c.opts.APIServerVerbosity
	if v == 0 {
		v = 1
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.pki.caPEM)

	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		host := fmt.Sprintf("https://127.0.0.1:%d", port)
		args := []string{
			"--etcd-servers=" + c.EtcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(c.Dir, "pki", "apiserver-generated"),
			"--tls-cert-file=" + c.pki.ServingCert,
			"--tls-private-key-file=" + c.pki.ServingKey,
			"--client-ca-file=" + c.pki.CACert,
			"--token-auth-file=" + filepath.Join(c.Dir, "pki", "tokens.csv"),
			"--authorization-mode=RBAC",
			"--service-account-issuer=" + saIssuer,
			"--service-account-key-file=" + c.pki.SAPub,
			"--service-account-signing-key-file=" + c.pki.SAKey,
			"--service-cluster-ip-range=" + serviceCIDR,
			// Loopback is not a valid Endpoints address, and nothing in a
			// kwok cluster talks to the in-cluster "kubernetes" Service.
			"--endpoint-reconciler-type=none",
			"--allow-privileged=true",
			"--feature-gates=" + c.featureGates(),
			"--runtime-config=" + c.runtimeConfig(),
			"--v=" + strconv.Itoa(v),
		}
		args = append(args, c.opts.ExtraAPIServerArgs...)
		p, err := startProcess(c.spawner, KubeAPIServer, c.bins.apiserver, args, nil, c.Dir, c.LogFile(KubeAPIServer))
		if err != nil {
			return err
		}
		c.addProcess(p)
		lastMsg := ""
		lastErr = waitHTTP(ctx, p, 60*time.Second, func(hc *http.Client) (bool, string) {
			ok, msg := probe(hc, host+"/readyz", tokens[AdminUser], "ok")
			lastMsg = msg
			return ok, msg
		}, pool)
		if lastErr == nil {
			c.Host = host
			c.apiArgs, c.adminToken = args, tokens[AdminUser]
			return nil
		}
		if lastMsg != "" {
			lastErr = fmt.Errorf("%w (last /readyz answer: %s)", lastErr, lastMsg)
		}
		stopProcesses([]*process{p}, 2*time.Second)
		if !fileContains(p.logPath, "address already in use") {
			break
		}
		c.opts.Logf("framework: kube-apiserver port collision, retrying (attempt %d)", attempt)
	}
	return fmt.Errorf("kube-apiserver did not become ready: %w", lastErr)
}

// waitHTTP polls check every 100ms until it succeeds, p exits, the per-step
// timeout passes or ctx is done.
func waitHTTP(ctx context.Context, p *process, timeout time.Duration, check func(*http.Client) (bool, string), roots *x509.CertPool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
			Proxy:             nil, // never go through $HTTPS_PROXY for loopback
		},
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited: %v", p.name, err)
		}
		ok, msg := check(hc)
		if ok {
			return nil
		}
		last = msg
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s (%v); last probe: %s", p.name, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func probe(hc *http.Client, url, token, want string) (bool, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
		return true, ""
	}
	return false, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
}

// ---------------------------------------------------------------- kubeconfigs, clients

func (c *Cluster) kubeconfigPath(user string) string {
	switch user {
	case AdminUser:
		return filepath.Join(c.Dir, "kubeconfig")
	default:
		return filepath.Join(c.Dir, strings.TrimPrefix(user, "system:")+".kubeconfig")
	}
}

func (c *Cluster) writeKubeconfigs(tokens map[string]string) error {
	for user, token := range tokens {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["corral"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.pki.caPEM}
		cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
		cfg.Contexts["corral"] = &clientcmdapi.Context{Cluster: "corral", AuthInfo: user, Namespace: metav1.NamespaceDefault}
		cfg.CurrentContext = "corral"
		if err := clientcmd.WriteToFile(*cfg, c.kubeconfigPath(user)); err != nil {
			return err
		}
	}
	c.Kubeconfig = c.kubeconfigPath(AdminUser)
	return nil
}

func (c *Cluster) buildClients(token string) error {
	c.RESTConfig = &rest.Config{
		Host:            c.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.caPEM},
		QPS:             200,
		Burst:           400,
		// No Timeout: it would also cut informers' long-running watches.
		UserAgent: "corral-integration-framework",
	}
	var err error
	if c.Client, err = kubernetes.NewForConfig(c.RESTConfig); err != nil {
		return err
	}
	c.Dynamic, err = dynamic.NewForConfig(c.RESTConfig)
	return err
}

// ---------------------------------------------------------------- controllers

func (c *Cluster) startControllerManager() error {
	args := []string{
		"--kubeconfig=" + c.kubeconfigPath("system:kube-controller-manager"),
		"--service-account-private-key-file=" + c.pki.SAKey,
		"--root-ca-file=" + c.pki.CACert,
		"--cluster-signing-cert-file=" + c.pki.CACert,
		"--cluster-signing-key-file=" + c.pki.CAKey,
		// nodeipam needs a cluster CIDR and is pointless for fake nodes.
		// Keep node lifecycle on: it removes the not-ready taint once kwok
		// reports nodes Ready.
		"--controllers=*,-nodeipam",
		"--leader-elect=false",
		"--secure-port=0",
		"--feature-gates=" + c.featureGates(),
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--v=1",
	}
	args = append(args, c.opts.ExtraControllerManagerArgs...)
	p, err := startProcess(c.spawner, KubeControllerManager, c.bins.kcm, args, nil, c.Dir, c.LogFile(KubeControllerManager))
	if err != nil {
		return err
	}
	c.addProcess(p)
	return nil
}

func (c *Cluster) startScheduler() error {
	cfgPath := filepath.Join(c.Dir, "kube-scheduler-config.yaml")
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
`, c.kubeconfigPath("system:kube-scheduler"), orDefault(c.opts.SchedulerQPS, 200), orDefault(c.opts.SchedulerBurst, 400))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	args := []string{
		"--config=" + cfgPath,
		"--secure-port=0",
		"--feature-gates=" + c.featureGates(),
		"--v=1",
	}
	args = append(args, c.opts.ExtraSchedulerArgs...)
	p, err := startProcess(c.spawner, KubeScheduler, c.bins.scheduler, args, nil, c.Dir, c.LogFile(KubeScheduler))
	if err != nil {
		return err
	}
	c.addProcess(p)
	return nil
}

// KwokNodeAnnotation marks nodes that kwok manages (see AddGPUNode).
// NodeLeaseSeconds is the node Lease duration kwok renews (it renews at a
// quarter of it, as the kubelet does).
const (
	NodeLeaseSeconds        = 40
	KwokNodeAnnotation      = "kwok.x-k8s.io/node"
	KwokNodeAnnotationValue = "fake"
)

func (c *Cluster) startKwok() error {
	args := []string{
		"--kubeconfig=" + c.kubeconfigPath("kwok"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + KwokNodeAnnotationValue,
		"--server-address=127.0.0.1:0",
		// Without a lease duration kwok renews no node Leases, and once the
		// node monitor grace period passes kube-controller-manager marks every
		// node Ready=Unknown (about once a minute, for a few seconds): corral
		// would then remediate running pods. kwokctl uses 40 s too.
		"--node-lease-duration-seconds=" + strconv.Itoa(NodeLeaseSeconds),
	}
	for _, s := range c.bins.kwokStages {
		args = append(args, "--config="+s)
	}
	args = append(args, c.opts.ExtraKwokArgs...)
	workDir := filepath.Join(c.Dir, "kwok-workdir")
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return err
	}
	// KWOK_WORKDIR keeps kwok away from ~/.kwok (it would also load
	// ~/.kwok/kwok.yaml if one existed).
	env := []string{"KWOK_WORKDIR=" + workDir}
	p, err := startProcess(c.spawner, Kwok, c.bins.kwok, args, env, c.Dir, c.LogFile(Kwok))
	if err != nil {
		return err
	}
	c.addProcess(p)
	return nil
}

func (c *Cluster) waitServiceAccount(ctx context.Context, ns, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			lastErr = err
		}
		if err := c.checkAlive(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
