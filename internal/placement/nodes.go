package placement

import (
	"fmt"
	"slices"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// Node eligibility (workload.NodeFilter) and anti-affinity between a job's
// pods (workload.Apart).
//
// Cost. A request without a filter costs nothing here: the domain search
// runs on aggregates alone, O(domains). With a filter, each bound of a
// domain first counts the domain's eligible nodes from the set's prefix
// sums (O(1)): a domain whose nodes are all eligible, or none, is bounded
// as before. Only a domain with some eligible nodes is walked node by node,
// stopping once the walk proves the group fits, so a constrained gang costs
// up to O(eligible nodes × levels) per search instead of O(domains). The
// usual case, a tainted GPU pool that GPU pods tolerate, leaves whole racks
// all eligible or all not, and stays on the aggregates.

// HostnameLabel is the node label kube-scheduler's anti-affinity terms use
// for "one per node"; an Apart on it maps to the host level.
const HostnameLabel = "kubernetes.io/hostname"

// eligible reports whether r may use node n at all.
func (r *PodReq) mayUse(n int) bool { return r.nodes == nil || r.nodes.Has(n) }

// preference is the pod's soft preference for node n (Request.Prefer). It
// breaks ties only: a node that scores better for placement wins whatever
// the pod prefers, so preferences never cost fragmentation or locality.
func (r *PodReq) preference(n int) int64 {
	if r.prefer == nil {
		return 0
	}
	return r.prefer[n]
}

// preferenceOf sums the preferences of pods for node n.
func preferenceOf(n int, pods []PodReq) int64 {
	var sum int64
	for i := range pods {
		sum += pods[i].preference(n)
	}
	return sum
}

// eligibleCap bounds how many pods of g the eligible nodes of domain d could
// hold, or g.count when every node of d is eligible (the aggregates then
// bound it). capacity and exactMIG are as for boundWith.
func eligibleCap(s *cluster.State, d cluster.DomainID, g podGroup, capacity, exactMIG bool) int {
	ns := g.req.nodes
	dom := s.Domain(d)
	in := ns.CountIn(dom.Lo, dom.Hi)
	switch {
	case in == dom.Hi-dom.Lo:
		return g.count
	case in == 0:
		return 0
	}
	host := s.HostLevel()
	one := []podGroup{g}
	t := 0
	ns.Each(dom.Lo, dom.Hi, func(n int) {
		if t < g.count {
			t += boundWith(s, s.NodeDomain(n, host), one, capacity, exactMIG)
		}
	})
	return min(t, g.count)
}

// apartLevel is the level whose domains an anti-affinity key names: the
// host for kubernetes.io/hostname, a topology level by its label, or -1
// for a key that is not a level (checked node by node only).
func apartLevel(s *cluster.State, key string) int {
	if key == HostnameLabel {
		return s.HostLevel()
	}
	for i, lv := range s.Topology().Levels {
		if lv.Label == key {
			return i + 1
		}
	}
	return -1
}

// apartCap bounds the pods of g one domain of level lv can hold: one per
// anti-affinity term whose key is lv or a wider level.
func apartCap(s *cluster.State, lv int, r *PodReq, count int) int {
	for _, a := range r.Apart {
		if al := apartLevel(s, a.Key); al >= 0 && lv >= al {
			return min(count, 1)
		}
	}
	return count
}

// spreadFloor is the widest level at which two pods of the gang must be
// apart: no domain at that level or below can hold the gang. It is
// HostLevel()+1 when no term binds two pods.
func spreadFloor(s *cluster.State, pods []PodReq) int {
	floor := s.HostLevel() + 1
	count := map[workload.Apart]int{}
	for i := range pods {
		for _, a := range pods[i].Apart {
			count[a]++
			if lv := apartLevel(s, a.Key); count[a] == 2 && lv >= 0 && lv < floor {
				floor = lv
			}
		}
	}
	return floor
}

// apartMark records a placed pod that carries anti-affinity terms; index is
// its position in the placer's log, for rollback.
type apartMark struct {
	index int
	job   workload.JobID
	node  int
	terms []workload.Apart
}

// apartOK reports whether r may go to node n given the pods of its job the
// placer holds uncommitted: none sharing a term may be in n's domain of the
// term's key.
func (p *Placer) apartOK(n int, r *PodReq) bool {
	if len(r.Apart) == 0 {
		return true
	}
	labels := p.s.Node(n).Labels
	for _, m := range p.apart {
		if m.job != r.Ref.Job {
			continue
		}
		other := p.s.Node(m.node).Labels
		for _, a := range r.Apart {
			v, ok := labels[a.Key]
			if !ok || !slices.Contains(m.terms, a) {
				continue
			}
			if w, ok := other[a.Key]; ok && w == v {
				return false
			}
		}
	}
	return true
}

// record appends a placement to the log, with its terms when it has any.
func (p *Placer) record(r *PodReq, n int, a cluster.Alloc) {
	if len(r.Apart) > 0 {
		p.apart = append(p.apart, apartMark{index: len(p.log), job: r.Ref.Job, node: n, terms: r.Apart})
	}
	p.log = append(p.log, Assignment{Pod: r.Ref, Node: n, Alloc: a})
}

// apartNever explains a gang whose anti-affinity terms ask for more
// distinct domains than its eligible nodes have, or returns "".
func apartNever(s *cluster.State, pods []PodReq) string {
	type need struct {
		count int
		req   *PodReq
	}
	var order []workload.Apart
	needs := map[workload.Apart]*need{}
	for i := range pods {
		for _, a := range pods[i].Apart {
			if needs[a] == nil {
				needs[a] = &need{req: &pods[i]}
				order = append(order, a)
			}
			needs[a].count++
		}
	}
	for _, a := range order {
		nd := needs[a]
		if nd.count < 2 {
			continue
		}
		values := map[string]bool{}
		unlabelled := false
		for n := 0; n < s.NumNodes(); n++ {
			if !s.Schedulable(n) || !nd.req.mayUse(n) {
				continue
			}
			if v, ok := s.Node(n).Labels[a.Key]; ok {
				values[v] = true
			} else {
				unlabelled = true
			}
		}
		if !unlabelled && len(values) < nd.count {
			return fmt.Sprintf("its pod anti-affinity puts %d pods on distinct values of %s, but the nodes it may use have %d",
				nd.count, a.Key, len(values))
		}
	}
	return ""
}

// exclusions is "; " and why nodes are not eligible for the first pod of
// groups that has a filter excluding any, or "".
func exclusions(groups []podGroup) string {
	for _, g := range groups {
		if f := g.req.Nodes; f != nil && len(f.Excluded) > 0 {
			return "; " + f.Why()
		}
	}
	return ""
}
