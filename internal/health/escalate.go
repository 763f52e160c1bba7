package health

import (
	"fmt"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
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
// every bound pod out of the view. The eviction is not priced: the restart
// throws away the whole gang's work since its last checkpoint, which the
// caller sets from the restart-cost model (preempt.RestartCost).
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
