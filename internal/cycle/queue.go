package cycle

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Resource names one kind of capacity a queue is charged for: "cpu" in
// milli-cores, "memory" in MiB, "gpu/<model>" in GPU-milli, or any extended
// resource or DRA device class name in its own unit.
type Resource string

const (
	// CPU is measured in milli-cores.
	CPU Resource = "cpu"
	// Memory is measured in MiB.
	Memory Resource = "memory"
	// AllResources is a Weight key only: the weight of every resource the map
	// does not name (so `{AllResources: 3}` weighs a queue 3 everywhere).
	AllResources Resource = "*"
)

// GPU names the GPUs of one model, measured in GPU-milli.
func GPU(model string) Resource { return Resource("gpu/" + model) }

// Amounts is a quantity per resource. An absent resource is zero, except in
// QueueSpec.Limit, where an absent resource is unlimited.
type Amounts map[Resource]int64

// Resources lists the resources named in a, sorted.
func (a Amounts) Resources() []Resource {
	rs := make([]Resource, 0, len(a))
	for r := range a {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
	return rs
}

// Clone returns a copy of a (nil stays nil).
func (a Amounts) Clone() Amounts {
	if a == nil {
		return nil
	}
	c := make(Amounts, len(a))
	for r, v := range a {
		c[r] = v
	}
	return c
}

// String renders the amounts sorted by resource, e.g. "cpu=4000 gpu/H100=8000".
func (a Amounts) String() string {
	var b strings.Builder
	for i, r := range a.Resources() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", r, a[r])
	}
	return b.String()
}

// RootQueue is the implicit root of every queue tree. A QueueSpec whose Parent is empty
// or RootQueue hangs from it; no QueueSpec may be named RootQueue.
const RootQueue = "root"

// QueueSpec is one queue as an admin writes it (the Queue CRD's spec).
type QueueSpec struct {
	Name string
	// Parent names the parent queue; empty or "root" is the implicit root.
	Parent string
	// Guarantee is the quota the queue gets whenever its subtree asks for it.
	// Unused guarantee is lent to queues with demand.
	Guarantee Amounts
	// Limit caps the queue's share; an absent resource is unlimited.
	Limit Amounts
	// Weight divides spare capacity among siblings, per resource. An absent
	// resource weighs Weight[AllResources] if set, else 1.
	Weight map[Resource]float64
	// Priority orders leaf queues whose dominant shares are equal (higher
	// first). Leaves only.
	Priority int32
	// Namespaces may submit to the queue; empty admits any namespace. Leaves
	// only.
	Namespaces []string
	// Reclaim lets the queue (and every queue below it) preempt borrowers to
	// get its lent guarantee back. Without it, the queue waits for borrowed
	// capacity to come back as jobs end. Lending happens either way.
	Reclaim bool
	// StrictReclaim (implying Reclaim, here or on an ancestor) lets reclaim
	// evict a borrowing job even when the eviction leaves the job's queue
	// below its own guarantee, if nothing else gives the guarantee back: a
	// job that borrowed the whole cluster cannot then hold the other
	// queues' guarantees until it ends. It costs more lost work
	// (docs/preemption.md).
	StrictReclaim bool
	// DefaultFor lists the namespaces whose jobs that name no queue go to
	// this one (the Queue CRD's defaultForNamespaces). Leaves only.
	DefaultFor []string
	// Problem, set by a driver, is why it could not read the queue (a
	// malformed quantity, an unknown resource): the tree leaves it, and the
	// queues below it, out with this reason.
	Problem string
}

// WeightOf is the spec's weight for r.
func (s *QueueSpec) WeightOf(r Resource) float64 {
	if w, ok := s.Weight[r]; ok {
		return w
	}
	if w, ok := s.Weight[AllResources]; ok {
		return w
	}
	return 1
}

// Clone returns a deep copy of the spec.
func (s *QueueSpec) Clone() QueueSpec {
	c := *s
	c.Guarantee = s.Guarantee.Clone()
	c.Limit = s.Limit.Clone()
	if s.Weight != nil {
		c.Weight = make(map[Resource]float64, len(s.Weight))
		for r, w := range s.Weight {
			c.Weight[r] = w
		}
	}
	c.Namespaces = append([]string(nil), s.Namespaces...)
	if len(c.Namespaces) == 0 {
		c.Namespaces = nil
	}
	c.DefaultFor = append([]string(nil), s.DefaultFor...)
	if len(c.DefaultFor) == 0 {
		c.DefaultFor = nil
	}
	return c
}

// DominantShare is the largest usage/fair over the resources in use: 0 for
// no usage, +Inf when something is used that has no fair share.
func DominantShare(usage, fair Amounts) float64 {
	var dom float64
	for _, r := range usage.Resources() {
		u := usage[r]
		if u <= 0 {
			continue
		}
		f := fair[r]
		if f <= 0 {
			return math.Inf(1)
		}
		dom = max(dom, float64(u)/float64(f))
	}
	return dom
}
