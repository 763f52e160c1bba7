package kube

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/workload"
)

// jobDeadlines is implemented by lookups that can read a batch/v1 Job's
// activeDeadlineSeconds. It is kept apart from groupLookup so that lookups
// without Jobs (and tests) need not implement it.
type jobDeadlines interface {
	jobActiveDeadline(namespace, name string) (time.Duration, bool)
}

func (l lookup) jobActiveDeadline(ns, name string) (time.Duration, bool) {
	o, ok, err := l.c.jobs.GetStore().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return 0, false
	}
	j := o.(*batchv1.Job)
	if j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds <= 0 {
		return 0, false
	}
	return time.Duration(*j.Spec.ActiveDeadlineSeconds) * time.Second, true
}

// readRuntimeLimits sets the job's max runtime and class: the max-runtime
// annotation, else the owning Job's activeDeadlineSeconds; the class label.
// It returns problems for the job's invalid reason.
func readRuntimeLimits(j *workload.Job, first *corev1.Pod, kind, name string, groups groupLookup) []string {
	var problems []string
	if v := first.Annotations[v1alpha1.AnnotationMaxRuntime]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			problems = append(problems, fmt.Sprintf("annotation %s=%q: want a positive duration such as 12h", v1alpha1.AnnotationMaxRuntime, v))
		} else {
			j.MaxRuntime = d
		}
	} else if kind == "Job" {
		if dl, ok := groups.(jobDeadlines); ok {
			if d, ok := dl.jobActiveDeadline(first.Namespace, name); ok {
				j.MaxRuntime = d
			}
		}
	}
	j.Class = first.Labels[v1alpha1.LabelClass]
	return problems
}
