package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// TestKueueAdmitsCorralPlaces runs the Kueue controller (v0.17.0, built by
// `make controllers`) beside corral with the objects of
// docs/controllers/kueue.yaml and the Job of docs/controllers/kueue-job.yaml,
// applied verbatim: Kueue suspends the Job, admits it within its
// ClusterQueue's quota onto the H100 flavor with a node per pod from its
// topology-aware scheduling, and corral binds the 4 pods together exactly
// there. A second Job beyond the quota stays suspended and nothing of it is
// placed until the first is deleted; no pod is ever bound while it carries
// a scheduling gate.
func TestKueueAdmitsCorralPlaces(t *testing.T) {
	c := controlPlaneWith(t, 0, 0, framework.Kueue)
	setup, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Rack r0 has A100s, rack r1 H100s: the flavor's node label leaves
	// Kueue (and so corral) rack r1 alone.
	var nodes []string
	for r, model := range []string{"A100", "H100"} {
		for n := 0; n < 4; n++ {
			name := fmt.Sprintf("r%d-n%d", r, n)
			if _, err := c.AddGPUNode(setup, framework.NodeSpec{Name: name, GPUs: 8, Labels: map[string]string{
				"corral.dev/rack": fmt.Sprintf("r%d", r), v1alpha1.LabelGPUModel: model}}); err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, name)
		}
	}
	for _, n := range nodes {
		if err := c.WaitNodeReady(setup, n); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	ns := kit.Namespace(t, c, "kueue-")
	gated := watchPods(t, c, ns, "", func(p *corev1.Pod) bool { return len(p.Spec.SchedulingGates) > 0 })
	gatedBinds := watchPods(t, c, ns, "", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" && len(p.Spec.SchedulingGates) > 0 })
	startCorral(t, c)

	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range readObjects(t, filepath.Join(root, "docs", "controllers", "kueue.yaml")) {
		if o.GetKind() == "LocalQueue" {
			o.SetNamespace(ns)
		}
		if err := c.CreateObjects(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	// kwok would complete the pods at once; these keep running so that the
	// second Job has to wait for the first one's quota.
	job := func(name string) *unstructured.Unstructured {
		o := example(t, "kueue-job.yaml")
		o.SetName(name)
		_ = unstructured.SetNestedField(o.Object, "1h", "spec", "template", "metadata", "annotations", "pod-complete.stage.kwok.x-k8s.io/delay")
		return o
	}
	create(t, c, ns, job("train"))
	if j := getJob(t, c, ns, "train"); j.Spec.Suspend == nil || !*j.Spec.Suspend {
		t.Fatalf("Kueue's webhook did not suspend the Job (spec.suspend %v)", j.Spec.Suspend)
	}
	placedAsKueueSaid := func(name string) {
		t.Helper()
		eventually(t, 120*time.Second, "Job "+name+" admitted by Kueue and bound whole in the H100 rack", func() (bool, string) {
			pods := podsWith(t, c, ns, "batch.kubernetes.io/job-name="+name)
			for _, p := range pods {
				if p.Spec.NodeName == "" {
					continue
				}
				if !strings.HasPrefix(p.Spec.NodeName, "r1-") {
					t.Fatalf("pod %s bound to %s, outside the flavor's H100 nodes", p.Name, p.Spec.NodeName)
				}
				if host := p.Spec.NodeSelector["kubernetes.io/hostname"]; host != "" && host != p.Spec.NodeName {
					t.Fatalf("pod %s bound to %s, Kueue assigned it %s", p.Name, p.Spec.NodeName, host)
				}
			}
			return len(pods) == 4 && boundCount(pods) == 4, fmt.Sprintf("%d of %d pods bound", boundCount(pods), len(pods))
		})
		for _, p := range podsWith(t, c, ns, "batch.kubernetes.io/job-name="+name) {
			if p.Spec.NodeSelector["kubernetes.io/hostname"] == "" || p.Spec.NodeSelector[v1alpha1.LabelGPUModel] != "H100" {
				t.Errorf("pod %s: nodeSelector %v, want Kueue's flavor label and topology assignment", p.Name, p.Spec.NodeSelector)
			}
		}
	}
	placedAsKueueSaid("train")

	// Beyond the ClusterQueue's 32 GPUs: Kueue keeps it suspended, so it
	// has no pods, and nothing is placed for it.
	create(t, c, ns, job("second"))
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if j := getJob(t, c, ns, "second"); j.Spec.Suspend == nil || !*j.Spec.Suspend {
			t.Fatalf("the Job beyond the quota was admitted")
		}
		if pods := podsWith(t, c, ns, "batch.kubernetes.io/job-name=second"); boundCount(pods) > 0 {
			t.Fatalf("%d pods of the suspended Job bound", boundCount(pods))
		}
	}
	bg := metav1.DeletePropagationBackground
	if err := c.Client.BatchV1().Jobs(ns).Delete(ctx, "train", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	placedAsKueueSaid("second")
	if len(gated()) == 0 {
		t.Errorf("no pod was seen with Kueue's scheduling gate: the test did not exercise gated pods")
	}
	if got := gatedBinds(); len(got) > 0 {
		t.Errorf("pods bound while gated: %v", got)
	}
}

func getJob(t *testing.T, c *framework.Cluster, ns, name string) *batchv1.Job {
	t.Helper()
	j, err := c.Client.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}
