package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// A gang is cut off mid-bind when one of its bindings fails (the API
// server went away, a conflict, a timeout, the Lease) after others landed.
// Its bound pods hold GPUs for a job that cannot start, so corral finishes
// it where it stands: the missing members are placed inside the topology
// domain the engine chose for the whole gang, beside their peers, and if
// they find no room there the gang is rolled back through the Eviction
// API rather than left holding its GPUs.
//
// What is bound comes from the API server: bindPod reads back a pod whose
// binding failed in a way that leaves its fate unknown (bindresult.go),
// and the snapshot counts only bindings the server acknowledged or showed.

// cutOffPatience is how long the missing members of a cut-off gang may
// wait for room in their peers' domain before the gang is rolled back.
// The engine found room for the whole gang when it planned it, so the
// room is normally still there; waiting longer would hold the bound GPUs
// idle.
const cutOffPatience = 10 * time.Second

// cutOff is one gang cut off mid-bind. Kept in memory by the cycle
// goroutine: a restarted scheduler places the rest of such a gang through
// the ordinary path (inside its required level, if it has one).
type cutOff struct {
	pin   engine.Pin // the domain the engine chose for the whole gang
	since time.Time
	err   string // the write that failed, for the rollback's reason
}

// recordCutOff remembers a gang whose binding stopped part-way.
func (s *Scheduler) recordCutOff(gb engine.GangBind, now time.Time, err error) {
	if s.cutoffs == nil {
		s.cutoffs = map[workload.JobID]cutOff{}
	}
	if _, ok := s.cutoffs[gb.Job]; ok {
		return // cut off before: keep the first domain and time
	}
	s.cutoffs[gb.Job] = cutOff{pin: engine.Pin{Level: gb.Level, Domain: gb.Domain}, since: now, err: err.Error()}
}

// pinCutOffs makes the domain the engine chose for a cut-off gang the
// required domain of its missing members, through the engine's own rule
// for partly bound gangs (the rest joins the domain its bound pods share at
// the job's required level). The change is on this cycle's copy of the
// pending job only.
func (s *Scheduler) pinCutOffs(w *world) {
	if len(s.cutoffs) == 0 {
		return
	}
	for i, pj := range w.snap.Pending {
		c, ok := s.cutoffs[pj.Job.ID]
		kj := w.byID[pj.Job.ID]
		if !ok || kj == nil || pj.Waiting == nil || pj.Within.Domain != "" {
			continue
		}
		lv := w.state.LevelIndex(c.pin.Level)
		if lv <= 0 || !allWithin(w.state, kj, lv, c.pin.Domain) {
			continue // the cluster, or the bound pods have moved since
		}
		if req := w.state.LevelIndex(pj.Job.Topology.Required); req >= lv {
			continue // its own required level pins it as tightly already
		}
		j := *pj.Job
		j.Topology.Required = c.pin.Level
		w.snap.Pending[i].Job = &j
	}
}

// finishCutOffs runs after the plan is carried out: it forgets gangs that
// are whole again (or gone) and rolls back, through the Eviction API, a
// cut-off gang below its minimum whose missing members have found no room
// beside their peers for cutOffPatience. It returns the pods evicted.
func (s *Scheduler) finishCutOffs(ctx context.Context, w *world, plan engine.Plan, now time.Time) int {
	if len(s.cutoffs) == 0 {
		return 0
	}
	why := map[workload.JobID]engine.Reason{}
	for _, p := range plan.Pending {
		why[p.Job] = p.Reason
	}
	evicted := 0
	for job, c := range s.cutoffs {
		kj := w.byID[job]
		if kj == nil || !kj.pending() || len(kj.bound) == 0 {
			delete(s.cutoffs, job) // whole, finished, or nothing bound left
			continue
		}
		r, waiting := why[job]
		if !waiting || len(kj.bound) >= kj.job.GangMin() || now.Sub(c.since) < cutOffPatience {
			continue
		}
		if r.Verdict == placement.NeverFits {
			continue // the plan's NeverFits rollback takes it (Cycle)
		}
		msg := fmt.Sprintf("gang cut off mid-bind (%s): %d of its %d pods are bound in %s %s and the other %d found no room beside them for %s (%s); rolled back so that it starts again whole",
			c.err, len(kj.bound), len(kj.refs), c.pin.Level, c.pin.Domain, len(kj.refs)-len(kj.bound), cutOffPatience, r.Message)
		n, err := s.binder.evictGang(ctx, kj)
		if err != nil {
			s.log.Warn("rolling back a cut-off gang", "job", kj.key, "err", err)
		}
		if n == 0 {
			continue
		}
		evicted += n
		s.log.Info("rolled back a gang cut off mid-bind", "job", kj.key, "evicted", n, "reason", msg)
		for _, ref := range kj.refs {
			if _, ok := kj.bound[ref]; ok {
				s.reporter.event(kj.pods[ref], corev1.EventTypeWarning, "GangRolledBack", "Evict", "evicted: %s", msg)
			}
		}
		delete(s.cutoffs, job)
	}
	return evicted
}
