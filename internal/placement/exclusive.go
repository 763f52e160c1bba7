package placement

import (
	"fmt"

	"github.com/corral-dev/corral/internal/cluster"
)

// Exclusive placement, as JobSet's exclusive-topology annotation asks: each
// part of a gang (a child Job) goes whole into a domain of the exclusive
// level of its own, a domain no other exclusive gang holds, and every part
// is placed in one go or none is. Placing the parts one by one, as the
// pods' anti-affinity alone would, lets two parts placed in the same cycle
// share a domain and strands the last part when the domains run out.

// exclusiveClaim is a domain an exclusive gang took since the last Commit;
// index is the log position a rollback to which undoes it.
type exclusiveClaim struct {
	index int
	d     cluster.DomainID
}

// ClaimExclusive marks domain d as held by an exclusive gang (a running
// one, or one placed and committed this cycle): no other exclusive gang's
// part is placed in it.
func (p *Placer) ClaimExclusive(d cluster.DomainID) {
	if p.claimed == nil {
		p.claimed = map[cluster.DomainID]bool{}
	}
	p.claimed[d] = true
}

// heldExclusive reports whether an exclusive gang holds d.
func (p *Placer) heldExclusive(d cluster.DomainID) bool {
	if p.claimed[d] {
		return true
	}
	for _, c := range p.claims {
		if c.d == d {
			return true
		}
	}
	return false
}

// partsOf splits the gang's pods by part, in order of first appearance
// (the largest pods first, as the engine sorts them).
func partsOf(g Gang) [][]PodReq {
	index := map[int]int{}
	var parts [][]PodReq
	for i, pod := range g.Pods {
		part := i // a pod without a part is a part alone
		if i < len(g.PartOf) {
			part = g.PartOf[i]
		}
		k, ok := index[part]
		if !ok {
			k = len(parts)
			index[part] = k
			parts = append(parts, nil)
		}
		parts[k] = append(parts[k], pod)
	}
	return parts
}

// exclusiveNeverFits says why the gang's parts could never each have a
// domain of the level to themselves, even on an empty cluster; nil if they
// could.
func exclusiveNeverFits(s *cluster.State, g Gang) *Failure {
	lv := g.Exclusive
	levelName := s.Levels()[lv]
	parts := partsOf(g)
	doms := domainsInside(s, lv, s.Domain(g.Within))
	if len(doms) < len(parts) {
		return &Failure{Verdict: NeverFits, Level: levelName,
			Message: fmt.Sprintf("exclusive placement needs %d %ss, one to each part, and %d exist", len(parts), levelName, len(doms))}
	}
	// Each part alone must fit some domain when the cluster is empty.
	for i, part := range parts {
		pg := Gang{Pods: part, Required: lv, Preferred: -1, Within: g.Within}
		if f := neverFits(s, pg, groupPods(part), lv); f != nil {
			f.Message = fmt.Sprintf("part %d of %d of the exclusive gang: %s", i+1, len(parts), f.Message)
			return f
		}
	}
	return nil
}

// placeExclusive places every part of g into a domain of level g.Exclusive
// of its own, none held by another exclusive gang; all parts or none.
func (p *Placer) placeExclusive(g Gang) Result {
	if f := exclusiveNeverFits(p.s, g); f != nil {
		return Result{Failure: f}
	}
	lv := g.Exclusive
	levelName := p.s.Levels()[lv]
	parts := partsOf(g)
	var free []cluster.DomainID
	all := domainsInside(p.s, lv, p.s.Domain(g.Within))
	for _, d := range all {
		if !p.heldExclusive(d) {
			free = append(free, d)
		}
	}
	if len(free) < len(parts) {
		return Result{Failure: &Failure{Verdict: WaitFree, Level: levelName,
			Message: fmt.Sprintf("exclusive placement needs %d %ss to itself; %d of the %d are held by other exclusive jobs",
				len(parts), levelName, len(all)-len(free), len(all))}}
	}
	m := p.mark()
	// Parts are usually alike (replicas of one child Job): a bounded
	// search, not every permutation, keeps a cycle's cost predictable.
	budget := 8 * len(parts) * len(free)
	if !p.placeParts(parts, free, map[cluster.DomainID]bool{}, &budget, m) {
		p.rollback(m)
		return Result{Failure: &Failure{Verdict: WaitFree, Level: levelName,
			Message: fmt.Sprintf("exclusive placement needs %d %ss with room for one part each now; %d %ss are free of other exclusive jobs, too few of them have the room",
				len(parts), levelName, len(free), levelName)}}
	}
	as := p.taken(m)
	// The gang's domain is the lowest one holding every part.
	level, dom := lv, p.s.NodeDomain(as[0].Node, lv)
	for ; level >= 0; level-- {
		dom = p.s.NodeDomain(as[0].Node, level)
		same := true
		for _, a := range as[1:] {
			if p.s.NodeDomain(a.Node, level) != dom {
				same = false
				break
			}
		}
		if same {
			break
		}
	}
	return Result{Assignments: as, Level: max(level, 0), Domain: dom}
}

// placeParts places parts[0] and the rest, each whole into an unused free
// domain, best fit first, backtracking while budget lasts.
func (p *Placer) placeParts(parts [][]PodReq, free []cluster.DomainID, used map[cluster.DomainID]bool, budget *int, claimAt int) bool {
	if len(parts) == 0 {
		return true
	}
	part := parts[0]
	for _, d := range p.rankDomains(free, used, part, groupPods(part)) {
		if *budget <= 0 {
			return false
		}
		*budget--
		m := p.mark()
		if p.fill(d, part, true) != len(part) {
			continue
		}
		used[d] = true
		p.claims = append(p.claims, exclusiveClaim{index: claimAt, d: d})
		if p.placeParts(parts[1:], free, used, budget, claimAt) {
			return true
		}
		p.claims = p.claims[:len(p.claims)-1]
		delete(used, d)
		p.rollback(m)
	}
	return false
}
