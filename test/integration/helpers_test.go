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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
)

// installCRDs creates corral's CRDs from deploy/crds and waits until the
// API server serves them.
func installCRDs(t *testing.T, c *framework.Cluster) {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.InstallCRDs(ctx, filepath.Join(root, "deploy", "crds")); err != nil {
		t.Fatal(err)
	}
}

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := framework.ReadObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

var topologyGVR = schema.GroupVersionResource{Group: "corral.dev", Version: "v1alpha1", Resource: v1alpha1.TopologyPlural}

// createTopology creates a Topology with the given levels (name = label
// corral.dev/<name>).
func createTopology(t *testing.T, c *framework.Cluster, levels ...string) {
	t.Helper()
	var ls []any
	for _, l := range levels {
		ls = append(ls, map[string]any{"name": l, "nodeLabel": "corral.dev/" + l})
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "corral.dev/v1alpha1", "kind": "Topology",
		"metadata": map[string]any{"name": "default"},
		"spec":     map[string]any{"levels": ls},
	}}
	if _, err := c.Dynamic.Resource(topologyGVR).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Topology: %v", err)
	}
}

// startCorral runs corral's scheduler in this process until the test ends.
func startCorral(t *testing.T, c *framework.Cluster) *kube.Scheduler {
	t.Helper()
	s, _ := startCorralWith(t, c, kube.Options{})
	return s
}

// startCorralWith runs corral in-process with the given options (cycle
// interval and logger are the tests') until stop is called or the test
// ends.
func startCorralWith(t *testing.T, c *framework.Cluster, opts kube.Options) (s *kube.Scheduler, stop func()) {
	t.Helper()
	return startCorralOn(t, c, c.Client, opts)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// addRacks adds racks × perRack kwok nodes with 8 GPUs, labelled with their
// rack, named r<i>-n<j>, and waits until they are Ready.
func addRacks(t *testing.T, c *framework.Cluster, racks, perRack int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var names []string
	for r := 0; r < racks; r++ {
		for n := 0; n < perRack; n++ {
			name := fmt.Sprintf("r%d-n%d", r, n)
			if _, err := c.AddGPUNode(ctx, framework.NodeSpec{Name: name, GPUs: 8,
				Labels: map[string]string{"corral.dev/rack": fmt.Sprintf("r%d", r), v1alpha1.LabelGPUModel: "H100"}}); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
	}
	for _, n := range names {
		if err := c.WaitNodeReady(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

func namespace(t *testing.T, c *framework.Cluster, prefix string) string {
	t.Helper()
	ns, err := c.CreateNamespace(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// gpuPodSpec is a pod template spec asking for gpus whole GPUs from corral.
func gpuPodSpec(gpus int) corev1.PodSpec {
	return corev1.PodSpec{
		SchedulerName: v1alpha1.SchedulerName,
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{
			Name: "train", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Limits:   framework.GPUQuantity(gpus),
			},
		}},
	}
}

// gpuJob is a batch/v1 Job of parallelism pods with gpus GPUs each.
func gpuJob(ns, name string, parallelism, gpus int, annotations map[string]string) *batchv1.Job {
	p := int32(parallelism)
	spec := gpuPodSpec(gpus)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			Parallelism: &p, Completions: &p,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations, Labels: map[string]string{"app": name}},
				Spec:       spec,
			},
		},
	}
}

func createJob(t *testing.T, c *framework.Cluster, j *batchv1.Job) {
	t.Helper()
	if _, err := c.Client.BatchV1().Jobs(j.Namespace).Create(context.Background(), j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podsOf lists a job's pods (by the app label the helpers set).
func podsOf(t *testing.T, c *framework.Cluster, ns, app string) []corev1.Pod {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func boundCount(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, last)
}

// scheduledCondition returns a pod's PodScheduled condition message.
func scheduledCondition(p *corev1.Pod) (reason, message string) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Reason, c.Message
		}
	}
	return "", ""
}
