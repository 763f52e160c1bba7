package queue

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Build validates the specs and builds the tree under an implicit root.
//
// A queue is a leaf when no spec names it as its parent; only leaves take
// jobs. Build leaves a queue out, with one Problem per reason, when:
//
//   - its name is empty, "root", or used by more than one spec (every spec of
//     that name is left out: which one was meant is unknowable);
//   - an amount is negative, a resource name is empty, "*" is used outside
//     Weight, a limit is below the guarantee, or a weight is not a positive
//     finite number;
//   - it is an inner queue that sets Namespaces or Priority (both describe
//     who submits and which leaf goes first: leaf properties);
//   - its parent does not exist, or it is on a parent cycle (every queue of
//     the cycle is reported);
//   - its children's guarantees add up to more than its own, for a resource;
//   - its driver could not read it (Spec.Problem, the reason given).
//
// Every queue below a left-out queue is left out too, with a Problem naming
// the ancestor. Every other queue is in the tree. Problems are sorted by
// queue then reason; the result does not depend on the order of specs.
func Build(specs []Spec) (*Tree, []Problem) {
	b := builder{
		byName:  map[string]int{},
		count:   map[string]int{},
		parents: map[string]bool{},
		bad:     map[string]bool{},
	}
	b.specs = make([]Spec, len(specs))
	for i := range specs {
		s := specs[i].Clone()
		if s.Parent == "" {
			s.Parent = RootName
		}
		b.specs[i] = s
		b.count[s.Name]++
		b.byName[s.Name] = i
		b.parents[s.Parent] = true
	}
	b.checkSpecs()
	ok := b.checkGraph()
	t := b.tree(ok)
	sort.Slice(b.problems, func(i, j int) bool {
		if b.problems[i].Queue != b.problems[j].Queue {
			return b.problems[i].Queue < b.problems[j].Queue
		}
		return b.problems[i].Reason < b.problems[j].Reason
	})
	var ps []Problem
	for i, p := range b.problems {
		if i == 0 || p != b.problems[i-1] {
			ps = append(ps, p)
		}
	}
	t.problems = ps
	t.defaultFor = map[string][]string{}
	for _, s := range b.specs {
		if s.Problem != "" || b.count[s.Name] != 1 {
			continue
		}
		for _, ns := range s.DefaultFor {
			t.defaultFor[ns] = append(t.defaultFor[ns], s.Name)
		}
	}
	for _, names := range t.defaultFor {
		sort.Strings(names)
	}
	t.invalid = map[string]string{}
	for _, p := range ps {
		if _, seen := t.invalid[p.Queue]; !seen {
			t.invalid[p.Queue] = p.Reason
		}
	}
	return t, t.Problems()
}

type builder struct {
	specs    []Spec
	byName   map[string]int  // name -> a spec of that name (unique names only are used)
	count    map[string]int  // name -> specs with that name
	parents  map[string]bool // names some spec gives as its parent: inner queues
	bad      map[string]bool // left out by checkSpecs
	problems []Problem
}

func (b *builder) report(queue, format string, args ...any) {
	b.problems = append(b.problems, Problem{Queue: queue, Reason: fmt.Sprintf(format, args...)})
}

// checkSpecs finds what is wrong with a spec on its own (stage 1).
func (b *builder) checkSpecs() {
	for i := range b.specs {
		s := &b.specs[i]
		switch {
		case s.Name == "":
			b.report("", "a queue needs a name (parent %q)", s.Parent)
			continue
		case s.Name == RootName:
			b.report(s.Name, "the name %q is reserved for the implicit root", RootName)
			b.bad[s.Name] = true
			continue
		case b.count[s.Name] > 1:
			b.report(s.Name, "defined %d times", b.count[s.Name])
			b.bad[s.Name] = true
			continue
		case s.Problem != "":
			b.report(s.Name, "%s", s.Problem)
			b.bad[s.Name] = true
			continue
		}
		reasons := checkAmounts("guarantee", s.Guarantee)
		reasons = append(reasons, checkAmounts("limit", s.Limit)...)
		for _, r := range s.Limit.Resources() {
			if g := s.Guarantee[r]; s.Limit[r] < g && s.Limit[r] >= 0 {
				reasons = append(reasons, fmt.Sprintf("limit of %s (%s) is below its guarantee (%s)", r, amountText(r, s.Limit[r]), amountText(r, g)))
			}
		}
		ws := make([]Resource, 0, len(s.Weight))
		for r := range s.Weight {
			ws = append(ws, r)
		}
		sort.Slice(ws, func(i, j int) bool { return ws[i] < ws[j] })
		for _, r := range ws {
			w := s.Weight[r]
			switch {
			case r == "":
				reasons = append(reasons, "weight names an empty resource")
			case w <= 0 || math.IsNaN(w) || math.IsInf(w, 0):
				reasons = append(reasons, fmt.Sprintf("weight %s=%g must be a positive finite number", r, w))
			}
		}
		for _, ns := range s.Namespaces {
			if ns == "" {
				reasons = append(reasons, "namespaces lists an empty name")
				break
			}
		}
		if b.parents[s.Name] {
			if len(s.Namespaces) > 0 {
				reasons = append(reasons, "an inner queue cannot list namespaces: only leaf queues take jobs")
			}
			if s.Priority != 0 {
				reasons = append(reasons, fmt.Sprintf("an inner queue cannot set priority (%d): priority orders leaf queues", s.Priority))
			}
		}
		for _, r := range reasons {
			b.report(s.Name, "%s", r)
		}
		if len(reasons) > 0 {
			b.bad[s.Name] = true
		}
	}
}

