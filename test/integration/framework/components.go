package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

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
