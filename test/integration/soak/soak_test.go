// Package soak holds a corral cluster with running gangs for 10 minutes.
// It is a package of its own so that `go test ./test/integration/...`
// (make integration) runs it beside the main integration package, each in
// its own test binary and control plane, rather than after it: the soak
// adds its setup (~20 s) to the suite's wall time, not its 10 minutes,
// while the main package runs longer than that.
package soak

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// defaultSoak is how long the cluster is held: the 10 minutes,
// twelve times the node monitor's grace period (50 s), through which kwok
// must renew every node's Lease.
const defaultSoak = 10 * time.Minute

// TestDevClusterSoak holds a cluster with two running gangs (bare pods, and
// a Job whose pods kwok keeps running) and checks every second that no
// node leaves Ready and no pod of either gang is lost, replaced or being
// deleted. CORRAL_SOAK (a Go duration, e.g. 75s) changes the duration.
func TestDevClusterSoak(t *testing.T) {
	d := defaultSoak
	if v := os.Getenv("CORRAL_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("CORRAL_SOAK=%q: %v", v, err)
		}
	}
	c := framework.Start(t, framework.Options{})
	ctx := context.Background()
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	nodes := kit.AddRacks(t, c, 1, 4)
	setup, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ns := kit.Namespace(t, c, "soak-")
	kit.RunCorral(t, c, c.Client, kube.Options{})

	for i := 0; i < 2; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g-%d", i), Namespace: ns,
			Labels: map[string]string{"app": "soak"}, Annotations: map[string]string{v1alpha1.AnnotationGang: "soak"}}, Spec: kit.GPUPodSpec(8)}
		if _, err := c.Client.CoreV1().Pods(ns).Create(setup, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	two := int32(2)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: batchv1.JobSpec{Parallelism: &two, Completions: &two, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "soak"},
				// kwok completes Job pods at once otherwise (hack/tools/stages).
				Annotations: map[string]string{"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}},
			Spec: kit.GPUPodSpec(8)}}}
	if _, err := c.Client.BatchV1().Jobs(ns).Create(setup, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		pods = soakPods(t, c, ns)
		running := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if len(pods) == 4 && running == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the two gangs did not start: %d of %d pods running", running, len(pods))
		}
	}
	uids := map[string]string{}
	for _, p := range pods {
		uids[string(p.UID)] = p.Name
	}
	start := time.Now()
	t.Logf("holding the cluster for %s", d)
	for end := start.Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		for _, n := range nodes {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
					t.Fatalf("node %s Ready=%s (%s) after %s", n, cond.Status, cond.Reason, time.Since(start).Round(time.Second))
				}
			}
		}
		pods := soakPods(t, c, ns)
		if len(pods) != 4 {
			t.Fatalf("%d pods of the two gangs left after %s", len(pods), time.Since(start).Round(time.Second))
		}
		for _, p := range pods {
			if uids[string(p.UID)] == "" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				t.Fatalf("pod %s replaced, being deleted or not running (%s) after %s", p.Name, p.Status.Phase, time.Since(start).Round(time.Second))
			}
		}
	}
}

func soakPods(t *testing.T, c *framework.Cluster, ns string) []corev1.Pod {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=soak"})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}
