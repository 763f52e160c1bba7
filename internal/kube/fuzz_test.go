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
