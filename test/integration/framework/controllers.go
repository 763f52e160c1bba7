package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Controller names a batch workload controller the framework can run
// beside the control plane, built at a pinned version by
// hack/tools/controllers.sh (`make controllers`) into the binary directory.
type Controller string

const (
	JobSet          Controller = "jobset"  // sigs.k8s.io/jobset v0.11.1
	LeaderWorkerSet Controller = "lws"     // sigs.k8s.io/lws v0.8.0
	KubeRay         Controller = "kuberay" // ray-operator v1.6.0
	Kueue           Controller = "kueue"   // sigs.k8s.io/kueue v0.17.0
)

// Controllers is every controller the framework can run, in the order
// `corral dev up --with` starts them (Kueue last: it enables its
// integrations for the owner CRDs already installed).
var Controllers = []Controller{JobSet, LeaderWorkerSet, KubeRay, Kueue}

// controllerBinary is each controller's binary in the binary directory.
var controllerBinary = map[Controller]string{
	JobSet:          "jobset-controller",
	LeaderWorkerSet: "lws-controller",
	KubeRay:         "kuberay-operator",
	Kueue:           "kueue-controller",
}

// configAPIVersion is the apiVersion of the controller's Configuration
// file; empty for controllers configured by flags.
var configAPIVersion = map[Controller]string{
	JobSet:          "config.jobset.x-k8s.io/v1alpha1",
	LeaderWorkerSet: "config.lws.x-k8s.io/v1alpha1",
	Kueue:           "config.kueue.x-k8s.io/v1beta2",
}

// ControllersMissing lists what the named controllers need that the binary
// directory lacks (binaries, CRDs, webhook manifests); empty when all are
// there. Tests skip with it, naming `make controllers`.
func ControllersMissing(names ...Controller) []string {
	dir, err := BinDir()
	if err != nil {
		return []string{err.Error()}
	}
	var missing []string
	for _, n := range names {
		bin, ok := controllerBinary[n]
		if !ok {
			missing = append(missing, "unknown controller "+string(n))
			continue
		}
		if st, err := os.Stat(filepath.Join(dir, bin)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, bin)
		}
		if crds, _ := filepath.Glob(filepath.Join(dir, "controller-crds", string(n), "*.yaml")); len(crds) == 0 {
			missing = append(missing, "controller-crds/"+string(n))
		}
		if configAPIVersion[n] != "" {
			if _, err := os.Stat(webhookManifests(dir, n)); err != nil {
				missing = append(missing, "controller-crds/"+string(n)+"/webhooks/manifests.yaml")
			}
		}
	}
	return missing
}

func webhookManifests(dir string, n Controller) string {
	return filepath.Join(dir, "controller-crds", string(n), "webhooks", "manifests.yaml")
}

// StartController installs a controller's CRDs and runs it against the
// cluster until the cluster stops. JobSet, LeaderWorkerSet and Kueue serve
// defaulting and validating webhooks that their controllers rely on (JobSet
// panics on reconcile without its defaults; Kueue suspends the Jobs it
// manages in its Job webhook): with no Service to reach them
// in this cluster, they serve on 127.0.0.1 with the API server's own
// serving certificate (it names 127.0.0.1; the test CA signs it), their
// internal certificate management off, and their webhook configurations are
// registered with clientConfig.url and that CA as caBundle.
func (c *Cluster) StartController(ctx context.Context, n Controller) error {
	if missing := ControllersMissing(n); len(missing) > 0 {
		return fmt.Errorf("controller %s: missing %v in the binary directory (run `make controllers`)", n, missing)
	}
	dir := c.bins.dir
	if err := c.InstallCRDs(ctx, filepath.Join(dir, "controller-crds", string(n))); err != nil {
		return fmt.Errorf("controller %s: %w", n, err)
	}
	bin := filepath.Join(dir, controllerBinary[n])
	env := []string{"KUBECONFIG=" + c.Kubeconfig}
	name := string(n) + "-controller"
	var args []string
	port := 0
	var kueueWebhooks func(rules []any) bool
	if apiVersion := configAPIVersion[n]; apiVersion != "" {
		var err error
		if port, err = freePort(); err != nil {
			return err
		}
		certDir := filepath.Join(c.Dir, name+"-certs")
		if err := os.MkdirAll(certDir, 0o700); err != nil {
			return err
		}
		for src, dst := range map[string]string{c.pki.ServingCert: "tls.crt", c.pki.ServingKey: "tls.key"} {
			data, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(certDir, dst), data, 0o600); err != nil {
				return err
			}
		}
		cfg := fmt.Sprintf(`apiVersion: %s
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %q
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: "0"
clientConnection:
  qps: 200
  burst: 400
`, apiVersion, port, certDir)
		if n == Kueue {
			extra, keep, err := c.kueueConfig(ctx)
			if err != nil {
				return err
			}
			cfg += extra
			kueueWebhooks = keep
			// Read by the patch hack/tools/controllers.sh applies.
			env = append(env, "KUEUE_METRICS_CERT_DIR="+certDir)
		}
		cfgPath := filepath.Join(c.Dir, name+".yaml")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			return err
		}
		args = []string{"--config=" + cfgPath}
	} else {
		args = []string{"--metrics-addr=0", "--health-probe-bind-address=0", "--enable-leader-election=false", "--log-stdout-encoder=console"}
	}
	p, err := startProcess(c.spawner, name, bin, args, env, c.Dir, c.LogFile(name))
	if err != nil {
		return err
	}
	c.addProcess(p)
	if port == 0 {
		return nil
	}
	if err := c.waitTLS(ctx, port, name); err != nil {
		return err
	}
	return c.registerWebhooks(ctx, n, port, kueueWebhooks)
}

// waitTLS waits until the webhook server answers a TLS handshake that
// verifies against the test CA.
func (c *Cluster) waitTLS(ctx context.Context, port int, name string) error {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(c.pki.caPEM)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	last := ""
	err := c.poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := c.checkAlive(); err != nil {
			return false, err
		}
		d := tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conn.Close()
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s webhook server on %s: %w (last: %s; see %s)", name, addr, err, last, c.LogFile(name))
	}
	return nil
}

// registerWebhooks creates the controller's webhook configurations with
// each webhook's service reference replaced by its URL on loopback. keep,
// when set, chooses the webhooks to register by their rules.
func (c *Cluster) registerWebhooks(ctx context.Context, n Controller, port int, keep func(rules []any) bool) error {
	objs, err := ReadObjects(webhookManifests(c.bins.dir, n))
	if err != nil {
		return err
	}
	ca := base64.StdEncoding.EncodeToString(c.pki.caPEM)
	for _, o := range objs {
		// The controllers all name theirs "mutating-webhook-configuration".
		o.SetName(string(n) + "-" + o.GetName())
		all, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		var hooks []any
		for _, h := range all {
			m, ok := h.(map[string]any)
			if !ok {
				continue
			}
			if rules, _, _ := unstructured.NestedSlice(m, "rules"); keep != nil && !keep(rules) {
				continue
			}
			hooks = append(hooks, m)
		}
		for i, h := range hooks {
			m := h.(map[string]any)
			path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
			m["clientConfig"] = map[string]any{
				"url":      fmt.Sprintf("https://127.0.0.1:%d%s", port, path),
				"caBundle": ca,
			}
			hooks[i] = m
		}
		if err := unstructured.SetNestedSlice(o.Object, hooks, "webhooks"); err != nil {
			return err
		}
	}
	return c.CreateObjects(ctx, objs...)
}