func checkAmounts(what string, a Amounts) []string {
	var out []string
	for _, r := range a.Resources() {
		switch {
		case r == "":
			out = append(out, what+" names an empty resource")
		case r == AllResources:
			out = append(out, fmt.Sprintf("%q is only a weight key, not a %s resource", AllResources, what))
		case a[r] < 0:
			out = append(out, fmt.Sprintf("negative %s of %s: %s", what, r, amountText(r, a[r])))
		}
	}
	return out
}

// checkGraph follows every queue's parent chain to the root (stage 2) and
// returns the queues that reach it through valid queues only.
func (b *builder) checkGraph() map[string]bool {
	ok := map[string]bool{}
	cause := map[string]string{} // bad queue -> the invalid queue it falls with (itself for a root cause)
	var names []string
	for name, n := range b.count {
		if name != "" && n == 1 && !b.bad[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		var path []string
		onPath := map[string]int{}
		fail := func(nodes []string, c string) {
			for _, q := range nodes {
				cause[q] = c
				b.report(q, "left out with its ancestor %q, which is invalid", c)
			}
		}
		cur := name
		for {
			if cur == RootName {
				for _, q := range path {
					ok[q] = true
				}
				break
			}
			if ok[cur] {
				for _, q := range path {
					ok[q] = true
				}
				break
			}
			if c, done := cause[cur]; done {
				fail(path, c)
				break
			}
			if b.bad[cur] {
				fail(path, cur)
				break
			}
			if at, seen := onPath[cur]; seen {
				cycle := path[at:]
				msg := cycleText(cycle)
				for _, q := range cycle {
					cause[q] = q
					b.report(q, "%s", msg)
				}
				fail(path[:at], cur)
				break
			}
			if b.count[cur] == 0 {
				last := path[len(path)-1]
				cause[last] = last
				b.report(last, "unknown parent %q", cur)
				fail(path[:len(path)-1], last)
				break
			}
			onPath[cur] = len(path)
			path = append(path, cur)
			cur = b.specs[b.byName[cur]].Parent
		}
	}
	return ok
}

// cycleText renders a parent cycle from its smallest name, e.g.
// "parent cycle: a -> b -> a" (a's parent is b, b's parent is a).
func cycleText(cycle []string) string {
	start := 0
	for i, q := range cycle {
		if q < cycle[start] {
			start = i
		}
	}
	var parts []string
	for i := range cycle {
		parts = append(parts, cycle[(start+i)%len(cycle)])
	}
	parts = append(parts, cycle[start])
	return "parent cycle: " + strings.Join(parts, " -> ")
}

// tree lays the valid queues out depth first from the root, leaving out each
// queue whose children's guarantees exceed its own (stage 3) with its
// subtree. Going top down is enough: leaving a queue out only lowers the sum
// its parent was already checked against.
func (b *builder) tree(ok map[string]bool) *Tree {
	children := map[string][]string{}
	for name := range ok {
		p := b.specs[b.byName[name]].Parent
		children[p] = append(children[p], name)
	}
	for _, c := range children {
		sort.Strings(c)
	}
	t := &Tree{index: map[string]int{}}
	t.nodes = append(t.nodes, node{spec: Spec{Name: RootName}, parent: -1})
	t.index[RootName] = 0
	var walk func(parent int, name string)
	walk = func(parent int, name string) {
		s := b.specs[b.byName[name]]
		if reason := b.overcommitted(&s, children[name]); reason != "" {
			b.report(name, "%s", reason)
			b.dropSubtree(children, name, name)
			return
		}
		i := len(t.nodes)
		t.nodes = append(t.nodes, node{spec: s, parent: parent, leaf: !b.parents[name], depth: t.nodes[parent].depth + 1})
		t.index[name] = i
		t.nodes[parent].children = append(t.nodes[parent].children, i)
		for _, c := range children[name] {
			walk(i, c)
		}
	}
	for _, c := range children[RootName] {
		walk(0, c)
	}
	return t
}

// overcommitted describes, for the first resource where it happens, children
// whose guarantees add up to more than the parent's guarantee.
func (b *builder) overcommitted(s *Spec, children []string) string {
	sum := Amounts{}
	for _, c := range children {
		g := b.specs[b.byName[c]].Guarantee
		for _, r := range g.Resources() {
			sum[r] = satAdd(sum[r], max(0, g[r]))
		}
	}
	var out []string
	for _, r := range sum.Resources() {
		if sum[r] <= s.Guarantee[r] {
			continue
		}
		var parts []string
		for _, c := range children {
			if v := b.specs[b.byName[c]].Guarantee[r]; v > 0 {
				parts = append(parts, fmt.Sprintf("%s %s", c, amountText(r, v)))
			}
		}
		out = append(out, fmt.Sprintf("children's guarantees of %s add up to %s (%s), above its own guarantee of %s",
			r, amountText(r, sum[r]), strings.Join(parts, ", "), amountText(r, s.Guarantee[r])))
	}
	return strings.Join(out, "; ")
}

func (b *builder) dropSubtree(children map[string][]string, name, cause string) {
	for _, c := range children[name] {
		b.report(c, "left out with its ancestor %q, which is invalid", cause)
		b.dropSubtree(children, c, cause)
	}
}

// satAdd adds non-negative amounts without wrapping.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
