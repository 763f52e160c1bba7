package health

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// Decision is what remediation does about one job hit by a failure.
type Decision struct {
	Job workload.JobID
	// Action is the policy carried out: RestartGang, ReplaceRanks or
	// WaitForRepair (the job is kept, nothing is evicted).
	Action workload.Remediation
	// Evict lists the pods to evict: the failed ranks for ReplaceRanks,
	// every pod for RestartGang, none while waiting.
	Evict []workload.PodRef
	// Within is the domain the replacement ranks must land in (0: anywhere).
	Within cluster.DomainID
	// Failed names what failed under the job, sorted.
	Failed []Failure
	// Since is the earliest failure time known; zero if none was given.
	Since time.Time
	// WholeGang is set when the whole gang loses its work since the last
	// checkpoint (a strict gang rolls back even when one rank is replaced).
	WholeGang bool
	Message   string
}

// Ledger is what remediation needs of the cycle's ledger (internal/engine):
// to free a hit job's pods in the running view ahead of their eviction.
type Ledger interface {
	Vacate(pods []cluster.Placed)
}

// Remediator decides, one job at a time, against the cycle's running view.
// The pods it evicts leave the view through Ledger as it decides.
type Remediator struct {
	Ledger Ledger
	View   *cluster.State
	Placer *placement.Placer
	Index  *Index
	Spares *Spares
	Now    time.Time
	// RestartOnly makes every failure a whole-job restart placed anywhere:
	// the baselines' behaviour (what Kubernetes' default scheduler does).
	RestartOnly bool
}

// StrictGang reports whether the job is a training-style gang: several pods
// that must all run together, so losing one stops all of them.
func StrictGang(j *workload.Job) bool { return j.Pods() > 1 && j.GangMin() == j.Pods() }

// Remediate returns the decision for a running job, or false when nothing
// under it failed. A ReplaceRanks decision leaves the replacement's room
// taken in the view (placed tentatively and committed), so that nothing
// else in this cycle takes it; the driver places the new ranks next cycle.
func (r *Remediator) Remediate(rj cycle.RunningJob) (Decision, bool) {
	var failedPods []int
	seen := map[Failure]bool{}
	d := Decision{Job: rj.Job.ID}
	for i, p := range rj.Pods {
		fs := r.Index.podFailures(r.View, p.NodeIndex, p.Alloc)
		if len(fs) == 0 {
			continue
		}
		failedPods = append(failedPods, i)
		for _, f := range fs {
			if !seen[f] {
				seen[f] = true
				d.Failed = append(d.Failed, f)
			}
			if !f.Since.IsZero() && (d.Since.IsZero() || f.Since.Before(d.Since)) {
				d.Since = f.Since
			}
		}
	}
	if len(failedPods) == 0 {
		return Decision{}, false
	}
	sort.Slice(d.Failed, func(i, j int) bool {
		a, b := d.Failed[i], d.Failed[j]
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		return a.Device < b.Device
	})
	what := describeFailures(d.Failed)
	job := rj.Job
	d.WholeGang = StrictGang(job)
	policy := job.Remediation
	if r.RestartOnly || job.Pods() == 1 {
		policy = workload.RestartGang
	}
	if policy == workload.WaitForRepair {
		limit := job.RepairWait
		if limit <= 0 {
			limit = workload.DefaultRepairWait
		}
		if !d.Since.IsZero() && r.Now.Sub(d.Since) < limit {
			d.Action = workload.WaitForRepair
			d.Message = fmt.Sprintf("%s failed %s ago: waiting for repair up to %s", what,
				r.Now.Sub(d.Since).Round(time.Second), limit)
			return d, true
		}
		policy = workload.RestartGang
		if d.Since.IsZero() {
			what += " (failure time unknown)"
		} else {
			what += fmt.Sprintf(" (not repaired within %s)", limit)
		}
	}
	released := map[int]bool{} // pods whose capacity is already back in the view
	if policy != workload.RestartGang {
		for _, i := range failedPods {
			released[i] = true
		}
		candidates := []cluster.DomainID{0}
		if d.WholeGang || job.Topology.Required != "" {
			candidates = r.domainsOf(rj)
		}
		within, ok := r.replaceRoom(rj, failedPods, candidates)
		if ok || policy == workload.ReplaceRanks {
			d.Action = workload.ReplaceRanks
			d.Within = within
			for _, i := range failedPods {
				d.Evict = append(d.Evict, rj.Pods[i].Pod)
			}
			where := "anywhere"
			if within != 0 {
				dom := r.View.Domain(within)
				where = fmt.Sprintf("in %s %s", r.View.Levels()[dom.Level], dom.Name)
			}
			room := "room held"
			if !ok {
				room = "no room now: they wait"
			}
			d.Message = fmt.Sprintf("%s failed: replacing %d of %d pods %s (%s)", what, len(failedPods), len(rj.Pods), where, room)
			return d, true
		}
		what += fmt.Sprintf(" (no room for %d replacement pods in %s)", len(failedPods), r.View.Domain(within).Name)
	}
	// RestartGang: the whole job goes back to pending, to be placed as a
	// gang anywhere it fits; its healthy capacity is free for this cycle.
	d.Action = workload.RestartGang
	var free []cluster.Placed
	for i, p := range rj.Pods {
		d.Evict = append(d.Evict, p.Pod)
		if !released[i] {
			free = append(free, p.Placed)
		}
	}
	r.Ledger.Vacate(free)
	d.Message = fmt.Sprintf("%s failed: restarting all %d pods", what, len(rj.Pods))
	return d, true
}

