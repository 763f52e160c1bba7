package placement

import (
	"fmt"
	"strings"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// Verdict separates "not now" from "never".
type Verdict uint8

const (
	// WaitFree: the job fits once running work ends or is preempted.
	WaitFree Verdict = iota + 1
	// NeverFits: no domain could hold the job even on an empty cluster, so
	// waiting or preempting would only lose work.
	NeverFits
	// WaitQuota: the job fits the cluster but its queue (or an ancestor)
	// would exceed its limit; it waits for the queue's own jobs to end.
	WaitQuota
	// Refused: the job's queue does not exist, is not a leaf, or does not
	// admit the job's namespace. It is never scheduled until that changes.
	Refused
)

func (v Verdict) String() string {
	switch v {
	case WaitFree:
		return "WaitFree"
	case NeverFits:
		return "NeverFits"
	case WaitQuota:
		return "WaitQuota"
	case Refused:
		return "Refused"
	}
	return "Unknown"
}

// Failure says why a gang could not be placed, as data and as one line.
type Failure struct {
	Verdict Verdict
	Level   string // the topology level the search could not satisfy
	// Best is the domain at Level that came closest, and BestFits how many of
	// the gang's pods its free capacity could hold.
	Best     string
	BestFits int
	Message  string
}

func (f *Failure) Error() string { return f.Message }

// explain builds the Failure for a gang that no domain at or below level top
// could hold, from aggregates only.
func explain(s *cluster.State, g Gang, groups []podGroup, top int) *Failure {
	if f := neverFits(s, g, groups, top); f != nil {
		return f
	}
	return waitFree(s, g, groups, top)
}

// CheckNeverFits says why a gang could not be placed even on an empty cluster,
// or returns nil if it could. Drivers use it for a gang that is partly
// bound: when the whole gang can never fit, the bound part is rolled back.
func CheckNeverFits(s *cluster.State, g Gang) *Failure {
	if g.Exclusive > 0 {
		return exclusiveNeverFits(s, g)
	}
	top := 0
	if g.Required >= 0 {
		top = g.Required
	}
	if lv := s.Domain(g.Within).Level; lv > top {
		top = lv
	}
	return neverFits(s, g, groupPods(g.Pods), top)
}

func neverFits(s *cluster.State, g Gang, groups []podGroup, top int) *Failure {
	need := len(g.Pods)
	shape := describe(groups)
	levelName := s.Levels()[top]
	// Never: even the empty cluster has no domain at the top level holding it.
	bestCap, bestCapName := -1, ""
	for _, d := range domainsInside(s, top, s.Domain(g.Within)) {
		if c := boundOn(s, d, groups, true); c > bestCap {
			bestCap, bestCapName = c, s.Domain(d).Name
		}
	}
	for _, g := range groups {
		if !everFits(s, g.req) {
			return &Failure{Verdict: NeverFits, Level: cluster.LevelHost,
				Message: fmt.Sprintf("no node could ever hold one pod of %s: %s", g.req.Request.String(), largestNodeText(s, g.req))}
		}
	}
	if why := apartNever(s, g.Pods); why != "" {
		return &Failure{Verdict: NeverFits, Level: levelName, Message: fmt.Sprintf("%s could never be placed: %s", shape, why)}
	}
	if bestCap < need {
		where := "the cluster"
		if top > 0 {
			where = fmt.Sprintf("any %s", levelName)
		}
		return &Failure{Verdict: NeverFits, Level: levelName, Best: bestCapName, BestFits: max(bestCap, 0),
			Message: fmt.Sprintf("%s could never hold %s: the largest %s (%s) holds %d of %d pods when empty%s",
				where, shape, levelName, bestCapName, max(bestCap, 0), need, exclusions(groups))}
	}
	return nil
}

func waitFree(s *cluster.State, g Gang, groups []podGroup, top int) *Failure {
	need := len(g.Pods)
	shape := describe(groups)
	levelName := s.Levels()[top]
	bestNow, bestName := -1, ""
	var bestFree int64
	for _, d := range domainsInside(s, top, s.Domain(g.Within)) {
		b := boundWith(s, d, groups, false, true)
		if b > bestNow {
			bestNow, bestName, bestFree = b, s.Domain(d).Name, freeFor(s, d, groups)
		}
	}
	msg := fmt.Sprintf("no %s has room for %s now; best %s %s fits %d of %d pods (%s free)",
		levelName, shape, levelName, bestName, max(bestNow, 0), need, freeText(bestFree, groups))
	if top == 0 {
		msg = fmt.Sprintf("the cluster has no room for %s now (fits %d of %d pods, %s free)",
			shape, max(bestNow, 0), need, freeText(bestFree, groups))
	}
	for _, g := range groups {
		if g.req.Devices != nil {
			// Aggregates count every free GPU; say how many the filter allows.
			msg += fmt.Sprintf("; %d free devices match its selectors and constraints", freeEligible(s, g.req))
			break
		}
	}
	msg += exclusions(groups)
	return &Failure{Verdict: WaitFree, Level: levelName, Best: bestName, BestFits: max(bestNow, 0), Message: msg}
}

func describe(groups []podGroup) string {
	var parts []string
	for _, g := range groups {
		parts = append(parts, fmt.Sprintf("%d×[%s]", g.count, g.req.Request.String()))
	}
	return strings.Join(parts, " + ")
}

func freeText(free int64, groups []podGroup) string {
	for _, g := range groups {
		if g.req.GPUMilliTotal() > 0 {
			return workload.GPUText(free)
		}
	}
	return workload.CPUText(free)
}

// everFits reports whether some schedulable node, empty, could hold one pod.
func everFits(s *cluster.State, r *PodReq) bool {
	for n := 0; n < s.NumNodes(); n++ {
		node := s.Node(n)
		if !s.Schedulable(n) || !r.mayUse(n) || node.CPUMilli < r.CPUMilli || node.MemMiB < r.MemMiB || !r.NodeMatches(node.Labels) {
			continue
		}
		if !r.NeedsGPU() {
			return true
		}
		if eligibleOnNode(s, n, r) >= r.DeviceCount() {
			return true
		}
	}
	return false
}

// freeEligible counts the wholly free devices a filtered request may use.
func freeEligible(s *cluster.State, r *PodReq) int {
	c := 0
	for n, sets := range r.eligible {
		free := s.GPUFree(n)
		for _, set := range sets {
			for _, k := range set {
				if free[k] == 1000 && r.Mask.Has(s.DeviceModel(n, k)) {
					c++
				}
			}
		}
	}
	return c
}

// eligibleOnNode is the largest number of healthy GPUs node n could give
// one pod of r, free or not: of an accepted model, and with a device filter
// inside one of its sets (a set for allocation mode All must be all healthy).
func eligibleOnNode(s *cluster.State, n int, r *PodReq) int {
	if r.Devices == nil {
		c := 0
		for k := range s.Node(n).Devices {
			if r.Mask.Has(s.DeviceModel(n, k)) && s.DeviceHealthy(n, k) {
				c++
			}
		}
		return c
	}
	best := 0
	if n >= len(r.eligible) {
		return 0
	}
	for _, set := range r.eligible[n] {
		c := 0
		for _, k := range set {
			if r.Mask.Has(s.DeviceModel(n, k)) && s.DeviceHealthy(n, k) {
				c++
			}
		}
		if r.Devices.All && c < len(set) {
			continue
		}
		if r.Devices.All {
			c = max(c, r.DeviceCount())
		}
		best = max(best, c)
	}
	return best
}

func largestNodeText(s *cluster.State, r *PodReq) string {
	if r.nodes != nil {
		// The nodes it may not use come first: they are why it never fits
		// far more often than the size of the others.
		why := r.Nodes.Why()
		if r.nodes.Len() == 0 {
			if why == "" {
				return "no node is eligible"
			}
			return why
		}
		if why != "" {
			return why + "; of the nodes it may use, " + sizeText(s, r)
		}
	}
	return sizeText(s, r)
}

// sizeText compares r with the largest node it may use.
func sizeText(s *cluster.State, r *PodReq) string {
	maxGPU, maxCPU, maxMem := 0, int64(0), int64(0)
	for n := 0; n < s.NumNodes(); n++ {
		if !r.mayUse(n) {
			continue
		}
		node := s.Node(n)
		maxGPU = max(maxGPU, eligibleOnNode(s, n, r))
		maxCPU = max(maxCPU, node.CPUMilli)
		maxMem = max(maxMem, node.MemMiB)
	}
	if r.GPUMilliTotal() > 0 && maxGPU < r.DeviceCount() && r.Devices != nil {
		if maxGPU == 0 {
			return "no healthy device matches its selectors and constraints"
		}
		return fmt.Sprintf("the largest set of devices one node has that match its selectors and constraints holds %d", maxGPU)
	}
	if r.GPUMilliTotal() > 0 && maxGPU < r.DeviceCount() {
		models := "accepted"
		if len(r.Models) > 0 {
			models = strings.Join(r.Models, "|")
		}
		return fmt.Sprintf("the largest node has %d %s GPUs", maxGPU, models)
	}
	if r.CPUMilli > maxCPU {
		return "the largest node has " + workload.CPUText(maxCPU)
	}
	if r.MemMiB > maxMem {
		return fmt.Sprintf("the largest node has %s memory", workload.MemText(maxMem))
	}
	if len(r.NodeLabels) > 0 {
		return "no node with the labels it selects has room for it even when empty"
	}
	return "no node combines the CPU, memory and GPUs it asks for"
}
