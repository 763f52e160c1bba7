// Package kit holds what every integration test package uses to set up a
// cluster and run corral on it: test/integration and test/integration/soak
// (its own package, so it runs beside the suite) share one copy. It is not
// part of framework because it imports corral's adapter, which the chart
// tests and `corral dev` do not need from framework.
package kit

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
)

// InstallCorralCRDs creates corral's CRDs from deploy/crds and waits until
// the API server serves them.
func InstallCorralCRDs(t testing.TB, c *framework.Cluster) {
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

// TopologyGVR is corral's cluster-scoped Topology resource.
var TopologyGVR = schema.GroupVersionResource{Group: "corral.dev", Version: "v1alpha1", Resource: v1alpha1.TopologyPlural}

// CreateTopology creates the Topology "default" with the given levels,
// each read from the node label corral.dev/<level>.
func CreateTopology(t testing.TB, c *framework.Cluster, levels ...string) {
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
	if _, err := c.Dynamic.Resource(TopologyGVR).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Topology: %v", err)
	}
}

// AddRacks adds racks × perRack kwok nodes with 8 H100 GPUs each, named
// r<i>-n<j> and labelled with their rack, and waits until they are Ready.
func AddRacks(t testing.TB, c *framework.Cluster, racks, perRack int) []string {
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

// Namespace creates a namespace named prefix plus a random suffix.
func Namespace(t testing.TB, c *framework.Cluster, prefix string) string {
	t.Helper()
	ns, err := c.CreateNamespace(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// GPUPodSpec is a pod spec asking corral for gpus whole GPUs.
func GPUPodSpec(gpus int) corev1.PodSpec {
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

// RunCorral runs corral's scheduler in this process on client (the
// cluster's, or a fault-injecting one) with a 200 ms cycle and its log in
// the test's, until stop is called or the test ends.
func RunCorral(t testing.TB, c *framework.Cluster, client kubernetes.Interface, opts kube.Options) (s *kube.Scheduler, stop func()) {
	t.Helper()
	opts.CycleInterval = 200 * time.Millisecond
	opts.Logger = slog.New(slog.NewTextHandler(TestLog{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := kube.New(client, c.Dynamic, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Run(ctx); err != nil {
			t.Errorf("scheduler: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return s, stop
}

// TestLog writes each line into the test's log.
type TestLog struct{ T testing.TB }

func (w TestLog) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
