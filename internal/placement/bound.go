package placement

import "github.com/corral-dev/corral/internal/cluster"

// MayHold reports, from domain aggregates alone, whether some domain at the
// gang's top level (its required level, or the cluster) could hold every pod
// of g now. False means PlaceGang would fail; true means it may succeed. It
// costs O(domains at that level × GPUs per node): reservations call it at
// every step of a replay and run the placement search only when it says yes.
func MayHold(s *cluster.State, g Gang) bool {
	top := 0
	if g.Required >= 0 {
		top = g.Required
	}
	groups := groupPods(g.Pods)
	for _, d := range s.DomainsAt(top) {
		if boundOn(s, d, groups, false) >= len(g.Pods) {
			return true
		}
	}
	return false
}
