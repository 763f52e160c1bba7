package charttest

import (
	"context"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/kube"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/test/integration/framework"
)

// TestInstallIntoControlPlane is `helm install` against the integration
// suite's real kube-apiserver: the release installs, and the API server
// serves corral's CRDs and holds its objects. It needs the control plane
// binaries ($CORRAL_BIN, see docs/dev/control-plane.md) and is skipped
// with -short.
func TestInstallIntoControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test control plane")
	}
	c := framework.Start(t, framework.Options{})
	ns := "corral-system"
	kubeconfig := c.Kubeconfig
	getter := &genericclioptions.ConfigFlags{KubeConfig: &kubeconfig, Namespace: &ns}
	cfg := new(action.Configuration)
	if err := cfg.Init(getter, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName = "corral"
	inst.Namespace = ns
	inst.CreateNamespace = true
	inst.Timeout = 2 * time.Minute
	// helm install without --wait: the scheduler's pods cannot pull the
	// release image in the test cluster; what is checked is what the
	// chart creates.
	inst.WaitStrategy = kube.HookOnlyStrategy
	if _, err := inst.Run(ch, nil); err != nil {
		t.Fatalf("helm install: %v", err)
	}

	ctx := context.Background()
	for _, crd := range []string{v1alpha1.QueuePlural + ".corral.dev", v1alpha1.TopologyPlural + ".corral.dev"} {
		if _, err := c.Dynamic.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")).Get(ctx, crd, metav1.GetOptions{}); err != nil {
			t.Fatalf("CRD %s: %v", crd, err)
		}
	}
	// The API server serves the new resources.
	if _, err := c.Client.Discovery().ServerResourcesForGroupVersion(v1alpha1.GroupVersion.String()); err != nil {
		t.Fatalf("discovery of %s: %v", v1alpha1.GroupVersion, err)
	}
	dep, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "corral-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/corral-dev/corral:v0.1.0" {
		t.Errorf("image %s", img)
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "corral-dashboard", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	if _, err := c.Client.RbacV1().ClusterRoles().Get(ctx, "corral-scheduler", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	rels, err := action.NewList(cfg).Run()
	if err != nil || len(rels) != 1 {
		t.Errorf("helm list: %v releases, %v", len(rels), err)
	}
}
