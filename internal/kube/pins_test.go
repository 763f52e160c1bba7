package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// waitingGang is a gang with pods bound on nodes and one more waiting for
// its replacement; annotation, if set, is the pin recorded on the bound ones.
func waitingGang(annotation string, nodes ...string) *kjob {
	kj := &kjob{job: build.Job("g").Pods(len(nodes) + 1).GPUs(8).Obj(), pods: map[workload.PodRef]*corev1.Pod{},
		bound: map[workload.PodRef]string{}}
	for i, n := range append(nodes, "") {
		ref := workload.PodRef{Index: i}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{}}}
		if n != "" {
			p.Spec.NodeName = n
			kj.bound[ref] = n
			if annotation != "" {
				p.Annotations[v1alpha1.AnnotationReplaceWithin] = annotation
			}
		}
		kj.refs = append(kj.refs, ref)
		kj.pods[ref] = p
	}
	return kj
}

// TestPinFromPods: after a scheduler restart the replacement pin comes back
// from the healthy pods' annotation, unless it no longer holds them.
func TestPinFromPods(t *testing.T) {
	st := build.State(build.Topo("rack"), build.Racks(2, 3))
	gang := waitingGang
	for _, tc := range []struct {
		name string
		kj   *kjob
		want engine.Pin
		ok   bool
	}{
		{"pin holding every bound pod", gang("rack/r0", "r0-n-0", "r0-n-1"), engine.Pin{Level: "rack", Domain: "r0"}, true},
		{"stale: the gang runs elsewhere now", gang("rack/r0", "r1-n-0", "r1-n-1"), engine.Pin{}, false},
		{"stale: the gang spans racks", gang("rack/r0", "r0-n-0", "r1-n-1"), engine.Pin{}, false},
		{"unknown level", gang("row/r0", "r0-n-0"), engine.Pin{}, false},
		{"malformed", gang("r0", "r0-n-0"), engine.Pin{}, false},
		{"no annotation", gang("", "r0-n-0"), engine.Pin{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := pinFromPods(st, tc.kj)
			if got != tc.want || ok != tc.ok {
				t.Errorf("pinFromPods = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestReplacementPin: a pod Kubernetes deleted from a failure before corral
// acted is replaced in the lowest domain holding the healthy ranks.
func TestReplacementPin(t *testing.T) {
	st := build.State(build.Topo("block", "rack"), build.Racks(2, 2))
	w := &world{state: st}
	gang := func(nodes ...string) *kjob { return waitingGang("", nodes...) }
	for _, tc := range []struct {
		name string
		kj   *kjob
		want engine.Pin
		ok   bool
	}{
		{"healthy ranks in one rack", gang("r0-n-0", "r0-n-1"), engine.Pin{Level: "rack", Domain: "r0"}, true},
		{"one healthy rank: its rack, not its host", gang("r1-n-1"), engine.Pin{Level: "rack", Domain: "r1"}, true},
		{"no healthy rank bound", gang(), engine.Pin{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := replacementPin(w, tc.kj)
			if got != tc.want || ok != tc.ok {
				t.Errorf("replacementPin = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
