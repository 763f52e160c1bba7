package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
)

// FuzzPodAnnotations: whatever users write in corral's annotations, turning
// pods into jobs never panics, and a job that is not marked invalid or
// waiting passes the engine's own validation.
func FuzzPodAnnotations(f *testing.F) {
	f.Add("4", "rack", "", "250", "H100|H200", "6h", "30m", "true", int64(8))
	f.Add("many", "", "spine", "1000", "", "-1h", "x", "maybe", int64(-1))
	f.Add("0", "", "", "0", "|", "", "", "", int64(1<<40))
	f.Fuzz(func(t *testing.T, min, req, pref, milli, models, runtime, ckpt, preempt string, gpus int64) {
		p := pod("a").obj()
		p.Annotations = map[string]string{
			v1alpha1.AnnotationGang: "g", v1alpha1.AnnotationMinMembers: min,
			v1alpha1.AnnotationRequiredTopology: req, v1alpha1.AnnotationPreferredTopology: pref,
			v1alpha1.AnnotationGPUMilli: milli, v1alpha1.AnnotationGPUModels: models,
			v1alpha1.AnnotationExpectedRuntime: runtime, v1alpha1.AnnotationCheckpointInterval: ckpt,
			v1alpha1.AnnotationPreemptible: preempt,
		}
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
		p.ObjectMeta.CreationTimestamp = metav1.Now()
		for _, kj := range buildJobs([]*corev1.Pod{p}, nil, fakeGroups{}, nil, testCfg) {
			if kj.invalid == "" && kj.waiting == "" {
				if err := kj.job.Validate(); err != nil {
					t.Fatalf("accepted job fails validation: %v", err)
				}
			}
		}
	})
}

// FuzzPodSharesAndRuntimes: the annotations FuzzPodAnnotations leaves out
// (a GPU share by memory, runtime limits, remediation) and GPU counts of
// any size never panic, and a job that is not marked invalid or waiting
// passes the engine's validation, with no negative share or duration.
func FuzzPodSharesAndRuntimes(f *testing.F) {
	f.Add("10Gi", "12h", "ReplaceRanks", "30m", "10m", "1h", "1")
	f.Add("1e30", "0s", "restart", "-1h", "x", "1d", "1e30")
	f.Add("8Ei", "", "", "", "", "", "9223372036854775807")
	f.Fuzz(func(t *testing.T, mem, maxRuntime, remediation, repairWait, overhead, minRuntime, gpus string) {
		p := pod("a").obj()
		p.Annotations = map[string]string{
			v1alpha1.AnnotationGPUMemory: mem, v1alpha1.AnnotationMaxRuntime: maxRuntime,
			v1alpha1.AnnotationRemediation: remediation, v1alpha1.AnnotationRepairWait: repairWait,
			v1alpha1.AnnotationRestartOverhead: overhead, v1alpha1.AnnotationMinRuntime: minRuntime,
		}
		if q, err := resource.ParseQuantity(gpus); err == nil {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": q}
		}
		for _, kj := range buildJobs([]*corev1.Pod{p}, nil, fakeGroups{}, nil, testCfg) {
			if kj.invalid != "" || kj.waiting != "" {
				continue
			}
			if err := kj.job.Validate(); err != nil {
				t.Fatalf("accepted job fails validation: %v", err)
			}
			j := kj.job
			if r := j.PodSets[0].Request; r.GPUMemMiB < 0 || r.GPUs < 0 || j.MaxRuntime < 0 || j.RepairWait < 0 ||
				j.RestartOverhead < 0 || j.MinRuntime < 0 {
				t.Fatalf("accepted job with a negative amount: %+v, request %+v", j, r)
			}
		}
	})
}

// FuzzQueues: whatever a Queue holds (where the API server's validation was
// bypassed), converting the queues and admitting a pod into one never
// panics, and a queue the conversion accepts has amounts the engine's tree
// takes (no negative amount, no bad weight).
func FuzzQueues(f *testing.F) {
	f.Add("a", "", "gpu/H100", "8", "16", "1", "ns", "Preempt")
	f.Add("a", "a", "nvidia.com/gpu", "-1", "1e40", "0", "", "Sometimes")
	f.Add("root", "b", "*", "1.5", "0.001m", "-3", "ns", "")
	f.Fuzz(func(t *testing.T, name, parent, res, guaranteed, limit, weight, ns, policy string) {
		q := v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.QueueSpec{Parent: parent, Namespaces: []string{ns}, ReclaimPolicy: v1alpha1.ReclaimPolicy(policy)}}
		r := v1alpha1.QueueResource{Name: res}
		for _, f := range []struct {
			s   string
			dst **resource.Quantity
		}{{guaranteed, &r.Guaranteed}, {limit, &r.Limit}, {weight, &r.Weight}} {
			if v, err := resource.ParseQuantity(f.s); err == nil {
				*f.dst = &v
			}
		}
		q.Spec.Resources = []v1alpha1.QueueResource{r}
		child := v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "child"}, Spec: v1alpha1.QueueSpec{Parent: name}}
		qs := newQueueSet([]*v1alpha1.Queue{&q, &child}, nil, "nvidia.com/gpu", []string{"H100"})
		for _, s := range qs.specs {
			if s.Problem != "" {
				continue // left out by the engine with its reason
			}
			for r, v := range s.Guarantee {
				if v < 0 || r == "" {
					t.Fatalf("spec %s guarantee %s=%d", s.Name, r, v)
				}
			}
		}
		queueStatuses(qs, enginePlan(t, qs, [2]string{"", ns}, [2]string{name, ns}).Queues, "nvidia.com/gpu")
	})
}

// FuzzNodeAnnotations: whatever a node's GPU annotations and labels hold
// (an admin's or an agent's typo), reading the node never panics, and the
// node it yields passes the model's validation or comes with a warning.
func FuzzNodeAnnotations(f *testing.F) {
	f.Add(`[{"id":"g0","socket":0}]`, "gpu0,gpu9", `{"mig0":{"1g.10gb":7}}`, "NVIDIA-A100-SXM4-80GB", "81920", "8", "8")
	f.Add("[{", ",,,", "{", "H100", "-1", "x", "1e30")
	f.Add("", "", `{"mig0":{"7g.80gb":2}}`, "NVIDIA-H100-80GB-HBM3", "0", "300", "300")
	f.Fuzz(func(t *testing.T, topo, unhealthy, layout, product, memory, count, gpus string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n",
			Annotations: map[string]string{v1alpha1.AnnotationGPUTopology: topo, v1alpha1.AnnotationUnhealthyGPUs: unhealthy,
				v1alpha1.AnnotationMIGLayout: layout},
			Labels: map[string]string{v1alpha1.LabelGFDProduct: product, v1alpha1.LabelGFDMemory: memory, v1alpha1.LabelGFDCount: count}}}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")}
		if q, err := resource.ParseQuantity(gpus); err == nil {
			n.Status.Allocatable["nvidia.com/gpu"] = q
		}
		node, warns := nodeFromObject(n, "nvidia.com/gpu", nil, "gpu.nvidia.com")
		if err := node.Validate(); err != nil && len(warns) == 0 {
			t.Fatalf("node fails validation without a warning: %v", err)
		}
	})
}
