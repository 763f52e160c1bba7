package placement

// Choosing the domain a gang goes into: one unused child that holds all
// its pods, best fitting first.

import (
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
)

// placeWhole tries to put all pods into one unused child: at the host level
// the best-scoring node, above it the best-fitting domain.
func (p *Placer) placeWhole(children []cluster.DomainID, used map[cluster.DomainID]bool, pods []PodReq, groups []podGroup) bool {
	if len(children) == 0 {
		return false
	}
	if p.s.Domain(children[0]).Level == p.s.HostLevel() {
		best, bestGPU := -1, -1
		var bestScore float64
		var bestPref int64
		for _, c := range children {
			if used[c] || p.bound(c, groups) < len(pods) {
				continue
			}
			n := p.s.Domain(c).Lo
			score, gpu, ok := p.scoreNode(n, pods)
			if !ok {
				continue
			}
			if pref := preferenceOf(n, pods); best < 0 || score > bestScore || score == bestScore && pref > bestPref {
				best, bestGPU, bestScore, bestPref = n, gpu, score, pref
			}
		}
		if best < 0 {
			return false
		}
		m := p.mark()
		for i := range pods {
			gpu := -1
			if i == 0 {
				gpu = bestGPU
			}
			if !p.allocOn(best, &pods[i], gpu) {
				p.rollback(m)
				return false
			}
		}
		used[p.s.NodeDomain(best, p.s.HostLevel())] = true
		return true
	}
	cands := p.rankDomains(children, used, pods, groups)
	for _, c := range cands {
		if p.fill(c, pods, true) == len(pods) {
			used[c] = true
			return true
		}
	}
	return false
}

// rankDomains returns the domains whose aggregates could hold all pods, best
// fit first (least free capacity left), ties by topology order.
func (p *Placer) rankDomains(ds []cluster.DomainID, used map[cluster.DomainID]bool, pods []PodReq, groups []podGroup) []cluster.DomainID {
	type cand struct {
		d    cluster.DomainID
		free int64
	}
	var cs []cand
	for _, d := range ds {
		if used[d] || p.bound(d, groups) < len(pods) {
			continue
		}
		cs = append(cs, cand{d, freeFor(p.s, d, groups)})
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].free != cs[j].free {
			return cs[i].free < cs[j].free
		}
		return cs[i].d < cs[j].d
	})
	out := make([]cluster.DomainID, len(cs))
	for i, c := range cs {
		out[i] = c.d
	}
	return out
}

// domainsInside lists the domains of level lv inside domain in.
func domainsInside(s *cluster.State, lv int, in *cluster.Domain) []cluster.DomainID {
	all := s.DomainsAt(lv)
	if in.Level == 0 {
		return all
	}
	var out []cluster.DomainID
	for _, d := range all {
		if dd := s.Domain(d); dd.Lo >= in.Lo && dd.Hi <= in.Hi {
			out = append(out, d)
		}
	}
	return out
}
