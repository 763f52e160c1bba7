package kube

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
)

// Condition reasons corral writes on PodScheduled=False.
const (
	// ReasonUnschedulable: the job waits for capacity, or can never fit;
	// the message says which and why.
	ReasonUnschedulable = corev1.PodReasonUnschedulable
	// ReasonInvalid: the pod or its job is written in a way corral cannot
	// schedule (a malformed annotation, a claim with an unknown DeviceClass).
	ReasonInvalid = "Invalid"
	// ReasonGangIncomplete: the gang has fewer pods (or claims) than it needs
	// yet.
	ReasonGangIncomplete = "GangIncomplete"
)

// reporter tells users why their pods wait: a PodScheduled=False condition
// with corral's reason and an event, each written only when the message
// changes so that a waiting pod costs no API traffic per cycle.
type reporter struct {
	client   kubernetes.Interface
	recorder events.EventRecorder
}

// pending marks every unbound pod of a job with why it waits.
func (r *reporter) pending(ctx context.Context, kj *kjob, reason, message string) error {
	for _, ref := range kj.refs {
		if _, bound := kj.bound[ref]; bound {
			continue
		}
		p := kj.pods[ref]
		if hasCondition(p, reason, message) {
			continue
		}
		patch, err := json.Marshal(map[string]any{
			"status": map[string]any{
				"conditions": []corev1.PodCondition{{
					Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					Reason: reason, Message: message, LastTransitionTime: metav1.Now(),
				}},
			},
		})
		if err != nil {
			return err
		}
		if _, err := r.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch,
			metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("pod %s/%s: writing PodScheduled: %w", p.Namespace, p.Name, err)
		}
		if r.recorder != nil {
			r.recorder.Eventf(p, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", message)
		}
	}
	return nil
}

// scheduled records an event for a bound pod.
func (r *reporter) scheduled(p *corev1.Pod, node, detail string) {
	if r.recorder != nil {
		r.recorder.Eventf(p, nil, corev1.EventTypeNormal, "Scheduled", "Binding",
			"Successfully assigned %s/%s to %s%s", p.Namespace, p.Name, node, detail)
	}
}

func hasCondition(p *corev1.Pod, reason, message string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == reason && c.Message == message
		}
	}
	return false
}
