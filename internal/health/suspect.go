package health

import (
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
)

// Suspects applies suspect nodes to the cycle's view: a node at limit
// rejections or more (and still within its suspicion) is made unschedulable
// in the view; one with fewer is returned so that scoring puts it last.
// Limit <= 0 uses DefaultSuspectLimit.
func Suspects(view *cluster.State, suspects []Suspect, now time.Time, limit int) (avoid map[int]bool, excluded []string) {
	if limit <= 0 {
		limit = DefaultSuspectLimit
	}
	for _, sp := range suspects {
		if sp.Rejections <= 0 || !now.Before(sp.Until) {
			continue
		}
		n, ok := view.NodeIndex(sp.Node)
		if !ok {
			continue
		}
		if sp.Rejections >= limit {
			view.SetSchedulable(n, false)
			excluded = append(excluded, sp.Node)
			continue
		}
		if avoid == nil {
			avoid = map[int]bool{}
		}
		avoid[n] = true
	}
	return avoid, excluded
}

// suspectPenalty is below any score a real scorer gives, so a suspect node
// wins only where nothing else fits.
const suspectPenalty = 1e12

// AvoidScorer scores suspect nodes last.
type AvoidScorer struct {
	Inner placement.Scorer
	Avoid map[int]bool
}

var _ placement.Scorer = AvoidScorer{}

// Name implements placement.Scorer.
func (a AvoidScorer) Name() string { return a.Inner.Name() + "+avoid-suspects" }

// Score implements placement.Scorer.
func (a AvoidScorer) Score(s *cluster.State, n int, r *placement.PodReq) (float64, int) {
	score, gpu := a.Inner.Score(s, n, r)
	if a.Avoid[n] {
		score -= suspectPenalty
	}
	return score, gpu
}
