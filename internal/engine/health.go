package engine

import (
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/placement"
)

// healthScorer applies suspect nodes to the view (corral only: the
// baselines know nothing of them, as kube-scheduler does not) and returns
// the scorer that puts the remaining suspects last.
func (e *Engine) healthScorer(s *Snapshot, view *cluster.State, scorer placement.Scorer) placement.Scorer {
	if !e.v.health || len(s.Suspects) == 0 {
		return scorer
	}
	avoid, _ := health.Suspects(view, s.Suspects, s.Now, s.SuspectLimit)
	if len(avoid) == 0 {
		return scorer
	}
	return health.AvoidScorer{Inner: scorer, Avoid: avoid}
}