// replaceRoom releases the failed pods from the view and places
// replacements inside the first candidate domain with room, with the
// spares held there. On success the placement stays taken in the view; on
// failure the view is as it was except that the failed pods' healthy
// capacity is free, and the last candidate is returned.
func (r *Remediator) replaceRoom(rj cycle.RunningJob, failed []int, candidates []cluster.DomainID) (cluster.DomainID, bool) {
	vacate := make([]cluster.Placed, len(failed))
	for k, i := range failed {
		vacate[k] = rj.Pods[i].Placed
	}
	r.Ledger.Vacate(vacate)
	last := candidates[len(candidates)-1]
	var pods []placement.PodReq
	for _, i := range failed {
		p := rj.Pods[i]
		req, ok := requestOf(rj.Job, p.Pod)
		if !ok {
			return last, false
		}
		pr, _ := placement.Resolve(r.View, p.Pod, req)
		pods = append(pods, pr)
	}
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].GPUMilliTotal() > pods[j].GPUMilliTotal() })
	for _, within := range candidates {
		g := placement.Gang{Pods: pods, Required: -1, Preferred: -1, Within: within}
		released := r.Spares.Release(r.View, within, rj.Job.Queue)
		res := r.Placer.PlaceGang(g)
		if res.Failure == nil {
			r.Placer.Commit()
		}
		r.Spares.Rehold(r.View, released)
		if res.Failure == nil {
			return within, true
		}
	}
	return last, false
}

// domainsOf lists where a gang's replacement ranks may go, best first: the
// lowest domain holding every pod of the job (never a single host: the
// rank must be able to move to another node of it). When that domain is
// wider than the level just above the hosts (a gang spanning racks), the
// racks the gang already occupies come first, most of its pods first, so
// that a replacement does not widen the gang's span.
func (r *Remediator) domainsOf(rj cycle.RunningJob) []cluster.DomainID {
	near := r.View.HostLevel() - 1
	nodes := make([]int, 0, len(rj.Pods))
	count := map[cluster.DomainID]int{}
	for _, p := range rj.Pods {
		nodes = append(nodes, p.NodeIndex)
		if near > 0 {
			count[r.View.NodeDomain(p.NodeIndex, near)]++
		}
	}
	lca := LowestCommon(r.View, nodes, near)
	if near <= 0 || r.View.Domain(lca).Level >= near {
		return []cluster.DomainID{lca}
	}
	var out []cluster.DomainID
	for d := range count {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if count[out[i]] != count[out[j]] {
			return count[out[i]] > count[out[j]]
		}
		return out[i] < out[j]
	})
	return append(out, lca)
}

// LowestCommon is the lowest domain, at level maxLevel or above, holding
// all the nodes (0, the cluster, when they share nothing lower).
func LowestCommon(s *cluster.State, nodes []int, maxLevel int) cluster.DomainID {
	if len(nodes) == 0 {
		return 0
	}
	for lv := maxLevel; lv > 0; lv-- {
		d := s.NodeDomain(nodes[0], lv)
		same := true
		for _, n := range nodes[1:] {
			if s.NodeDomain(n, lv) != d {
				same = false
				break
			}
		}
		if same {
			return d
		}
	}
	return 0
}

func requestOf(j *workload.Job, ref workload.PodRef) (workload.Request, bool) {
	if ref.PodSet < 0 || ref.PodSet >= len(j.PodSets) || ref.Index < 0 || ref.Index >= j.PodSets[ref.PodSet].Count {
		return workload.Request{}, false
	}
	return j.PodSets[ref.PodSet].Request, true
}

func describeFailures(fs []Failure) string {
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		parts = append(parts, f.String())
	}
	if len(parts) > 3 {
		parts = append(parts[:3], fmt.Sprintf("and %d more", len(parts)-3))
	}
	return strings.Join(parts, ", ")
}
