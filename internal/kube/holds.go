package kube

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// Room held for members a controller creates only after the first ones are
// placed (a LeaderWorkerSet group under LeaderReady, a JobSet child Job
// under exclusive placement, a JobSet's later replicated jobs under
// InOrder) is the engine's to decide (engine/later.go). The adapter only
// reports the facts: which members do not exist yet (their requests from
// the owner's template, kjob.addLater), when the gang's first pod was bound
// (read back from the pods, so a restarted scheduler holds the same room)
// and the hold timeout. It writes what the plan holds on the binding of
// the gang's first pod, for people (AnnotationHeldRoom); nothing reads it
// back.

// holdTimeout is how long the pod's gang holds room for late members, or a
// problem for the job's invalid reason: a malformed value is not silently
// replaced by the default.
func holdTimeout(p *corev1.Pod) (time.Duration, string) {
	v := p.Annotations[v1alpha1.AnnotationHoldTimeout]
	if v == "" {
		def, _ := time.ParseDuration(v1alpha1.DefaultHoldTimeout)
		return def, ""
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Sprintf("annotation %s=%q: want a positive duration such as 10m (default %s)",
			v1alpha1.AnnotationHoldTimeout, v, v1alpha1.DefaultHoldTimeout)
	}
	return d, ""
}

// laterMembers is the snapshot's fact about kj's members not created yet;
// false when it has none.
func laterMembers(kj *kjob, assumed map[string]assumedPod) (engine.LaterMembers, bool) {
	if kj.laterFrom < 0 || kj.invalid != "" || kj.waiting != "" {
		return engine.LaterMembers{}, false
	}
	lm := engine.LaterMembers{Job: kj.job.ID, HoldFor: kj.holdFor}
	for si := kj.laterFrom; si < len(kj.job.PodSets); si++ {
		for i := 0; i < kj.job.PodSets[si].Count; i++ {
			lm.Pods = append(lm.Pods, workload.PodRef{Job: kj.job.ID, PodSet: si, Index: i})
		}
	}
	// The hold runs from the gang's first binding.
	for ref := range kj.bound {
		p := kj.pods[ref]
		at := boundAt(p)
		if a, ok := assumed[string(p.UID)]; ok && at.IsZero() {
			at = a.at
		}
		if at.IsZero() {
			at = p.CreationTimestamp.Time
		}
		if lm.Since.IsZero() || at.Before(lm.Since) {
			lm.Since = at
		}
	}
	return lm, len(lm.Pods) > 0
}

// annotateHeld writes the room the plan holds for a gang bound this cycle
// on the binding of its first pod (bindAnnotations), and returns the
// message for its event, by pod UID.
func (w *world) annotateHeld(binds []engine.GangBind, held []engine.HeldRoom) map[string]string {
	byJob := map[workload.JobID]engine.HeldRoom{}
	for _, h := range held {
		byJob[h.Job] = h
	}
	msgs := map[string]string{}
	for _, gb := range binds {
		h, ok := byJob[gb.Job]
		kj := w.byID[gb.Job]
		if !ok || kj == nil || len(gb.Pods) == 0 {
			continue
		}
		uid := string(kj.pods[gb.Pods[0].Pod].UID)
		if w.bindAnnotations == nil {
			w.bindAnnotations = map[string]map[string]string{}
		}
		w.bindAnnotations[uid] = map[string]string{
			v1alpha1.AnnotationHeldRoom:  h.Message(),
			v1alpha1.AnnotationHeldUntil: h.Until.UTC().Format(time.RFC3339),
		}
		msgs[uid] = h.Message()
	}
	return msgs
}
