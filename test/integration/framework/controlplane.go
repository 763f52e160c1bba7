package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
