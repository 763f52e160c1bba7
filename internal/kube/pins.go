package kube

import (
	"context"
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// Replacement pins live in memory for speed and on the gang's healthy pods
// (AnnotationReplaceWithin) so that a scheduler restart between a failed
// rank's eviction and its replacement does not let the replacement land
// outside the gang's domain.

// persistPin writes the pin on the pods of the job that stay bound.
func (s *Scheduler) persistPin(ctx context.Context, kj *kjob, pin engine.Pin, evicted []workload.PodRef) {
	gone := map[workload.PodRef]bool{}
	for _, ref := range evicted {
		gone[ref] = true
	}
	value := pin.Level + "/" + pin.Domain
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{v1alpha1.AnnotationReplaceWithin: value}}})
	if err != nil {
		return
	}
	for _, ref := range kj.refs {
		p := kj.pods[ref]
		if gone[ref] || p == nil || p.Spec.NodeName == "" || p.Annotations[v1alpha1.AnnotationReplaceWithin] == value {
			continue
		}
		if _, err := s.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			s.log.Warn("recording a replacement pin", "pod", p.Namespace+"/"+p.Name, "err", err)
		}
	}
}

// pinFromPods reads a pin back from the job's bound pods: the first valid
// annotation naming a domain that holds every bound pod. A pin that no
// longer holds them (the gang was restarted elsewhere since) is stale and
// ignored.
func pinFromPods(st *cluster.State, kj *kjob) (engine.Pin, bool) {
	for _, ref := range kj.refs {
		p := kj.pods[ref]
		if p == nil || kj.bound[ref] == "" {
			continue
		}
		level, domain, ok := strings.Cut(p.Annotations[v1alpha1.AnnotationReplaceWithin], "/")
		if !ok || level == "" || domain == "" {
			continue
		}
		if lv := st.LevelIndex(level); lv >= 0 && allWithin(st, kj, lv, domain) {
			return engine.Pin{Level: level, Domain: domain}, true
		}
	}
	return engine.Pin{}, false
}

func allWithin(st *cluster.State, kj *kjob, lv int, domain string) bool {
	for _, node := range kj.bound {
		n, ok := st.NodeIndex(node)
		if !ok || st.Domain(st.NodeDomain(n, lv)).Name != domain {
			return false
		}
	}
	return true
}
