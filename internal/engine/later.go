package engine

import (
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Members a controller creates only after the first ones are placed
// (Snapshot.Later) are placed with their gang but never bound: the plan
// binds the members that exist and holds the others' room. In later cycles
// the room is held again, before any job is placed, beside the gang's
// bound pods (health.Beside, as for a gang cut off mid-bind), until the
// hold times out; at the gang's own turn the hold is lifted and its
// members that now exist are placed into that room. Everything is read
// from the snapshot, so a restarted driver holds the same room.

// laterOf indexes the snapshot's later members by job, leaving out holds
// past their deadline: their members are placed like any other once they
// exist.
func (c *run) laterOf() map[workload.JobID]LaterMembers {
	out := map[workload.JobID]LaterMembers{}
	for _, lm := range c.s.Later {
		if !lm.Since.IsZero() && !c.s.Now.Before(lm.Since.Add(lm.HoldFor)) {
			continue
		}
		out[lm.Job] = lm
	}
	return out
}

// holdLater holds, before anyone is placed, the room of the members not
// created yet (and of those created but still waiting) of every running
// gang within its hold.
func (c *run) holdLater() {
	c.later = c.laterOf()
	waiting := map[workload.JobID][]workload.PodRef{}
	for _, pj := range c.s.Pending {
		waiting[pj.Job.ID] = pj.Waiting
	}
	ids := make([]workload.JobID, 0, len(c.later))
	for id := range c.later {
		ids = append(ids, id) // holdJob skips gangs with nothing bound yet
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		c.holdJob(id, waiting[id])
	}
}

// holdJob holds the room of job id's members not created yet, and of its
// waiting pods given, beside its pods bound: under exclusive placement each
// part inside the domain of its own bound pods, else in the tightest domain
// holding them all. Room that no longer fits there is not held.
func (c *run) holdJob(id workload.JobID, waiting []workload.PodRef) {
	lm, ok := c.later[id]
	lj, live := c.l.byID[id]
	if !ok || !live || lj.evicted {
		return
	}
	j := lj.run.Job
	bound := append([]PodBind(nil), lj.run.Pods...)
	for _, p := range lj.placed {
		bound = append(bound, PodBind{Placed: p})
	}
	if len(bound) == 0 {
		return
	}
	byPart := map[string][]workload.PodRef{}
	var parts []string
	for _, r := range append(append([]workload.PodRef(nil), waiting...), lm.Pods...) {
		part := ""
		if j.Topology.Exclusive != "" && r.PodSet < len(j.PodSets) {
			part = j.PodSets[r.PodSet].Group
		}
		if _, seen := byPart[part]; !seen {
			parts = append(parts, part)
		}
		byPart[part] = append(byPart[part], r)
	}
	sort.Strings(parts)
	owner := cluster.HoldOwner{Kind: cluster.HoldLater, Name: string(id)}
	var held []placement.Assignment
	for _, part := range parts {
		pods, _, ok := resolvePods(c.l.view, PendingJob{Job: j, Waiting: byPart[part]})
		if !ok {
			continue
		}
		gang, _, ok := gangOf(c.l.view, j, pods)
		if !ok {
			continue
		}
		var res placement.Result
		if lv := c.l.view.LevelIndex(j.Topology.Exclusive); part != "" && lv > 0 {
			peers := partPods(j, bound, part)
			if len(peers) == 0 {
				continue
			}
			gang.Within = c.l.view.NodeDomain(peers[0].NodeIndex, lv)
			res = c.l.placer.PlaceGang(gang)
		} else {
			// Inside the domain the bound pods share at the required
			// level, the tightest first.
			if d, ok := sharedDomain(c.l.view, bound, gang.Required); ok {
				gang.Within = d
			}
			res = health.PlaceBeside(c.l.placer, gang, health.Beside(c.l.view, j, bound, gang.Required))
		}
		if res.Failure != nil {
			continue // no room beside any more: the members are placed as they come
		}
		c.l.placer.Undo()
		for _, a := range res.Assignments {
			if err := c.l.holds.Take(owner, a.Node, a.Alloc); err == nil {
				held = append(held, a)
			}
		}
	}
	c.held(id, lm, held)
}

// sharedDomain is the domain at level lv holding every pod of bound; false
// when there is no such level or they span several.
func sharedDomain(s *cluster.State, bound []PodBind, lv int) (cluster.DomainID, bool) {
	if lv <= 0 || len(bound) == 0 {
		return 0, false
	}
	d := s.NodeDomain(bound[0].NodeIndex, lv)
	for _, b := range bound[1:] {
		if s.NodeDomain(b.NodeIndex, lv) != d {
			return 0, false
		}
	}
	return d, true
}

// onePart is the exclusive part (Group) all of refs belong to; "" when the
// job has no exclusive parts or refs span several.
func onePart(j *workload.Job, refs []workload.PodRef) string {
	if j.Topology.Exclusive == "" || len(refs) == 0 {
		return ""
	}
	part := ""
	for i, r := range refs {
		if r.PodSet >= len(j.PodSets) {
			return ""
		}
		g := j.PodSets[r.PodSet].Group
		if i > 0 && g != part {
			return ""
		}
		part = g
	}
	return part
}

// partPods are the pods of bound in exclusive part (Group) part.
func partPods(j *workload.Job, bound []PodBind, part string) []PodBind {
	var out []PodBind
	for _, b := range bound {
		if b.Pod.PodSet < len(j.PodSets) && j.PodSets[b.Pod.PodSet].Group == part {
			out = append(out, b)
		}
	}
	return out
}

// held records in the plan the room kept for job id's members not created
// yet, among the assignments of its gang.
func (c *run) held(id workload.JobID, lm LaterMembers, as []placement.Assignment) {
	later := map[workload.PodRef]bool{}
	for _, r := range lm.Pods {
		later[r] = true
	}
	h := HeldRoom{Job: id, Until: lm.Since.Add(lm.HoldFor)}
	if lm.Since.IsZero() {
		h.Until = c.s.Now.Add(lm.HoldFor)
	}
	nodes := map[string]bool{}
	for _, a := range as {
		if !later[a.Pod] {
			continue
		}
		h.Pods++
		if n := c.l.view.Node(a.Node).Name; !nodes[n] {
			nodes[n] = true
			h.Nodes = append(h.Nodes, n)
		}
	}
	if h.Pods == 0 {
		return
	}
	sort.Strings(h.Nodes)
	c.l.plan.Held = append(c.l.plan.Held, h)
}

// liftLater, at a gang's own turn, gives back the room held for it, so
// that its members that now exist are placed into that room; the room of
// those not created yet is held again after (holdJob).
func (c *run) liftLater(pj PendingJob) {
	if _, ok := c.later[pj.Job.ID]; !ok {
		return
	}
	c.l.holds.ReleaseShares(func(h cluster.Hold) bool {
		return h.Owner.Kind == cluster.HoldLater && h.Owner.Name == string(pj.Job.ID)
	})
	held := c.l.plan.Held[:0]
	for _, h := range c.l.plan.Held {
		if h.Job != pj.Job.ID {
			held = append(held, h)
		}
	}
	c.l.plan.Held = held
}

// stripLater takes the members not created yet out of the plan's
// bindings: their room stays taken in the view for the rest of the cycle
// and is recorded as held.
func (c *run) stripLater() {
	for i, gb := range c.l.plan.Binds {
		lm, ok := c.later[gb.Job]
		if !ok {
			continue
		}
		later := map[workload.PodRef]bool{}
		for _, r := range lm.Pods {
			later[r] = true
		}
		var held []placement.Assignment
		kept := gb.Pods[:0:0]
		for _, pb := range gb.Pods {
			if later[pb.Pod] {
				held = append(held, placement.Assignment{Pod: pb.Pod, Node: pb.NodeIndex, Alloc: pb.Alloc})
			} else {
				kept = append(kept, pb)
			}
		}
		if len(held) > 0 {
			c.held(gb.Job, lm, held)
			c.l.plan.Stats.PodsPlaced -= len(held)
		}
		c.l.plan.Binds[i].Pods = kept
	}
}
