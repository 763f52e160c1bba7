package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// volcanoQueueCRD is a stand-in for Volcano's Queue CRD with its real names
// (plural queues, short names q and queue-v1beta1), so that kubectl sees the
// two projects side by side as users run them.
const volcanoQueueCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: queues.scheduling.volcano.sh
spec:
  group: scheduling.volcano.sh
  names: {kind: Queue, listKind: QueueList, plural: queues, singular: queue, shortNames: [q, queue-v1beta1]}
  scope: Cluster
  versions:
    - name: v1beta1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// TestCRDNamesAndPrinterColumns: with Volcano's Queue CRD installed beside
// corral's, `kubectl get queues` is Volcano's, corral's queues answer to
// corralqueues and cqu, and kubectl's table shows the GPU figures the
// scheduler writes in the status.
func TestCRDNamesAndPrinterColumns(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "volcano.yaml"), []byte(volcanoQueueCRD), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.InstallCRDs(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := createQueue(ctx, c, "team-a", map[string]any{"resources": []any{
		map[string]any{"name": "nvidia.com/gpu", "guaranteed": "8", "limit": "16"}}}); err != nil {
		t.Fatal(err)
	}
	// What the scheduler writes after a cycle (queuestatus.go).
	q, err := c.Dynamic.Resource(queueGVR).Get(ctx, "team-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Object["status"] = map[string]any{
		"allocated": map[string]any{"nvidia.com/gpu": "4", "cpu": "32"},
		"fairShare": map[string]any{"nvidia.com/gpu": "12"},
		"pending":   map[string]any{"nvidia.com/gpu": "16"},
		"borrowed":  map[string]any{"nvidia.com/gpu": "2500m"},
		"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Active",
			"message": "in the tree", "lastTransitionTime": "2026-11-24T09:00:00Z"}},
	}
	if _, err := c.Dynamic.Resource(queueGVR).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	vq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
		"metadata": map[string]any{"name": "volcano-default"}}}
	if _, err := c.Dynamic.Resource(vq.GroupVersionKind().GroupVersion().WithResource("queues")).Create(ctx, vq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	bin, err := framework.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, tc := range []struct {
		args []string
		want []string // lines, columns joined by single spaces (AGE dropped)
	}{
		{[]string{"get", "queues", "-o", "name"}, []string{"queue.scheduling.volcano.sh/volcano-default"}},
		{[]string{"get", "cqu", "-o", "name"}, []string{"queue.corral.dev/team-a"}},
		{[]string{"get", "corralqueues"}, []string{"NAME PARENT ACCEPTED GPUS FAIR SHARE PENDING", "team-a True 4 12 16"}},
		{[]string{"get", "corralqueue", "team-a", "-o", "wide"}, []string{
			"NAME PARENT ACCEPTED GPUS FAIR SHARE PENDING BORROWED CPU RECLAIM REASON", "team-a True 4 12 16 2500m 32 Never Active"}},
		{[]string{"get", "corral", "-o", "name"}, []string{"queue.corral.dev/team-a"}},
	} {
		out := kubectl(tc.args...)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 && (f[len(f)-1] == "AGE" || strings.HasSuffix(f[len(f)-1], "s") || strings.HasSuffix(f[len(f)-1], "m")) && len(tc.want) > 1 {
				f = f[:len(f)-1] // the AGE column
			}
			got = append(got, strings.Join(f, " "))
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("kubectl %s:\n%s\nwant (AGE dropped):\n%s", strings.Join(tc.args, " "), out, strings.Join(tc.want, "\n"))
		}
	}
}
