package integration

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := framework.ReadObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
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
	return kit.RunCorral(t, c, c.Client, opts)
}

// gpuJob is a batch/v1 Job of parallelism pods with gpus GPUs each.
func gpuJob(ns, name string, parallelism, gpus int, annotations map[string]string) *batchv1.Job {
	p := int32(parallelism)
	spec := kit.GPUPodSpec(gpus)
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
