package kube

import (
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// A gang is cut off mid-bind when one of its bindings fails (the API
// server went away, a conflict, a timeout, the Lease) after others landed.
// Its bound pods hold GPUs for a job that cannot start, so corral finishes
// it where it stands: the missing members are placed inside the topology
// domain the engine chose for the whole gang, beside their peers. If they
// find no room there, the engine rolls the gang back (a CauseRollback
// eviction once the gang has run below its minimum for
// engine.CutOffGrace, measured from its pods' binding times, so a
// restarted scheduler decides the same), carried out through the
// Eviction API like every eviction of the plan.
//
// What is bound comes from the API server: bindPod reads back a pod whose
// binding failed in a way that leaves its fate unknown (bindresult.go),
// and the snapshot counts only bindings the server acknowledged or showed.

// cutOff is one gang cut off mid-bind. Kept in memory by the cycle
// goroutine: a restarted scheduler places the rest of such a gang through
// the ordinary path (inside its required level, if it has one).
type cutOff struct {
	pin engine.Pin // the domain the engine chose for the whole gang
}

// recordCutOff remembers a gang whose binding stopped part-way.
func (s *Scheduler) recordCutOff(gb engine.GangBind) {
	if s.cutoffs == nil {
		s.cutoffs = map[workload.JobID]cutOff{}
	}
	if _, ok := s.cutoffs[gb.Job]; ok {
		return // cut off before: keep the first domain
	}
	s.cutoffs[gb.Job] = cutOff{pin: engine.Pin{Level: gb.Level, Domain: gb.Domain}}
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

// forgetCutOffs forgets the gangs that are whole again, gone, or have
// nothing bound left (the engine rolled them back: a gang below its minimum
// whose rest finds no room for engine.CutOffGrace is a CauseRollback
// eviction of the plan, decided from the snapshot alone).
func (s *Scheduler) forgetCutOffs(w *world) {
	for job := range s.cutoffs {
		if kj := w.byID[job]; kj == nil || !kj.pending() || len(kj.bound) == 0 {
			delete(s.cutoffs, job)
		}
	}
}
