package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// TestRuntimeHistorySurvivesARestart: a `corral scheduler` process learns
// the runtime of a job that succeeded and stores it in its ConfigMap
// (the default --runtime-history, in the Lease's namespace); once that
// process is killed, the next scheduler starts from it, as its
// corral_runtime_history_runs metric shows.
func TestRuntimeHistorySurvivesARestart(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	kit.AddRacks(t, c, 1, 2)
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "corral-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := kit.Namespace(t, c, "history-")
	first := startCorralProcess(t, c, "corral-1", "--leader-elect=false")

	barePod(t, c, ns, "done", map[string]string{v1alpha1.AnnotationUser: "alice"})
	if _, err := c.WaitPodPhase(ctx, ns, "done", corev1.PodRunning); err != nil {
		t.Fatal(err)
	}
	// kwok ends bare pods never and Job pods with no runtime (start =
	// finish): the test ends it as a kubelet would, after 90 s of work.
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "done", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	end := metav1.NewTime(time.Now().Truncate(time.Second))
	p.Status.Phase = corev1.PodSucceeded
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "train", Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed",
			StartedAt: metav1.NewTime(end.Add(-90 * time.Second)), FinishedAt: end}}}}
	if _, err := c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, 60*time.Second, "the run stored in corral-system/corral-runtime-history", func() (bool, string) {
		cm, err := c.Client.CoreV1().ConfigMaps("corral-system").Get(ctx, "corral-runtime-history", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		data := cm.Data["runs.csv"]
		return strings.Contains(data, ",alice,") && strings.HasSuffix(strings.TrimSpace(data), ",8gpu,0,90"), data
	})
	first.kill()

	reg := prometheus.NewRegistry()
	kit.RunCorral(t, c, c.Client, kube.Options{Registry: reg,
		RuntimeHistory: types.NamespacedName{Namespace: "corral-system", Name: "corral-runtime-history"}})
	eventually(t, 30*time.Second, "the next scheduler learned from the stored run", func() (bool, string) {
		got, err := gaugeValue(reg, "corral_runtime_history_runs")
		return err == nil && got == 1, fmt.Sprintf("%v (err %v)", got, err)
	})
}

// gaugeValue reads a gauge without labels from reg.
func gaugeValue(reg *prometheus.Registry, name string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue(), nil
		}
	}
	return 0, fmt.Errorf("no gauge %s", name)
}
