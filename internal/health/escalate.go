package health

import (
	"fmt"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Escalates says whether a job whose replacement ranks found no room is
// restarted whole: a strict gang under the default remediation, whose
// healthy ranks would otherwise sit idle waiting for room that is gone
// (capacity changed since the failure was remediated).
func Escalates(j *workload.Job) bool {
	return j.Remediation == workload.RemediateDefault && StrictGang(j)
}

// Escalate restarts a gang whose replacement ranks found no room: the
// cycle records the remediation and the eviction it returns, which takes
// every bound pod out of the view. The eviction is not priced: the gang
// already rolled back to its last checkpoint when its failed ranks were
// evicted (that eviction carried the cost), and its ranks have been idle
// since.
func Escalate(rj cycle.RunningJob) (cycle.Remediation, cycle.Eviction) {
	var pods []workload.PodRef
	for _, p := range rj.Pods {
		pods = append(pods, p.Pod)
	}
	msg := fmt.Sprintf("no room left for the replacement ranks: restarting all %d bound pods", len(pods))
	return cycle.Remediation{Job: rj.Job.ID, Action: workload.RestartGang, Pods: pods, Message: msg},
		cycle.Eviction{Job: rj.Job.ID, Pods: pods, Cause: cycle.CauseFailure, Message: msg}
}

// PinOf finds the domain a partly bound job's waiting pods must join: the
// driver's pin for replacement ranks (replacing), else the domain the bound
// pods share at the job's required level. problem is set when the pin names
// a level or domain the cluster does not have.
func PinOf(s *cluster.State, pj cycle.PendingJob, bound []cycle.PodBind) (within cluster.DomainID, pinned, replacing bool, problem string) {
	if pj.Within.Domain != "" {
		lv := s.LevelIndex(pj.Within.Level)
		if lv < 0 {
			return 0, false, false, fmt.Sprintf("replacement pinned to unknown topology level %q", pj.Within.Level)
		}
		for _, d := range s.DomainsAt(lv) {
			if s.Domain(d).Name == pj.Within.Domain {
				return d, true, true, ""
			}
		}
		return 0, false, false, fmt.Sprintf("replacement pinned to unknown %s %q", pj.Within.Level, pj.Within.Domain)
	}
	lv := s.LevelIndex(pj.Job.Topology.Required)
	if lv <= 0 || len(bound) == 0 {
		return 0, false, false, ""
	}
	d := s.NodeDomain(bound[0].NodeIndex, lv)
	for _, b := range bound[1:] {
		if s.NodeDomain(b.NodeIndex, lv) != d {
			return 0, false, false, "" // the bound part already spans domains: nothing to join
		}
	}
	return d, true, false, ""
}

// Beside lists, tightest first, the domains below level top that hold every
// bound pod of a gang cut off mid-bind (bound, fewer than its minimum): its
// waiting pods are tried in each before the gang's ordinary placement (up
// to top), so the rest joins the domain the engine chose for the gang whole
// as far as the free room allows. It reads the bound pods only, so a
// restarted scheduler decides the same. An elastic job grown back above its
// minimum is placed as usual.
func Beside(s *cluster.State, j *workload.Job, bound []cycle.PodBind, top int) []cluster.DomainID {
	if len(bound) == 0 || len(bound) >= j.GangMin() {
		return nil
	}
	var out []cluster.DomainID
	for lv := s.HostLevel(); lv > max(top, 0); lv-- {
		d := s.NodeDomain(bound[0].NodeIndex, lv)
		shared := true
		for _, b := range bound[1:] {
			if s.NodeDomain(b.NodeIndex, lv) != d {
				shared = false
				break
			}
		}
		if shared {
			out = append(out, d)
		}
	}
	return out
}

// PlaceBeside places g inside each of the domains tighter in turn, the
// first that holds it winning, else as g itself asks.
func PlaceBeside(p *placement.Placer, g placement.Gang, tighter []cluster.DomainID) placement.Result {
	for _, d := range tighter {
		t := g
		t.Within = d
		if res := p.PlaceGang(t); res.Failure == nil {
			return res
		}
	}
	return p.PlaceGang(g)
}
