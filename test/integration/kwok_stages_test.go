package integration

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// TestKwokPodCompleteDelay: kwok's pod-complete stage (bin/kwok-stages,
// written by hack/tools/stages) honours pod-complete.stage.kwok.x-k8s.io/delay:
// a Job pod with delay 1h keeps running while one without completes. Tests
// that need running gangs of Jobs (TestJobSetGang, the chaos and soak tests)
// rely on it; kwok's stock fast stage ignores the annotation.
func TestKwokPodCompleteDelay(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.AddRacks(t, c, 1, 1)
	ns := kit.Namespace(t, c, "kwok-")
	for _, j := range []struct {
		name        string
		annotations map[string]string
	}{
		{"quick", nil},
		{"held", map[string]string{"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}},
	} {
		job := gpuJob(ns, j.name, 1, 1, j.annotations)
		// Bound by the API server (no scheduler runs here): this is kwok's
		// behaviour alone.
		job.Spec.Template.Spec.NodeName = "r0-n0"
		createJob(t, c, job)
	}
	eventually(t, 60*time.Second, "the pod without a delay completes", func() (bool, string) {
		pods := podsOf(t, c, ns, "quick")
		return allSucceeded(pods), fmt.Sprintf("%d pods, %v", len(pods), phases(pods))
	})
	eventually(t, 30*time.Second, "the delayed pod runs", func() (bool, string) {
		pods := podsOf(t, c, ns, "held")
		return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning, fmt.Sprint(phases(pods))
	})
	// kwok would complete it at once (as it did "quick"); 10 s more is
	// far beyond that.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		pods := podsOf(t, c, ns, "held")
		if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning {
			t.Fatalf("the pod with delay 1h: %v, want Running", phases(pods))
		}
	}
}

func phases(pods []corev1.Pod) []corev1.PodPhase {
	var out []corev1.PodPhase
	for _, p := range pods {
		out = append(out, p.Status.Phase)
	}
	return out
}
