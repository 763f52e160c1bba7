package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// barePod is a corral pod of 8 GPUs that kwok keeps running until deleted.
func barePod(t *testing.T, c *framework.Cluster, ns, name string, ann map[string]string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann}, Spec: kit.GPUPodSpec(8)}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func boundTo(t *testing.T, c *framework.Cluster, ns, name string) string {
	t.Helper()
	p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return p.Spec.NodeName
}

// TestBackfillReservation: a gang blocked by a running pod with a declared
// runtime gets a reservation its pods' status shows; a pod short enough is
// backfilled into the reserved rack, and stopped at its max runtime.
func TestBackfillReservation(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	kit.AddRacks(t, c, 1, 2)
	ns := kit.Namespace(t, c, "backfill-")
	startCorral(t, c)

	barePod(t, c, ns, "long", map[string]string{v1alpha1.AnnotationExpectedRuntime: "2h"})
	eventually(t, 60*time.Second, "the long pod bound", func() (bool, string) {
		return boundTo(t, c, ns, "long") != "", "not bound"
	})

	t.Run("the blocked gang shows its reservation", func(t *testing.T) {
		// 2 h on 16 GPUs protects more than the ≤ 16 GPU-hours the free
		// node idles until the long pod ends: the hold is worth it
		// (backfill.WorthHolding).
		createJob(t, c, gpuJob(ns, "big", 2, 8, map[string]string{v1alpha1.AnnotationRequiredTopology: "rack",
			v1alpha1.AnnotationExpectedRuntime: "2h"}))
		eventually(t, 60*time.Second, "the reservation in PodScheduled", func() (bool, string) {
			pods := podsOf(t, c, ns, "big")
			if len(pods) != 2 {
				return false, fmt.Sprintf("%d pods", len(pods))
			}
			for _, p := range pods {
				_, msg := scheduledCondition(&p)
				// The expected start says how sure it is (issue 17).
				if !strings.HasPrefix(msg, "rack r0 reserved, expected start in ~") || !strings.Contains(msg, " h (") ||
					!strings.Contains(msg, "confidence") {
					return false, fmt.Sprintf("pod %s: %q", p.Name, msg)
				}
			}
			return true, ""
		})
	})

	t.Run("a pod that ends first is backfilled, then stopped at its max runtime", func(t *testing.T) {
		barePod(t, c, ns, "short", map[string]string{v1alpha1.AnnotationExpectedRuntime: "2s",
			v1alpha1.AnnotationMaxRuntime: "3s"})
		eventually(t, 60*time.Second, "the short pod bound into the reserved rack", func() (bool, string) {
			return boundTo(t, c, ns, "short") != "", "not bound"
		})
		eventually(t, 60*time.Second, "the short pod evicted at its max runtime", func() (bool, string) {
			p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "short", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, ""
			}
			if err != nil {
				return false, err.Error()
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.DisruptionTarget && strings.Contains(cond.Message, "max runtime") {
					return true, ""
				}
			}
			return false, fmt.Sprintf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
		})
		if n := boundCount(podsOf(t, c, ns, "big")); n != 0 {
			t.Errorf("%d pods of the reserved gang bound while the long pod runs", n)
		}
	})

	t.Run("a pod that would not end first waits", func(t *testing.T) {
		barePod(t, c, ns, "later", map[string]string{v1alpha1.AnnotationExpectedRuntime: "5h"})
		time.Sleep(3 * time.Second)
		if node := boundTo(t, c, ns, "later"); node != "" {
			t.Fatalf("a 5 h pod was bound to %s inside a reservation starting in 2 h", node)
		}
	})
}
