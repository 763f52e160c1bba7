package kube

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// opsT0 is when the test's pods were created (pod() sets Unix 100).
var opsT0 = time.Unix(100, 0)

func gpuNode(name string, gpus int64) cluster.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("512Gi"), "nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	cn, _ := nodeFromObject(n, "nvidia.com/gpu", nil, "gpu.nvidia.com")
	return cn
}

// scheduledAt marks a pod bound at t (the API server's PodScheduled=True).
func (b *podB) scheduledAt(t time.Time) *podB {
	b.p.Status.Conditions = append(b.p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
		Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)})
	return b
}
func (b *podB) phase(p corev1.PodPhase) *podB { b.p.Status.Phase = p; return b }
func (b *podB) queue(q string) *podB          { b.p.Labels[v1alpha1.LabelQueue] = q; return b }

// opsWorld is a world of two 8-GPU nodes and the given pods, built the way
// buildWorld builds one: the state charged with what bound pods hold.
func opsWorld(t *testing.T, pods ...*corev1.Pod) *world {
	t.Helper()
	s, err := cluster.New(cluster.Topology{}, []cluster.Node{gpuNode("n1", 8), gpuNode("n2", 8)})
	if err != nil {
		t.Fatal(err)
	}
	holds, warns := account(s, pods, map[string]assumedPod{}, nil, nil, testCfg)
	if len(warns) > 0 {
		t.Fatalf("warnings: %v", warns)
	}
	w := &world{state: s, holds: holds, pods: pods, byID: map[workload.JobID]*kjob{}}
	w.jobs = buildJobs(pods, nil, fakeGroups{}, nil, testCfg)
	for _, kj := range w.jobs {
		w.byID[kj.job.ID] = kj
	}
	return w
}

// TestOpsMetrics: one cycle's figures from a world where a 2-pod gang runs
// on n1 (bound 30 s and 60 s after its pods were created), a 2-GPU pod is
// bound on n2 but not started, and two jobs wait.
func TestOpsMetrics(t *testing.T) {
	pods := []*corev1.Pod{
		pod("train-0").gpus(4).ownedByJob("train").queue("team-a").boundTo("n1").scheduledAt(opsT0.Add(30 * time.Second)).phase(corev1.PodRunning).obj(),
		pod("train-1").gpus(4).ownedByJob("train").queue("team-a").boundTo("n1").scheduledAt(opsT0.Add(60 * time.Second)).phase(corev1.PodRunning).obj(),
		pod("pulling").gpus(2).queue("team-b").boundTo("n2").scheduledAt(opsT0.Add(10 * time.Second)).phase(corev1.PodPending).obj(),
		pod("big").gpus(8).queue("team-a").obj(),
		pod("later").gpus(8).queue("team-b").obj(),
	}
	w := opsWorld(t, pods...)
	plan := engine.Plan{Pending: []engine.Pending{
		{Job: "pod/ns/big", Reason: engine.Reason{Verdict: placement.WaitFree}},
		{Job: "pod/ns/later", Reason: engine.Reason{Verdict: placement.WaitQuota}},
	}}
	m := newOpsMetrics(opsT0)
	m.observe(w, plan, nil)

	gauges := map[string]float64{}
	for _, s := range []string{"capacity", "allocated", "in_use", "free"} {
		gauges["gpus/"+s] = testutil.ToFloat64(m.gpus.WithLabelValues(s))
	}
	for _, k := range []string{"1", "2", "4", "8"} {
		gauges["fragmented/"+k] = testutil.ToFloat64(m.fragmented.WithLabelValues(k))
	}
	gauges["pending/team-a/WaitFree"] = testutil.ToFloat64(m.pendingByWhy.WithLabelValues("team-a", "WaitFree"))
	gauges["pending/team-b/WaitQuota"] = testutil.ToFloat64(m.pendingByWhy.WithLabelValues("team-b", "WaitQuota"))
	want := map[string]float64{
		"gpus/capacity": 16, "gpus/allocated": 10, "gpus/in_use": 8, "gpus/free": 6,
		// n1 is full; n2 has 6 free: one 4-GPU pod fits (2 left over), no 8.
		"fragmented/1": 0, "fragmented/2": 0, "fragmented/4": 2, "fragmented/8": 6,
		"pending/team-a/WaitFree": 1, "pending/team-b/WaitQuota": 1,
	}
	if diff := cmp.Diff(want, gauges); diff != "" {
		t.Errorf("gauges (-want +got):\n%s", diff)
	}

	// The gang started when its second pod was bound, 60 s after creation;
	// the single pod 10 s after. Each is observed once, however many cycles
	// see it running.
	m.observe(w, plan, nil)
	waits := map[string]string{}
	for _, q := range []string{"team-a", "team-b"} {
		h := m.waitSeconds.WithLabelValues(q).(prometheus.Histogram)
		waits[q] = histogramSummary(t, h)
	}
	if diff := cmp.Diff(map[string]string{"team-a": "1 60", "team-b": "1 10"}, waits); diff != "" {
		t.Errorf("waits, count and sum (-want +got):\n%s", diff)
	}
}

// TestOpsMetricsSkipsJobsStartedBeforeTheScheduler: a new leader does not
// count the running fleet's waits again.
func TestOpsMetricsSkipsJobsStartedBeforeTheScheduler(t *testing.T) {
	w := opsWorld(t, pod("old").gpus(1).boundTo("n1").scheduledAt(opsT0.Add(time.Minute)).phase(corev1.PodRunning).obj())
	m := newOpsMetrics(opsT0.Add(time.Hour))
	m.observe(w, engine.Plan{}, nil)
	if n := testutil.CollectAndCount(m.waitSeconds); n != 0 {
		t.Errorf("%d wait series, want none", n)
	}
}

// TestPendingReasons: the adapter's own reasons beside the engine's, and
// refused jobs without the queue label their pods name.
func TestPendingReasons(t *testing.T) {
	w := opsWorld(t, pod("held").gpus(1).queue("q").obj(), pod("bad").gpus(1).queue("q").obj(),
		pod("early").gpus(1).queue("q").obj(), pod("typo").gpus(1).queue("nope").obj())
	w.byID["pod/ns/bad"].invalid = "pod bad: bad annotation"
	w.byID["pod/ns/early"].waiting = "gang waits for its pods: 1 of 2 pods exist"
	refused := engine.Plan{Pending: []engine.Pending{{Job: "pod/ns/typo",
		Reason: engine.Reason{Verdict: placement.Refused, Refusal: "UnknownQueue", Message: `queue "nope" does not exist`}}}}
	held := map[workload.JobID][]string{"pod/ns/held": {"victim"}}
	got := pendingReasons(w, refused, held)
	want := []pendingCount{{"", "Refused", 1}, {"q", pendingGangIncomplete, 1}, {"q", pendingInvalid, 1}, {"q", pendingPreempting, 1}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(pendingCount{})); diff != "" {
		t.Errorf("pendingReasons (-want +got):\n%s", diff)
	}
}

func histogramSummary(t *testing.T, h prometheus.Histogram) string {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d %g", m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum())
}
