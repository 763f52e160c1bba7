package kube

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Explanation is `corral explain`'s answer about one pod's job. Its fields
// are a stable read model (printed as text or JSON), not the engine's types.
type Explanation struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Job       string `json:"job"`
	Pods      int    `json:"pods"`
	Bound     int    `json:"bound"`
	GangMin   int    `json:"gangMin"`
	// GangNote says why GangMin is below the declared minimum, if it is.
	GangNote  string `json:"gangNote,omitempty"`
	Shape     string `json:"shape"`
	Required  string `json:"requiredLevel,omitempty"`
	Preferred string `json:"preferredLevel,omitempty"`
	// State is one of: bound, would-bind, pending, never-fits, invalid,
	// waiting-for-pods, refused.
	State       string   `json:"state"`
	Node        string   `json:"node,omitempty"`
	GPUs        string   `json:"gpus,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	Level       string   `json:"level,omitempty"`
	Suggestions []string `json:"suggestions,omitempty"`
	// Warnings are problems that do not stop the job (e.g. a preferred
	// level the Topology does not define, which is ignored).
	Warnings []string `json:"warnings,omitempty"`
}

// Explain builds a snapshot, runs one cycle without writing anything, and
// says what corral would do with the job of namespace/pod and why.
func (s *Scheduler) Explain(ctx context.Context, namespace, pod string) (*Explanation, error) {
	if err := s.cache.Start(ctx); err != nil {
		return nil, err
	}
	s.loadHistory(ctx) // the estimates the scheduler has learned (read only: explain never saves)
	now := s.opts.Clock()
	w, err := s.cache.buildWorld(now)
	if err != nil {
		return nil, err
	}
	s.complete(w, now)
	var kj *kjob
	var ref workload.PodRef
	for _, j := range w.jobs {
		for r, p := range j.pods {
			if p.Namespace == namespace && p.Name == pod {
				kj, ref = j, r
			}
		}
	}
	if kj == nil {
		return nil, fmt.Errorf("pod %s/%s is not a pending or running pod of scheduler %q", namespace, pod, s.opts.SchedulerName)
	}
	e := &Explanation{Namespace: namespace, Pod: pod, Job: kj.key, Pods: len(kj.refs), Bound: len(kj.bound),
		GangMin: gangMinimum(kj), GangNote: kj.capped, Required: kj.job.Topology.Required, Preferred: kj.job.Topology.Preferred}
	var shapes []string
	for _, ps := range kj.job.PodSets {
		shapes = append(shapes, fmt.Sprintf("%d×[%s]", ps.Count, ps.Request.String()))
	}
	e.Shape = strings.Join(shapes, " + ")
	e.Warnings = kj.warnings
	p := kj.pods[ref]
	switch {
	case p.Spec.NodeName != "":
		e.State, e.Node, e.GPUs = "bound", p.Spec.NodeName, p.Annotations[v1alpha1.AnnotationAssignedGPUs]
		if kj.laterFrom >= 0 {
			// The room its gang holds for members not created yet, as the
			// engine decides it now (engine/later.go).
			for _, h := range s.engine.Cycle(w.snap).Held {
				if h.Job == kj.job.ID {
					e.Reason = h.Message()
				}
			}
		}
		return e, nil
	case kj.invalid != "":
		e.State, e.Reason = "invalid", kj.invalid
		e.Suggestions = []string{"fix the pod or job as the reason says; corral reads it again on the next cycle"}
		return e, nil
	case kj.waiting != "":
		e.State, e.Reason = "waiting-for-pods", kj.waiting
		e.Suggestions = []string{"corral places the gang once all its pods (and their ResourceClaims) exist"}
		if kj.waitAdvice != "" {
			e.Suggestions = []string{kj.waitAdvice}
		}
		return e, nil
	}
	plan := s.engine.Cycle(w.snap)
	for _, wn := range plan.Warnings {
		if wn.Job == kj.job.ID {
			e.Warnings = append(e.Warnings, wn.Message)
		}
	}
	for _, b := range plan.Binds {
		if b.Job != kj.job.ID {
			continue
		}
		e.State = "would-bind"
		for _, pb := range b.Pods {
			if pb.Pod == ref {
				e.Node, e.GPUs = pb.Node, strings.Join(pb.Devices, ",")
			}
		}
		e.Reason = fmt.Sprintf("fits now in %s %s; the next cycle binds it", b.Level, b.Domain)
		return e, nil
	}
	for _, pe := range plan.Pending {
		if pe.Job != kj.job.ID {
			continue
		}
		e.Reason, e.Level = pe.Reason.Message, pe.Reason.Level
		e.State = "pending"
		switch pe.Reason.Verdict {
		case placement.NeverFits:
			e.State = "never-fits"
		case placement.Refused:
			e.State = "refused"
			e.Suggestions = []string{fmt.Sprintf("label the pods with %s naming a leaf queue their namespace may use (kubectl get corralqueues)", v1alpha1.LabelQueue)}
			return e, nil
		}
		e.Suggestions = suggest(w.state, kj, pe.Reason)
	}
	return e, nil
}

// suggest says what would have to change for a waiting job to start,
// checked against the cluster: a level that does not exist is named as
// such, removing a constraint is offered only where the cluster has the
// room for the job without it, and running work is blamed only when it is
// not the gang's own bound part.
func suggest(st *cluster.State, kj *kjob, r engine.Reason) []string {
	j := kj.job
	var out []string
	need := waitingGPUMilli(kj)
	gpus := func(milli int64) string { return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64) }
	if lv := j.Topology.Required; lv != "" && st.LevelIndex(lv) < 0 {
		return []string{fmt.Sprintf("%s names the level %q, which the Topology does not define (levels: %s): name one of them",
			v1alpha1.AnnotationRequiredTopology, lv, strings.Join(st.Levels(), ", "))}
	}
	switch r.Verdict {
	case placement.NeverFits:
		out = append(out, "no domain the job may use could hold it even on an empty cluster: waiting or preempting will not help")
		if j.Topology.Required != "" && need <= st.CapacityMilli() {
			out = append(out, fmt.Sprintf("remove %s (or name a wider level) to let the gang span more than one %s",
				v1alpha1.AnnotationRequiredTopology, j.Topology.Required))
		}
		out = append(out, "or ask for fewer pods or fewer GPUs per pod")
	case placement.WaitFree:
		if len(kj.bound) > 0 {
			out = append(out, fmt.Sprintf("%d of its %d pods are bound already; the others wait for room beside them", len(kj.bound), len(kj.refs)))
		}
		if r.Pods > r.BestFits && r.Best != "" {
			out = append(out, fmt.Sprintf("%d more of the %d pods must fit in one %s: %s %s is the closest (it fits %d now)",
				r.Pods-r.BestFits, r.Pods, r.Level, r.Level, r.Best, r.BestFits))
		}
		free := st.FreeMilli()
		if need > free {
			out = append(out, fmt.Sprintf("the cluster has %s GPUs free and the waiting pods need %s: it starts when running work ends or is preempted",
				gpus(free), gpus(need)))
			break
		}
		out = append(out, "it starts on its own when running work there ends")
		if j.Topology.Required != "" {
			out = append(out, fmt.Sprintf("or remove %s to let it span %ss now (the cluster has %s GPUs free)",
				v1alpha1.AnnotationRequiredTopology, j.Topology.Required, gpus(free)))
		}
	}
	return out
}

// waitingGPUMilli is the GPU-milli of the job's pods not bound yet,
// members its controller has not created included.
func waitingGPUMilli(kj *kjob) int64 {
	var milli int64
	for _, ref := range kj.refs {
		if _, ok := kj.bound[ref]; !ok {
			milli += kj.job.PodSets[ref.PodSet].Request.GPUMilliTotal()
		}
	}
	if kj.laterFrom >= 0 {
		for _, ps := range kj.job.PodSets[kj.laterFrom:] {
			milli += int64(ps.Count) * ps.Request.GPUMilliTotal()
		}
	}
	return milli
}
