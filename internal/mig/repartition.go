package mig

import (
	"cmp"
	"slices"
)

// Repartition finds a layout of one empty GPU that holds exactly the wanted
// instances (profile name -> count). ok is false when a profile is unknown,
// a count is negative or above the profile's maximum, or no layout fits.
//
// The search is exhaustive: at most seven instances with at most seven starts
// each, placed largest profile first, with the instances of one profile at
// increasing starts so that no layout is visited twice. Among the layouts
// that fit it keeps the one with the most headroom, by the rule Place uses;
// ties go to the first found, which puts larger profiles at lower starts.
// The layout is returned sorted by start.
func (m Model) Repartition(want map[string]int) (Layout, bool) {
	order := m.bySize()
	var todo []int // profile index of each wanted instance, largest first
	counts := make([]int, len(m.Profiles))
	for name, n := range want {
		p := m.index(name)
		if p < 0 || n < 0 || n > m.Profiles[p].MaxCount {
			return nil, false
		}
		counts[p] = n
	}
	for _, p := range order {
		for range counts[p] {
			todo = append(todo, p)
		}
	}
	s := search{m: m, order: order, counts: counts, todo: todo, starts: make([]int, len(todo))}
	s.walk(0, 0)
	if s.best == nil {
		return nil, false
	}
	l := make(Layout, len(todo))
	for i, p := range todo {
		l[i] = Instance{Profile: m.Profiles[p].Name, Start: s.bestStarts[i]}
	}
	slices.SortFunc(l, func(a, b Instance) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Profile, b.Profile))
	})
	return l, true
}

// search is the state of Repartition's depth-first walk.
type search struct {
	m          Model
	order      []int
	counts     []int // instances per profile in every complete layout
	todo       []int
	starts     []int // start of each todo instance on the current path
	best       []int // headroom of the best complete layout so far
	bestStarts []int
}

func (s *search) walk(i int, used mask) {
	if i == len(s.todo) {
		room := s.m.headroom(s.order, used, s.counts)
		if s.best == nil || slices.Compare(room, s.best) > 0 {
			s.best, s.bestStarts = room, slices.Clone(s.starts)
		}
		return
	}
	prof := &s.m.Profiles[s.todo[i]]
	for _, st := range prof.Starts {
		// Instances of one profile are interchangeable: keep their starts
		// increasing.
		if i > 0 && s.todo[i-1] == s.todo[i] && st <= s.starts[i-1] {
			continue
		}
		span := prof.span(st)
		if used&span != 0 {
			continue
		}
		s.starts[i] = st
		s.walk(i+1, used|span)
	}
}

// CanHost reports whether a GPU holding l's instances could also hold one
// instance of profile if it were re-partitioned: whether Repartition finds a
// layout for l's instances plus that one. Place answers the narrower
// question of where the instance goes with every instance of l left where it
// is; CanHost can be true where Place fails (a 1g at start 0 blocks the 4g
// until the 1g moves).
func (m Model) CanHost(l Layout, profile string) bool {
	want := map[string]int{profile: 1}
	for _, in := range l {
		want[in.Profile]++
	}
	_, ok := m.Repartition(want)
	return ok
}
