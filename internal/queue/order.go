package queue

import (
	"math"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// Order ranks the leaf queues for the next job to start, DRF style:
//
//  1. queues under all their guarantees first: the queue has a guarantee and
//     uses less than it of every resource it is guaranteed (it is owed
//     capacity; resources it has no guarantee for do not count);
//  2. then the lowest dominant share: the largest usage/fair share over the
//     resources the queue uses (usage without a fair share counts as
//     infinite: the queue takes what nobody gave it);
//  3. then the higher queue priority;
//  4. then the name.
//
// usage is what each leaf's running jobs hold, fair is FairShare's result.
// Every leaf is listed, with or without usage.
func (t *Tree) Order(usage map[string]Amounts, fair map[string]Amounts) []string {
	type rank struct {
		name  string
		under bool
		dom   float64
		prio  int32
	}
	var ranks []rank
	for _, n := range t.nodes[1:] {
		if !n.leaf {
			continue
		}
		u := usage[n.spec.Name]
		ranks = append(ranks, rank{name: n.spec.Name, under: underGuarantee(u, n.spec.Guarantee),
			dom: cycle.DominantShare(u, fair[n.spec.Name]), prio: n.spec.Priority})
	}
	sort.Slice(ranks, func(i, j int) bool {
		a, b := ranks[i], ranks[j]
		switch {
		case a.under != b.under:
			return a.under
		case a.dom != b.dom:
			return a.dom < b.dom
		case a.prio != b.prio:
			return a.prio > b.prio
		}
		return a.name < b.name
	})
	out := make([]string, len(ranks))
	for i, r := range ranks {
		out[i] = r.name
	}
	return out
}

// underGuarantee: a guarantee exists and usage is below it everywhere it is set.
func underGuarantee(usage, guarantee Amounts) bool {
	has := false
	for _, r := range guarantee.Resources() {
		g := guarantee[r]
		if g <= 0 {
			continue
		}
		if usage[r] >= g {
			return false
		}
		has = true
	}
	return has
}

// Borrowed is what usage takes beyond the guarantee, per resource (absent
// where nothing is borrowed).
func Borrowed(usage, guarantee Amounts) Amounts {
	out := Amounts{}
	for _, r := range usage.Resources() {
		if b := usage[r] - guarantee[r]; b > 0 {
			out[r] = b
		}
	}
	return out
}

// QueueStatus is what a queue's status reports.
type QueueStatus struct {
	Queue, Parent string
	Leaf          bool
	Guarantee     Amounts
	Limit         Amounts // absent resource: unlimited
	Allocated     Amounts // held by running jobs; an inner queue's is its leaves' sum
	FairShare     Amounts
	Borrowed      Amounts // Allocated beyond Guarantee
}

// Status reports every queue of the tree (Queues order) from the leaves'
// usage and FairShare's result.
func (t *Tree) Status(usage map[string]Amounts, fair map[string]Amounts) []QueueStatus {
	alloc := make([]Amounts, len(t.nodes))
	for i := len(t.nodes) - 1; i >= 1; i-- {
		n := &t.nodes[i]
		a := Amounts{}
		if n.leaf {
			u := usage[n.spec.Name]
			for _, r := range u.Resources() {
				if v := u[r]; v > 0 {
					a[r] = v
				}
			}
		}
		for _, c := range n.children {
			for _, r := range alloc[c].Resources() {
				a[r] = satAdd(a[r], alloc[c][r])
			}
		}
		alloc[i] = a
	}
	out := make([]QueueStatus, 0, len(t.nodes)-1)
	for i, n := range t.nodes[1:] {
		g := n.spec.Guarantee.Clone()
		if g == nil {
			g = Amounts{}
		}
		f := fair[n.spec.Name].Clone()
		if f == nil {
			f = Amounts{}
		}
		out = append(out, QueueStatus{Queue: n.spec.Name, Parent: n.spec.Parent, Leaf: n.leaf,
			Guarantee: g, Limit: n.spec.Limit.Clone(), Allocated: alloc[i+1], FairShare: f,
			Borrowed: Borrowed(alloc[i+1], g)})
	}
	return out
}

// EffectivePriority is a job's priority plus one step for every full aging
// period it has waited since submission (none when aging is not positive),
// so a low-priority job cannot wait forever behind newer high-priority ones.
func EffectivePriority(j *workload.Job, now time.Time, aging time.Duration) int64 {
	p := int64(j.Priority)
	if aging > 0 && now.After(j.Submit) {
		steps := int64(now.Sub(j.Submit) / aging) // Sub saturates at about 292 years
		if p > 0 && steps > math.MaxInt64-p {
			return math.MaxInt64
		}
		p += steps
	}
	return p
}

// OrderJobs orders the jobs of one queue: higher effective priority first
// (EffectivePriority), then earlier submission, then ID, then input
// position. It returns indexes into jobs; nil jobs go last.
func OrderJobs(jobs []*workload.Job, now time.Time, aging time.Duration) []int {
	prio := make([]int64, len(jobs))
	for i, j := range jobs {
		if j != nil {
			prio[i] = EffectivePriority(j, now, aging)
		}
	}
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		x, y := idx[a], idx[b]
		ja, jb := jobs[x], jobs[y]
		switch {
		case (ja == nil) != (jb == nil):
			return jb == nil
		case ja == nil:
			return x < y
		case prio[x] != prio[y]:
			return prio[x] > prio[y]
		case !ja.Submit.Equal(jb.Submit):
			return ja.Submit.Before(jb.Submit)
		case ja.ID != jb.ID:
			return ja.ID < jb.ID
		}
		return x < y
	})
	return idx
}
